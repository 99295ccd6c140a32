package proxy

import (
	"strconv"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// opKind is the quorum operation a recognised script stands for.
type opKind int

const (
	opRelease  opKind = iota + 1 // delete the key where it holds the token
	opExtend                     // renew the key's TTL where it holds the token
	opAcquire                    // take the key if absent (SET NX)
	opOwnerTTL                   // the key's PTTL if it holds the token
)

// Raw replies used by the script table.
const (
	rOK   = "+OK\r\n"
	rOne  = ":1\r\n"
	rZero = ":0\r\n"
	rNeg1 = ":-1\r\n"
	rTwo  = ":2\r\n"
	rNil  = "$-1\r\n"
)

// scriptSpec says how to run a recognised script as a quorum operation and
// what to answer, so that the calling library sees what a single Redis
// holding the quorum's state would have answered it.
type scriptSpec struct {
	name     string
	kind     opKind
	tokenArg int           // ARGV index (0-based) of the token
	ttlArg   int           // ARGV index of the TTL, -1 if none
	ttlUnit  time.Duration // unit of the TTL argument
	mode     redlock.ExtendMode
	addIf    func(argv [][]byte) bool // extend: add to the remaining TTL instead of setting it
	positive bool                     // owner TTL: answer 0 rather than a negative TTL
	multi    bool                     // takes any number of KEYS, all or none; answers a count of keys
	// acquire: a held key whose quorum value the caller may take over
	reclaim  func(argv [][]byte, held string) bool
	ok       string // the operation took effect on a quorum
	notOwned string // a quorum holds another value, or no quorum agrees
	absent   string // a quorum does not hold the key
	noTTL    string // extend "add": the key has no TTL to add to
}

// knownScripts maps the digest of a normalised script (see normalizeScript)
// to its operation. Digests only: the scripts themselves belong to their
// libraries, and the tests take them from the libraries.
var knownScripts = map[string]*scriptSpec{
	// The Redlock spec's compare-and-delete and its many spellings: redlock-php,
	// Yii2, php-lock, Laravel, ShedLock, RedLock.net, redlock-rb, pottery,
	// redsync < 4.15, bsm/redislock 0.9, node-redlock 3, Symfony ≤ 5.1.
	"c0c707c4bec016dafd187acc09028350cd8b3f6d": {name: "unlock", kind: opRelease, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-py Lock.release.
	"7207705fe594df3ae9284ac1bb02cb839e6bb6d6": {name: "redis-py release", kind: opRelease, ok: rOne, notOwned: rZero, absent: rZero},
	// go-redsync ≥ 4.15 delete: -1 when the key is gone.
	"5f851f2ef1cdcac21aa82b064c9ac022a9a7adb0": {name: "redsync delete", kind: opRelease, ok: rOne, notOwned: rZero, absent: rNeg1},
	// cheprasov/php-redis-lock release.
	"42caa3859bd6037743b55b0464defac8bf080b0e": {name: "cheprasov release", kind: opRelease, ok: rOne, notOwned: rZero, absent: rZero},

	// Compare-and-PEXPIRE: ShedLock, pottery, redsync touch, bsm/redislock 0.9,
	// node-redlock 3, Symfony ≤ 5.1.
	"d4477b9f7579af482457f0c2f363525cff4ea1d4": {name: "extend", kind: opExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: redlock.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// cheprasov/php-redis-lock update.
	"efecc536fe048aed035d9ea11146c51a22a50835": {name: "cheprasov update", kind: opExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: redlock.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-py Lock.reacquire.
	"7e5b8b1c8492617cc2e01b1f67de23df28f74ccb": {name: "redis-py reacquire", kind: opExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: redlock.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-py Lock.extend: ARGV[3] "0" adds to the remaining TTL, "1"
	// replaces it; either way a key without a TTL is refused.
	"f450802dd75d333e0f6e746befbe093331bc1869": {name: "redis-py extend", kind: opExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: redlock.ExtendSetIfTTL,
		addIf: func(argv [][]byte) bool { return len(argv) > 2 && string(argv[2]) == "0" }, ok: rOne, notOwned: rZero, absent: rZero, noTTL: rZero},
	// redis-py 3.0–3.4 Lock.extend: always additive.
	"9c88fe13df0b37e65edadc538dd26de4f193ce68": {name: "redis-py extend (3.0-3.4)", kind: opExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: redlock.ExtendAdd, ok: rOne, notOwned: rZero, absent: rZero, noTTL: rZero},
	// go-redsync ≥ 4.15 touch that also takes an absent key.
	"1f9a1f028f75d4d6ce17714651295ce404fad2d5": {name: "redsync touch (set nx)", kind: opExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: redlock.ExtendClaim, ok: rOne, notOwned: rZero, absent: rZero},
	// RedLock.net extend: takes an absent key; -1 when held by another value.
	"a8d0ab9aabea86c076b4e2acded05cc1c8f238df": {name: "RedLock.net extend", kind: opExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: redlock.ExtendClaim, ok: rOne, notOwned: rNeg1, absent: rZero},
	// Laravel refreshLock: seconds; 0 or less persists.
	"105542cc6c99ee666eb2c60b9e8e4a24ad25e140": {name: "Laravel refreshLock", kind: opExtend, ttlArg: 1, ttlUnit: time.Second, mode: redlock.ExtendPersist0, ok: rOne, notOwned: rZero, absent: rZero},
	// Spring Integration ≥ 6.4 renew: true / false (nil).
	"5f194d0f0fe0cffeffeffe4f82addee2324a1e7d": {name: "Spring renew", kind: opExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: redlock.ExtendSet, ok: rOne, notOwned: rNil, absent: rNil},
	// python-redis-lock extend: 0 done, 1 not the owner, 2 no TTL; seconds.
	"e3f5b07401d88811169ce7df28a07bdf06e990bd": {name: "python-redis-lock extend", kind: opExtend, ttlArg: 1, ttlUnit: time.Second, mode: redlock.ExtendSet, ok: rZero, notOwned: rOne, absent: rOne},

	// node-redlock 4.x and 5: multi-key acquire, extend and release, each
	// answering the number of keys it acted on.
	"d4e6fca49c680bb234bf373ae1a42e30a8ff8a08": {name: "node-redlock acquire", kind: opAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"935fa90b5b162c7b7ab562f5982b279224fe39e1": {name: "node-redlock 4.0 acquire", kind: opAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"04401a2dcbdc523ea08ed84c75cca97e9929a74a": {name: "node-redlock extend", kind: opExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: redlock.ExtendSet, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"f4a8a79d6104fa5573d6e182920d5b6a3e148ffd": {name: "node-redlock 4.0 extend", kind: opExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: redlock.ExtendSet, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"12c93ff475b2fa8badc1bcee7255b6a36daa3582": {name: "node-redlock release", kind: opRelease, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	// node-redlock 3 acquire: SET NX PX; OK or nil.
	"af941bd341c75f42f71417c790ff831ddf365132": {name: "node-redlock 3 acquire", kind: opAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, ok: rOK, notOwned: rNil, absent: rNil},

	// Laravel add: SETEX if absent; OK or false (nil).
	"b8dfde8c861025bd12fb6398edfed6323c49d945": {name: "Laravel add", kind: opAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Second, ok: rOK, notOwned: rNil, absent: rNil},

	// bsm/redislock 0.9 obtain: SET NX PX ARGV[3]; a key whose value starts
	// with the caller's token (its first ARGV[2] bytes) is taken over.
	"e16f7c44afa75fbb95a41921267d0e13df09bad5": {name: "bsm/redislock obtain", kind: opAcquire, tokenArg: 0, ttlArg: 2, ttlUnit: time.Millisecond,
		reclaim: sameTokenPrefix, ok: rOK, notOwned: rNil, absent: rNil},

	// bsm/redislock 0.9 PTTL: the TTL if owned, else -3.
	"0346cd486b0a21da6d24adcd2e2905865b5df13d": {name: "bsm/redislock pttl", kind: opOwnerTTL, notOwned: ":-3\r\n", absent: ":-3\r\n"},
	// pottery acquired: the TTL if owned and positive, else 0.
	"92f8764d904ca76b901c158faf6af0f73d334991": {name: "pottery acquired", kind: opOwnerTTL, positive: true, notOwned: rZero, absent: rZero},
}

func lookupScript(src string) *scriptSpec { return knownScripts[scriptDigest(src)] }

// sameTokenPrefix: ARGV[2] is the length of the token that starts ARGV[1].
func sameTokenPrefix(argv [][]byte, held string) bool {
	if len(argv) < 2 {
		return false
	}
	n, err := strconv.Atoi(string(argv[1]))
	if err != nil || n < 0 || n > len(argv[0]) || n > len(held) {
		return false
	}
	return held[:n] == string(argv[0][:n])
}
