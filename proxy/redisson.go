package proxy

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Redisson's RLock (docs/clients.md#redisson): the lock is a hash whose
// field, "<client id>:<thread id>", counts the holder's holds; contenders
// are told the lock's PTTL and wait on the channel KEYS[2] for the unlock
// message. Each script runs as a quorum operation on the hash lock
// (redlock/engine/hashlock.go).

// The operations of Redisson's scripts.
const (
	opHashAcquire     opKind = iota + 100 // a free key, or one more hold: nil, else the PTTL
	opHashRelease                         // one hold back; the last deletes and publishes: 1, 0 held still, nil not held
	opHashExtend                          // the watchdog's renewal: 1 or 0
	opHashExtendBatch                     // the batched renewal (≥ 3.44): 1 or 0 per key
	opHashForceUnlock                     // delete and publish: 1, else 0
)

// The forms of the unlock script.
const (
	hashPublishFixed = iota // ≤ 3.21: PUBLISH
	hashPublishArg          // 3.22–3.23: the command in ARGV[4]
	hashPublishLatch        // ≥ 3.24: the command in ARGV[4], the latch KEYS[3] for ARGV[5] ms
)

func init() {
	acquire := &scriptSpec{name: "Redisson lock", kind: opHashAcquire, tokenArg: 1, ttlArg: 0, ttlUnit: time.Millisecond}
	renew := &scriptSpec{name: "Redisson renewal", kind: opHashExtend, tokenArg: 1, ttlArg: 0, ttlUnit: time.Millisecond}
	specs := map[string]*scriptSpec{
		// RedissonLock.tryLockInnerAsync: ≤ 3.12, 3.13–3.18, ≥ 3.19.
		"a090809f49e3ad9e52bb5785603c33d083bc0e10": acquire,
		"3c2d4161e58dd28beae8f7fee7fcc19a70eb3bb6": acquire,
		"98a0c017653008bb69b9eb3e64c3f78e0849c37d": acquire,
		// unlockInnerAsync: 3.11–3.21, 3.22–3.23, ≥ 3.24.
		"9c374801314dc6ea9bf16c7e257250d9b8a80609": {name: "Redisson unlock (3.11-3.21)", kind: opHashRelease, tokenArg: 2, ttlArg: 1, ttlUnit: time.Millisecond, form: hashPublishFixed},
		"fdbf71922b92b6210097a1c91f2ff2bf50bc77d6": {name: "Redisson unlock (3.22-3.23)", kind: opHashRelease, tokenArg: 2, ttlArg: 1, ttlUnit: time.Millisecond, form: hashPublishArg},
		"dbb31ff491c13918cf2cdc841aa196676b2a62ab": {name: "Redisson unlock", kind: opHashRelease, tokenArg: 2, ttlArg: 1, ttlUnit: time.Millisecond, form: hashPublishLatch},
		// renewExpirationAsync (≤ 3.43) and LockTask's batch (≥ 3.44).
		"0750b1c76f1074d998f2ecb995bcc0b87fcd1cf5": renew,
		"abfa810b3dac879e8a0feed07ff81e7052f11252": {name: "Redisson batched renewal", kind: opHashExtendBatch, tokenArg: 1, ttlArg: 0, ttlUnit: time.Millisecond, multi: true},
		// forceUnlockAsync.
		"4f5061130d3cfcc31c73ca88d614f1e3587f4e34": {name: "Redisson forceUnlock", kind: opHashForceUnlock, tokenArg: -1},
	}
	for d, sp := range specs {
		knownScripts[d] = sp
	}
	// The exact texts Redisson sends, by SHA1: ≥ 3.46 sends EVALSHA first.
	for sha, d := range map[string]string{
		"9401052d872adfd0179ef8c8e8c028512707629a": "a090809f49e3ad9e52bb5785603c33d083bc0e10",
		"dad0f8d619e548e04f21fb48d50be5034df3adae": "3c2d4161e58dd28beae8f7fee7fcc19a70eb3bb6",
		"149c5a8bf18676fd99e9e6e24923bd64d9b62f94": "98a0c017653008bb69b9eb3e64c3f78e0849c37d",
		"3ffe249c16dee540ac8ab32e39bd408626b9aff7": "9c374801314dc6ea9bf16c7e257250d9b8a80609",
		"778cea8aada230ae060b432fc333adaec85f2f4c": "fdbf71922b92b6210097a1c91f2ff2bf50bc77d6",
		"6866459238a13a701d42f4971f12d9f3a50e2442": "dbb31ff491c13918cf2cdc841aa196676b2a62ab",
		"8e19a1ddbdee9138df9f32a480c57addab4353d1": "0750b1c76f1074d998f2ecb995bcc0b87fcd1cf5",
		"6a3d31570dc6f4b0bd32bcdc8e75667747c6f635": "abfa810b3dac879e8a0feed07ff81e7052f11252",
		"605e338249a7a1d40df83b04f7658354f883b41b": "4f5061130d3cfcc31c73ca88d614f1e3587f4e34",
	} {
		wireSHAs[sha] = d
	}
}

