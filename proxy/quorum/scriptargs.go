package quorum

import (
	"strconv"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// A recognised script's arguments, read as its spec says (the token, the
// TTL, the database it selects), with the error each answers when the
// script itself would fail or the proxy cannot run it as asked.

// ScriptToken reads a recognised script's token (none for an inspect) and
// checks the database it selects, answering the error when either is
// wrong: what every script operation checks before it runs.
func ScriptToken(c redcon.Conn, db int, spec *lockscripts.Spec, argv [][]byte) (string, bool) {
	token, ok := Arg(argv, spec.TokenArg)
	if !ok && spec.Op != lockscripts.OpInspect {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs ARGV[" + strconv.Itoa(spec.TokenArg+1) + "]")
		return "", false
	}
	if spec.ClockArg >= 0 {
		// Not used (each master reads its own clock), but the script would
		// fail on a value that is not a number.
		if v, ok := Arg(argv, spec.ClockArg); !ok || !lockscripts.IsDecimal(v) {
			c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs a clock, a decimal number, in ARGV[" + strconv.Itoa(spec.ClockArg+1) + "]")
			return "", false
		}
	}
	return token, SelectsDatabase(c, db, spec, argv)
}

// SelectsDatabase reports whether a script that SELECTs a database first
// (spec.DBArg) selects db, the client's, and refuses it otherwise: the
// proxy runs it on the quorum of the client's database (databases.go).
// What is not an integer as Redis writes one is refused too: the script
// reads it with tonumber, which takes " 1", "0x1" and "1e0" for database 1.
func SelectsDatabase(c redcon.Conn, db int, spec *lockscripts.Spec, argv [][]byte) bool {
	if spec.DBArg == 0 {
		return true
	}
	v, ok := Arg(argv, spec.DBArg-1)
	if !ok {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs ARGV[" + strconv.Itoa(spec.DBArg) + "]")
		return false
	}
	switch n, ok := lockscripts.ParseInt(v); {
	case !ok:
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs a database number in ARGV[" + strconv.Itoa(spec.DBArg) + "]")
		return false
	case n != int64(db):
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script selects database " + strconv.FormatInt(n, 10) + ", the connection is on database " + strconv.Itoa(db) + "; SELECT it first")
		return false
	}
	return true
}

// Arg is ARGV[i] (0-based), if the script was given it.
func Arg(argv [][]byte, i int) (string, bool) {
	if i < 0 || i >= len(argv) {
		return "", false
	}
	return string(argv[i]), true
}

// ScriptTTL reads a script's TTL argument; Lua would fail on a
// non-number too. Negative values are kept: PEXPIRE with one ends the key,
// as on Redis; an acquire's TTL must be positive, its expiry time in the
// future. redlock.max_lock_ttl is not checked here (package proxy's
// ttlArg does).
func ScriptTTL(c redcon.Conn, spec *lockscripts.Spec, argv [][]byte) (time.Duration, bool) {
	v, ok := Arg(argv, spec.TTLArg)
	n, valid := lockscripts.ParseInt(v)
	limit := int64(1<<62) / int64(spec.TTLUnit)
	if !ok || !valid || n > limit || n < -limit || n <= 0 && positiveTTL(spec) {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs a TTL in ARGV[" + strconv.Itoa(spec.TTLArg+1) + "]")
		return 0, false
	}
	if spec.Absolute {
		// A Unix time (PXAT, PEXPIREAT), read against the proxy's clock:
		// the TTL is what is left of it now.
		at := time.UnixMilli(n)
		if spec.TTLUnit == time.Second {
			at = time.Unix(n, 0)
		}
		ttl := time.Until(at)
		if ttl <= 0 && spec.Op.PositiveTTL() {
			c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script's expiry time in ARGV[" + strconv.Itoa(spec.TTLArg+1) + "] has passed")
			return 0, false
		}
		return ttl.Round(time.Millisecond), true
	}
	return time.Duration(n) * spec.TTLUnit, true
}

// positiveTTL reports whether a script's TTL must be positive: it takes a
// lock or a permit, renews a permit, or renews keys with SET … PX, which
// fails on a TTL of 0 or less where PEXPIRE ends the key (a claim takes
// an absent key with SET; of the multi-key extends, node-redlock's and
// sesamecare's use SET and bsm/redislock's PEXPIRE: all are refused).
func positiveTTL(spec *lockscripts.Spec) bool {
	return spec.Op.PositiveTTL() || spec.Op == lockscripts.OpExtend && (spec.Multi || spec.Mode == engine.ExtendClaim)
}

// PermitLimit reads a permit script's number of permits, an integer as
// Redis writes one (the library's script fails on what is not a number,
// and reads " 2" or "2.5" as tonumber does; the proxy refuses those).
func PermitLimit(c redcon.Conn, spec *lockscripts.Spec, argv [][]byte) (int64, bool) {
	v, ok := Arg(argv, spec.LimitArg)
	n, valid := lockscripts.ParseInt(v)
	if !ok || !valid {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs a number of permits in ARGV[" + strconv.Itoa(spec.LimitArg+1) + "]")
		return 0, false
	}
	return n, true
}
