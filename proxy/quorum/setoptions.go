package quorum

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"time"
)

// SetOptions is a parsed SET command.
type SetOptions struct {
	NX, XX, Get, KeepTTL bool
	Expire               string // "", "ex", "px", "exat", "pxat"
	N                    int64  // the expire argument
}

// TTL is the relative TTL the command asks for, measured against now for
// the absolute forms; 0 with no expiry. A non-positive result means the
// key would expire at once.
func (o SetOptions) TTL(now time.Time) time.Duration {
	switch o.Expire {
	case "ex":
		return time.Duration(o.N) * time.Second
	case "px":
		return time.Duration(o.N) * time.Millisecond
	case "exat":
		return time.Unix(o.N, 0).Sub(now)
	case "pxat":
		return time.UnixMilli(o.N).Sub(now)
	}
	return 0
}

// ParseSet parses SET's options as Redis 7 does and returns Redis's own error
// text for bad input. As on Redis, an option may be repeated (NX NX, PX 1
// PX 2: the last expiry counts, and only its value is read), but no two
// expiries of different kinds (PX 1 EX 2), nor KEEPTTL with an expiry, nor
// NX with XX.
func ParseSet(args [][]byte) (SetOptions, string) {
	var o SetOptions
	if len(args) < 3 {
		return o, "ERR wrong number of arguments for 'set' command"
	}
	var expArg []byte
	for i := 3; i < len(args); i++ {
		a := SetOption(args[i])
		switch {
		case a == "nx" && !o.XX:
			o.NX = true
		case a == "xx" && !o.NX:
			o.XX = true
		case a == "get":
			o.Get = true
		case a == "keepttl" && o.Expire == "":
			o.KeepTTL = true
		case (a == "ex" || a == "px" || a == "exat" || a == "pxat") && (o.Expire == "" || o.Expire == a) && !o.KeepTTL && i+1 < len(args):
			o.Expire = a
			i++
			expArg = args[i]
		default:
			return o, "ERR syntax error"
		}
	}
	if o.Expire == "" {
		return o, ""
	}
	n, err := ParseInt(expArg)
	if err != nil {
		return o, "ERR value is not an integer or out of range"
	}
	if n <= 0 || ((o.Expire == "ex" || o.Expire == "exat") && n > math.MaxInt64/1000) {
		return o, "ERR invalid expire time in 'set' command"
	}
	if o.Expire == "ex" || o.Expire == "exat" {
		// time.Duration holds about 292 years of milliseconds.
		if n > math.MaxInt64/int64(time.Second) {
			return o, "ERR invalid expire time in 'set' command"
		}
	} else if n > math.MaxInt64/int64(time.Millisecond) {
		return o, "ERR invalid expire time in 'set' command"
	}
	o.N = n
	return o, ""
}

// setOptionNames are the options of SET and GETEX, in lower case.
var setOptionNames = [...]string{"nx", "xx", "get", "keepttl", "ex", "px", "exat", "pxat", "persist"}

// SetOption returns the option of SET or GETEX that b names, in any case
// of ASCII letters, or "" if none. As Redis reads them, as C strings: up
// to b's first NUL ("NX\x00junk" is NX).
func SetOption(b []byte) string {
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

// Redis's answers to arguments it does not take.
const (
	ErrSyntax     = "ERR syntax error"
	ErrNotInteger = "ERR value is not an integer or out of range"
)

// ParseGetEx reads GETEX's options as Redis 7 does ([EX s | PX ms | EXAT
// s | PXAT ms | PERSIST]) and returns the TTL they set (0: none), or
// Redis's own error text. As on Redis, an option may be repeated (PX 1 PX
// 2: the last counts, and only its value is read), but not mixed with
// another.
func ParseGetEx(opts [][]byte, now time.Time) (time.Duration, string) {
	o, persist := "", false
	var arg []byte
	for i := 0; i < len(opts); i++ {
		switch a := SetOption(opts[i]); {
		case a == "persist" && o == "":
			persist = true
		case (a == "ex" || a == "px" || a == "exat" || a == "pxat") && !persist && (o == "" || o == a) && i+1 < len(opts):
			o, arg = a, opts[i+1]
			i++
		default:
			return 0, ErrSyntax
		}
	}
	if o == "" {
		return 0, ""
	}
	n, err := ParseInt(arg)
	if err != nil {
		return 0, ErrNotInteger
	}
	if n <= 0 {
		return 0, "ERR invalid expire time in 'getex' command"
	}
	cmd := map[string]string{"ex": "expire", "px": "pexpire", "exat": "expireat", "pxat": "pexpireat"}[o]
	return ExpireTTL(cmd, n, now), ""
}

// ExpireTTL is the TTL that EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, SETEX or
// PSETEX with argument n sets, measured against now for the absolute ones;
// not positive when the key would expire at once. A number too large to
// be a duration is capped at the longest one.
func ExpireTTL(cmd string, n int64, now time.Time) time.Duration {
	sec := strings.HasPrefix(cmd, "expire") || cmd == "setex"
	if sec && n > math.MaxInt64/int64(time.Second) || !sec && n > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	switch cmd {
	case "expire", "setex":
		return time.Duration(n) * time.Second
	case "pexpire", "psetex":
		return time.Duration(n) * time.Millisecond
	case "expireat":
		return time.Unix(n, 0).Sub(now)
	case "pexpireat":
		return time.UnixMilli(n).Sub(now)
	}
	return 0
}

// ParseExpire reads the argument of PEXPIRE, EXPIRE, PEXPIREAT or
// EXPIREAT (cmd, in lower case) and returns the TTL it sets, measured
// against now (ExpireTTL), or Redis's own error text.
func ParseExpire(cmd string, arg []byte, now time.Time) (time.Duration, string) {
	n, err := ParseInt(arg)
	if err != nil {
		return 0, ErrNotInteger
	}
	return ExpireTTL(cmd, n, now), ""
}

// ParseSetEx reads SETEX's or PSETEX's expiry (args: the whole command)
// and returns the TTL it sets, or Redis's own error text.
func ParseSetEx(args [][]byte, now time.Time) (time.Duration, string) {
	n, err := ParseInt(args[2])
	switch {
	case err != nil:
		return 0, ErrNotInteger
	case n <= 0:
		return 0, "ERR invalid expire time in '" + strings.ToLower(Echo(args[0])) + "' command"
	}
	return ExpireTTL(strings.ToLower(string(args[0])), n, now), ""
}

// ParseInt parses a Redis integer argument strictly (no spaces, no '+').
func ParseInt(b []byte) (int64, error) {
	if len(b) == 0 || b[0] == '+' || (len(b) > 1 && b[0] == '0') || (len(b) > 1 && b[0] == '-' && b[1] == '0') {
		if len(b) == 1 && b[0] == '0' {
			return 0, nil
		}
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(string(b), 10, 64)
}