func isHashOp(sp *scriptSpec) bool {
	return sp != nil && sp.kind >= opHashAcquire && sp.kind <= opHashForceUnlock
}

// runHashScript runs one of Redisson's lock scripts on the quorum. KEYS[1]
// is the lock; the unlocks' channel and latch need not be lock keys.
func (s *Server) runHashScript(c redcon.Conn, st *client, spec *scriptSpec, keys []string, argv [][]byte) {
	key := keys[0]
	need := map[opKind]int{opHashAcquire: 1, opHashExtend: 1, opHashRelease: 2, opHashForceUnlock: 2}[spec.kind]
	if spec.kind == opHashRelease && spec.form == hashPublishLatch {
		need = 3
	}
	switch {
	case spec.kind == opHashExtendBatch:
		for _, k := range keys {
			if !s.isLockKey([]byte(k)) {
				c.WriteError("ERR redlock-proxy: the keys of a lock script must all be lock keys (proxy.lock_keys)")
				return
			}
		}
		s.hashExtendBatch(c, spec, keys, argv)
		return
	case len(keys) != need:
		c.WriteError("ERR redlock-proxy: the '" + spec.name + "' script takes " + strconv.Itoa(need) + " keys")
		return
	}
	holder, ok := "", false
	if spec.kind == opHashForceUnlock {
		ok = databaseZero(c, spec, argv)
	} else {
		holder, ok = scriptToken(c, spec, argv)
	}
	if !ok {
		return
	}
	ctx, cancel := s.opContext()
	defer cancel()
	start := time.Now()
	switch spec.kind {
	case opHashAcquire:
		ttl, ok := ttlArg(c, spec, argv)
		if !ok {
			return
		}
		r, err := s.rl.AcquireHash(ctx, key, holder, ttl)
		s.m.Acquire(err, time.Since(start))
		switch {
		case err == nil:
			c.WriteNull()
		case !errors.Is(err, engine.ErrNotAcquired):
			writeErr(c, err)
		default:
			// Redisson waits this long for the unlock message, then tries
			// again.
			c.WriteInt64(hashPTTLReply(r.PTTL))
		}
	case opHashExtend:
		ttl, ok := ttlArg(c, spec, argv)
		if !ok {
			return
		}
		_, extended, err := s.rl.ExtendHash(ctx, key, holder, ttl)
		s.m.Extend(extended, err, time.Since(start))
		switch {
		case err != nil:
			writeErr(c, err)
		case extended:
			c.WriteInt(1)
		default:
			c.WriteInt(0)
		}
	case opHashRelease:
		s.hashRelease(c, st, spec, keys, holder, argv, start)
	case opHashForceUnlock:
		publish, ok := publishCommand(c, spec, argv, 1)
		if !ok {
			return
		}
		deleted, err := s.broadcastCount([]byte("DEL"), []byte(key))
		s.m.Release(deleted, err, time.Since(start))
		switch {
		case err != nil:
			writeErr(c, err)
		case deleted:
			msg, _ := arg(argv, 0)
			s.forward(nullConn{}, st, [][]byte{[]byte(publish), []byte(keys[1]), []byte(msg)}, false)
			c.WriteInt(1)
		default:
			c.WriteInt(0)
		}
	}
}

// hashPTTLReply is a refused acquire's reply: the holder's PTTL, at least
// 1 ms when no copy told it (a split vote: try again soon).
func hashPTTLReply(p time.Duration) int64 {
	if p < 0 {
		return int64(p)
	}
	return max(ms(p), 1)
}

// publishCommand reads the command an unlock publishes with: PUBLISH, or
// the one in ARGV[i+1] (PUBLISH or SPUBLISH).
func publishCommand(c redcon.Conn, spec *scriptSpec, argv [][]byte, i int) (string, bool) {
	if spec.kind == opHashRelease && spec.form == hashPublishFixed {
		return "publish", true
	}
	v, _ := arg(argv, i)
	switch strings.ToLower(v) {
	case "publish", "spublish":
		return strings.ToLower(v), true
	}
	c.WriteError("ERR redlock-proxy: the '" + spec.name + "' script publishes with PUBLISH or SPUBLISH in ARGV[" + strconv.Itoa(i+1) + "]")
	return "", false
}

