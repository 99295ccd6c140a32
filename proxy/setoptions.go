package proxy

import (
	"bytes"
	"math"
	"time"
)

// setOptions is a parsed SET command.
type setOptions struct {
	nx, xx, get, keepTTL bool
	expire               string // "", "ex", "px", "exat", "pxat"
	n                    int64  // the expire argument
}

// ttl is the relative TTL the command asks for, measured against now for
// the absolute forms; 0 with no expiry. A non-positive result means the
// key would expire at once.
func (o setOptions) ttl(now time.Time) time.Duration {
	switch o.expire {
	case "ex":
		return time.Duration(o.n) * time.Second
	case "px":
		return time.Duration(o.n) * time.Millisecond
	case "exat":
		return time.Unix(o.n, 0).Sub(now)
	case "pxat":
		return time.UnixMilli(o.n).Sub(now)
	}
	return 0
}

// parseSet parses SET's options as Redis 7 does and returns Redis's own error
// text for bad input. As on Redis, an option may be repeated (NX NX, PX 1
// PX 2: the last expiry counts, and only its value is read), but no two
// expiries of different kinds (PX 1 EX 2), nor KEEPTTL with an expiry, nor
// NX with XX.
func parseSet(args [][]byte) (setOptions, string) {
	var o setOptions
	if len(args) < 3 {
		return o, "ERR wrong number of arguments for 'set' command"
	}
	var expArg []byte
	for i := 3; i < len(args); i++ {
		a := setOption(args[i])
		switch {
		case a == "nx" && !o.xx:
			o.nx = true
		case a == "xx" && !o.nx:
			o.xx = true
		case a == "get":
			o.get = true
		case a == "keepttl" && o.expire == "":
			o.keepTTL = true
		case (a == "ex" || a == "px" || a == "exat" || a == "pxat") && (o.expire == "" || o.expire == a) && !o.keepTTL && i+1 < len(args):
			o.expire = a
			i++
			expArg = args[i]
		default:
			return o, "ERR syntax error"
		}
	}
	if o.expire == "" {
		return o, ""
	}
	n, err := parseInt(expArg)
	if err != nil {
		return o, "ERR value is not an integer or out of range"
	}
	if n <= 0 || ((o.expire == "ex" || o.expire == "exat") && n > math.MaxInt64/1000) {
		return o, "ERR invalid expire time in 'set' command"
	}
	if o.expire == "ex" || o.expire == "exat" {
		// time.Duration holds about 292 years of milliseconds.
		if n > math.MaxInt64/int64(time.Second) {
			return o, "ERR invalid expire time in 'set' command"
		}
	} else if n > math.MaxInt64/int64(time.Millisecond) {
		return o, "ERR invalid expire time in 'set' command"
	}
	o.n = n
	return o, ""
}

// setOptionNames are the options of SET and GETEX, in lower case.
var setOptionNames = [...]string{"nx", "xx", "get", "keepttl", "ex", "px", "exat", "pxat", "persist"}

// setOption returns the option of SET or GETEX that b names, in any case
// of ASCII letters, or "" if none. As Redis reads them, as C strings: up
// to b's first NUL ("NX\x00junk" is NX).
func setOption(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
next:
	for _, name := range setOptionNames {
		if len(b) != len(name) {
			continue
		}
		for i, c := range b {
			if c|0x20 != name[i] {
				continue next
			}
		}
		return name
	}
	return ""
}
