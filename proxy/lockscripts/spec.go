package lockscripts

import (
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Op is the quorum operation a recognised script stands for.
type Op int

// The operations.
const (
	OpRelease  Op = iota + 1 // delete the key where it holds the token
	OpExtend                 // renew the key's TTL where it holds the token
	OpAcquire                // take the key if absent (SET NX)
	OpOwnerTTL               // the key's PTTL if it holds the token
	// Extend if at least MinArg ms are left, answering an array: the
	// outcome (1 extended, 0 too little left, -1 not held) and the TTL left
	// before (redlock-universal's atomic extend).
	OpExtendIfLeft
	// The key's value and PTTL as an array, nil when absent
	// (redlock-universal's inspect).
	OpInspect
	// Read/write locks in Symfony Lock's sorted-set format (RedisStore ≥ 5.2).
	OpRWAcquire // take the key for the token, exclusively or shared
	OpRWExtend  // renew the token's hold
	OpRWRelease // remove the token
	OpRWHeld    // whether the token holds the key
	// A library's own script that is not a lock operation: it runs on the
	// backend as it is (proxy.unknown_scripts does not refuse it), but on a
	// lock key while the backend is a voting master.
	OpNotALock
	// Symfony Lock's probe of TIME in scripts: answers 1 once KEYS[1] is
	// set to "1" for a millisecond (on every master for a lock key).
	OpTimeProbe
)

// Redisson's RLock: the lock is a hash whose field, "<client id>:<thread
// id>", counts the holder's holds (docs/clients.md#redisson).
const (
	OpHashAcquire     Op = iota + 100 // a free key, or one more hold: nil, else the PTTL
	OpHashRelease                     // one hold back; the last deletes and publishes: 1, 0 held still, nil not held
	OpHashExtend                      // the watchdog's renewal: 1 or 0
	OpHashExtendBatch                 // the batched renewal (≥ 3.44): 1 or 0 per key
	OpHashForceUnlock                 // delete and publish: 1, else 0
)

// PositiveTTL reports whether o's TTL must be positive: it takes a lock or
// a permit, or renews a permit.
func (o Op) PositiveTTL() bool {
	return o == OpAcquire || o == OpRWAcquire || o == OpHashAcquire || o == OpPermitAcquire || o == OpPermitRefresh
}

// ChangesLocks reports whether o, run on a lock key, changes lock state
// on the quorum: every operation but those that only read (owner TTL,
// inspect, "is it held") and a library's script that is not a lock
// operation (which runs on the backend, if anywhere).
func (o Op) ChangesLocks() bool {
	switch o {
	case OpOwnerTTL, OpInspect, OpRWHeld, OpNotALock:
		return false
	}
	return true
}

// IsHash reports whether o is one of Redisson's hash-lock operations.
func (o Op) IsHash() bool { return o >= OpHashAcquire && o <= OpHashForceUnlock }

// Counting semaphores: redis-semaphore's Semaphore keeps its permits in a
// sorted set of its holders' tokens (docs/clients.md#redis-semaphores-semaphore).
const (
	OpPermitAcquire Op = 200 + iota // take one of the key's permits for the token
	OpPermitRefresh                 // renew the token's permit
	OpPermitRelease                 // give the token's permit back
)

// IsPermit reports whether o is one of a counting semaphore's permit
// operations.
func (o Op) IsPermit() bool { return o >= OpPermitAcquire && o <= OpPermitRelease }

// The forms of Redisson's unlock script (Spec.Form).
const (
	HashPublishFixed = iota // ≤ 3.21: PUBLISH
	HashPublishArg          // 3.22–3.23: the command in ARGV[4]
	HashPublishLatch        // ≥ 3.24: the command in ARGV[4], the latch KEYS[3] for ARGV[5] ms
)

// Raw replies: "OK", the defaults of ok and not_owned, and nil.
const (
	rOK   = "+OK\r\n"
	rOne  = ":1\r\n"
	rZero = ":0\r\n"
	rNil  = NilReply
)

// NilReply is the raw nil reply (RESP2's null bulk string); the proxy writes
// it as the connection's null, RESP3's own in RESP3.
const NilReply = "$-1\r\n"

// Spec says how to run a recognised script as a quorum operation and what
// to answer, so that the calling library sees what a single Redis holding
// the quorum's state would have answered it. Specs are shared and
// read-only.
type Spec struct {
	Name     string            // in the errors the client sees: the library's script, or the operator's file
	Op       Op                // the operation
	TokenArg int               // ARGV index (0-based) of the token, -1 if none
	TTLArg   int               // ARGV index of the TTL, -1 if none
	TTLUnit  time.Duration     // unit of the TTL argument
	MinArg   int               // OpExtendIfLeft: ARGV index of the least TTL left, in ms
	LimitArg int               // permit_acquire, permit_refresh: ARGV index of the semaphore's number of permits
	Absolute bool              // the TTL argument is a Unix time in TTLUnit (PXAT, EXAT, PEXPIREAT)
	Mode     engine.ExtendMode // OpExtend: how the TTL is set
	Positive bool              // owner TTL: answer 0 rather than a negative TTL
	Multi    bool              // takes any number of KEYS, all or none
	// MultiOutcome: a Multi acquire, extend or release answers OK,
	// NotOwned or Absent, as for one key, rather than the number of keys
	// it acted on; its release is all or none on each master.
	MultiOutcome bool
	// DBArg is the 1-based ARGV index of a database number the script
	// SELECTs first (0: none). Only database 0 is served: another is
	// refused, as SELECT is.
	DBArg    int
	Shared   bool   // read/write acquire: a shared (read) lock
	Form     int    // Redisson's unlock: how it publishes, and whether it has a latch
	OK       string // the operation took effect on a quorum
	NotOwned string // a quorum holds another value, or no quorum agrees
	Absent   string // a quorum does not hold the key
	NoTTL    string // extend "setttl" or "add": the key has no TTL to add to
	// Reclaimed is an acquire's reply when its caller took back what it
	// held (reclaim), OK unless the script answers otherwise.
	Reclaimed string
	// ClockArg is the ARGV index (0-based) of a clock the script reads with
	// tonumber, -1 if none. The proxy does not use it (each master judges
	// time by its own clock), but refuses a value the script would fail on.
	ClockArg int

	addIf        *argEquals  // extend: when this ARGV holds this value, add to the remaining TTL
	reclaim      reclaimRule // acquire: a held key whose quorum value the caller may take over
	prefixLenArg int         // reclaimTokenPrefix: ARGV index of the prefix's length
	publish      string      // release: the message's template, "" for none
}

// argEquals is an ARGV value: the argument at index arg (0-based) is value.
type argEquals struct {
	arg   int
	value string
}

// reclaimRule says when an acquire may take over a key held on a quorum.
type reclaimRule int

const (
	reclaimNone        reclaimRule = iota
	reclaimSameToken               // the key holds the caller's token
	reclaimTokenPrefix             // the key's value starts with the caller's token's first ARGV[prefixLenArg] bytes
)

// AddIf reports whether an extend called with argv adds its TTL to what
// is left of the lock rather than setting it: its add_if argument holds
// the value that says so.
func (sp *Spec) AddIf(argv [][]byte) bool {
	a := sp.addIf
	return a != nil && a.arg < len(argv) && string(argv[a.arg]) == a.value
}

// Reclaims reports whether an acquire called with argv takes over a key
// whose value on a quorum is held: the holder takes it again.
func (sp *Spec) Reclaims(argv [][]byte, held string) bool {
	h, ok := sp.Holder(argv)
	return ok && h.Holds(held)
}

// Holder says which held values an acquire called with argv takes over
// as its caller's own (reclaim): the token itself (same_token), or, as
// bsm/redislock's obtain reads its arguments, each value whose GETRANGE 0
// n-1 equals string.sub(token, 1, n), n in ARGV[prefix_len_arg]
// (token_prefix): for 0 < n ≤ the token's length, a value that starts
// with the token's first n bytes; for 0, only an empty value; beyond the
// token, the token itself; negative, what those two functions make of it
// (engine.Holder). ok is false when the spec reclaims nothing, or argv
// does not say (ReclaimArgOK).
func (sp *Spec) Holder(argv [][]byte) (h engine.Holder, ok bool) {
	if sp.TokenArg < 0 || sp.TokenArg >= len(argv) {
		return h, false
	}
	token := string(argv[sp.TokenArg])
	switch sp.reclaim {
	case reclaimSameToken:
		return engine.Holder{Prefix: token, Exact: true}, true
	case reclaimTokenPrefix:
		if sp.prefixLenArg >= len(argv) {
			return h, false
		}
		n, ok := ParseInt(string(argv[sp.prefixLenArg]))
		if !ok {
			return h, false
		}
		return engine.Holder{Prefix: token, Range: true, Len: n}, true
	}
	return h, false
}

// ReclaimArg is the ARGV index (0-based) of the token length a
// token_prefix reclaim reads, -1 when the spec has none.
func (sp *Spec) ReclaimArg() int {
	if sp.reclaim != reclaimTokenPrefix {
		return -1
	}
	return sp.prefixLenArg
}

// ParseInt reads an integer argument as Redis reads one (an optional '-'
// and decimal digits, no leading zero, no space, no '+'), and only within
// ±2⁵³, where a script that reads it with tonumber has the same number and
// writes it back the same. ok is false for anything else: the proxy
// refuses what it cannot read as both would.
func ParseInt(s string) (int64, bool) {
	d := strings.TrimPrefix(s, "-")
	if d == "" || len(d) > 16 || d[0] == '0' && (len(d) > 1 || len(s) > 1) || strings.Trim(d, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > 1<<53 || n < -(1<<53) {
		return 0, false
	}
	return n, true
}

// IsDecimal reports whether s is a decimal number, an optional '-', digits
// and an optional fraction: a number Lua's tonumber reads (and a subset of
// what it reads).
func IsDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	whole, frac, dot := strings.Cut(s, ".")
	digits := func(x string) bool { return x != "" && strings.Trim(x, "0123456789") == "" }
	return digits(whole) && (!dot || digits(frac))
}

// Publishes reports whether the script is a release that also publishes
// on a channel, given as KEYS[2] (the lock is KEYS[1]), when it removed the
// key. The proxy publishes once on the backend after a release on a
// quorum, so that waiters subscribed there (through the proxy or not) wake
// once.
func (sp *Spec) Publishes() bool { return sp.publish != "" }

// Message is what a release that publishes sends for key and token: its
// template with {key} and {token} replaced.
func (sp *Spec) Message(key, token string) string {
	return strings.NewReplacer("{key}", key, "{token}", token).Replace(sp.publish)
}