// hashRelease gives back one hold on the quorum. The last hold's release
// publishes the unlock message once, on the backend where Redisson's
// waiters subscribe. From 3.24 the outcome is kept in the latch key
// (KEYS[3]) on every master for ARGV[5] ms, and a retried unlock with the
// same latch answers it again without giving back another hold.
func (s *Server) hashRelease(c redcon.Conn, st *client, spec *scriptSpec, keys []string, holder string, argv [][]byte, start time.Time) {
	ttl, ok := ttlArg(c, spec, argv)
	if !ok {
		return
	}
	publish, ok := publishCommand(c, spec, argv, 3)
	if !ok {
		return
	}
	latch, latchMS := "", int64(0)
	if spec.form == hashPublishLatch {
		v, _ := arg(argv, 4)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			c.WriteError("ERR redlock-proxy: the '" + spec.name + "' script needs the latch's time in ARGV[5]")
			return
		}
		latch, latchMS = keys[2], n
	}
	ctx, cancel := s.opContext()
	defer cancel()
	r, err := s.rl.ReleaseHash(ctx, keys[0], holder, ttl, latch)
	s.m.Release(r.Held, err, time.Since(start))
	var out int64
	switch {
	case err != nil:
		writeErr(c, err)
		return
	case r.Latched:
		c.WriteInt64(r.LatchVal)
		return
	case !r.Held:
		c.WriteNull()
		return
	case r.Freed:
		out = 1
	}
	if latch != "" {
		// Every master, as the script would set it; answered once a
		// quorum has it.
		q, n := s.rl.Quorum(), 0
		s.rl.Broadcast(ctx, func([]engine.Result) bool { n++; return n >= q }, "set", latch, out, "px", latchMS)
	}
	if out == 1 {
		msg, _ := arg(argv, 0)
		s.forward(nullConn{}, st, [][]byte{[]byte(publish), []byte(keys[1]), []byte(msg)}, false)
	}
	c.WriteInt64(out)
}

// hashExtendBatch is Redisson's batched renewal: ARGV[1] is the lease,
// ARGV[i+1] the holder of KEYS[i]; each key is renewed on the quorum, and
// the answer is 1 or 0 per key. A key whose renewal is not decided makes
// the whole answer NOQUORUM, which Redisson tries again.
func (s *Server) hashExtendBatch(c redcon.Conn, spec *scriptSpec, keys []string, argv [][]byte) {
	ttl, ok := ttlArg(c, spec, argv)
	if !ok {
		return
	}
	if len(argv) < len(keys)+1 {
		c.WriteError("ERR redlock-proxy: the '" + spec.name + "' script needs a holder in ARGV for each key")
		return
	}
	ctx, cancel := s.opContext()
	defer cancel()
	out := make([]bool, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, out[i], errs[i] = s.rl.ExtendHash(ctx, k, string(argv[i+1]), ttl)
			s.m.Extend(out[i], errs[i], time.Since(start))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			writeErr(c, err)
			return
		}
	}
	c.WriteArray(len(keys))
	for _, ok := range out {
		if ok {
			c.WriteInt(1)
		} else {
			c.WriteInt(0)
		}
	}
}

// redissonUnsupported names the Redisson lock a script it does not
// recognise belongs to, from its keys: the fair lock's queue and timeout
// set, the read/write lock's timeout keys. "" when none.
func redissonUnsupported(keys [][]byte, src string) string {
	for _, k := range keys {
		switch {
		case strings.HasPrefix(string(k), "redisson_lock_queue:"), strings.HasPrefix(string(k), "redisson_lock_timeout:"):
			return "ERR redlock-proxy: Redisson's fair lock (RFairLock) is not supported: its queue and timeout set would change on one master alone; use RLock"
		case strings.HasSuffix(string(k), ":rwlock_timeout"), strings.Contains(string(k), ":rwlock_timeout:"):
			return "ERR redlock-proxy: Redisson's read/write lock (RReadWriteLock) is not supported: its scripts would change one master alone; use RLock"
		}
	}
	n := normalizeScript(src)
	if strings.Contains(n, `"hget",keys[1],"mode"`) {
		return "ERR redlock-proxy: Redisson's read/write lock (RReadWriteLock) is not supported: its scripts would change one master alone; use RLock"
	}
	return ""
}
