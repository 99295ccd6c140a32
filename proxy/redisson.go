package proxy

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Redisson's RLock (docs/clients.md#redisson): the lock is a hash whose
// field, "<client id>:<thread id>", counts the holder's holds; contenders
// are told the lock's PTTL and wait on the channel KEYS[2] for the unlock
// message. Each script, recognised in package lockscripts, runs as a quorum
// operation on the hash lock (redlock/engine/hashlock.go).

// runHashScript runs one of Redisson's lock scripts on the quorum. KEYS[1]
// is the lock; the unlocks' channel and latch need not be lock keys.
func (s *Server) runHashScript(c redcon.Conn, st *client, spec *lockscripts.Spec, keys []string, argv [][]byte) {
	key := keys[0]
	need := map[lockscripts.Op]int{lockscripts.OpHashAcquire: 1, lockscripts.OpHashExtend: 1, lockscripts.OpHashRelease: 2, lockscripts.OpHashForceUnlock: 2}[spec.Op]
	if spec.Op == lockscripts.OpHashRelease && spec.Form == lockscripts.HashPublishLatch {
		need = 3
	}
	switch {
	case spec.Op == lockscripts.OpHashExtendBatch:
		for _, k := range keys {
			if !s.isLockKey([]byte(k)) {
				c.WriteError("ERR redlock-proxy: the keys of a lock script must all be lock keys (proxy.lock_keys)")
				return
			}
		}
		s.hashExtendBatch(st, c, spec, keys, argv)
		return
	case len(keys) != need:
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script takes " + strconv.Itoa(need) + " keys")
		return
	}
	holder, ok := "", false
	if spec.Op == lockscripts.OpHashForceUnlock {
		ok = quorum.SelectsDatabase(c, s.dbOf(st).n, spec, argv)
	} else {
		holder, ok = quorum.ScriptToken(c, s.dbOf(st).n, spec, argv)
	}
	if !ok {
		return
	}
	ctx, cancel := s.opContext()
	defer cancel()
	start := time.Now()
	switch spec.Op {
	case lockscripts.OpHashAcquire:
		ttl, ok := s.ttlArg(c, spec, argv)
		if !ok {
			return
		}
		r, err := s.eng(st).AcquireHash(ctx, key, holder, ttl)
		s.m.Acquire(err, time.Since(start))
		switch {
		case err == nil:
			c.WriteNull()
		case !errors.Is(err, engine.ErrNotAcquired):
			quorum.WriteErr(c, err)
		default:
			// Redisson waits this long for the unlock message, then tries
			// again.
			c.WriteInt64(hashPTTLReply(r.PTTL))
		}
	case lockscripts.OpHashExtend:
		ttl, ok := s.ttlArg(c, spec, argv)
		if !ok {
			return
		}
		_, extended, err := s.eng(st).ExtendHash(ctx, key, holder, ttl)
		s.m.Extend(extended, err, time.Since(start))
		switch {
		case err != nil:
			quorum.WriteErr(c, err)
		case extended:
			c.WriteInt(1)
		default:
			c.WriteInt(0)
		}
	case lockscripts.OpHashRelease:
		s.hashRelease(c, st, spec, keys, holder, argv, start)
	case lockscripts.OpHashForceUnlock:
		publish, ok := publishCommand(c, spec, argv, 1)
		if !ok {
			return
		}
		deleted, err := s.op(st).Count(nil, []byte("DEL"), []byte(key))
		s.m.Release(deleted, err, time.Since(start))
		switch {
		case err != nil:
			quorum.WriteErr(c, err)
		case deleted:
			msg, _ := quorum.Arg(argv, 0)
			s.forward(wire.Discard{}, st, [][]byte{[]byte(publish), []byte(keys[1]), []byte(msg)}, false)
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
func publishCommand(c redcon.Conn, spec *lockscripts.Spec, argv [][]byte, i int) (string, bool) {
	if spec.Op == lockscripts.OpHashRelease && spec.Form == lockscripts.HashPublishFixed {
		return "publish", true
	}
	v, _ := quorum.Arg(argv, i)
	switch strings.ToLower(v) {
	case "publish", "spublish":
		return strings.ToLower(v), true
	}
	c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script publishes with PUBLISH or SPUBLISH in ARGV[" + strconv.Itoa(i+1) + "]")
	return "", false
}

// hashRelease gives back one hold on the quorum. The last hold's release
// publishes the unlock message once, on the backend where Redisson's
// waiters subscribe. From 3.24 the outcome is kept in the latch key
// (KEYS[3]) on every master for ARGV[5] ms, and a retried unlock with the
// same latch answers it again without giving back another hold.
func (s *Server) hashRelease(c redcon.Conn, st *client, spec *lockscripts.Spec, keys []string, holder string, argv [][]byte, start time.Time) {
	ttl, ok := s.ttlArg(c, spec, argv)
	if !ok {
		return
	}
	publish, ok := publishCommand(c, spec, argv, 3)
	if !ok {
		return
	}
	latch, latchMS := "", int64(0)
	if spec.Form == lockscripts.HashPublishLatch {
		v, _ := quorum.Arg(argv, 4)
		n, ok := lockscripts.ParseInt(v)
		if !ok || n <= 0 {
			c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs the latch's time in ARGV[5]")
			return
		}
		latch, latchMS = keys[2], n
	}
	ctx, cancel := s.opContext()
	defer cancel()
	r, err := s.eng(st).ReleaseHash(ctx, keys[0], holder, ttl, latch)
	s.m.Release(r.Held, err, time.Since(start))
	var out int64
	switch {
	case err != nil:
		quorum.WriteErr(c, err)
		return
	case r.Latched && r.LatchNil:
		c.WriteNull()
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
		q, n := s.eng(st).Quorum(), 0
		s.eng(st).Broadcast(ctx, latch, func([]engine.Result) bool { n++; return n >= q }, "set", latch, out, "px", latchMS)
	}
	if out == 1 {
		msg, _ := quorum.Arg(argv, 0)
		s.forward(wire.Discard{}, st, [][]byte{[]byte(publish), []byte(keys[1]), []byte(msg)}, false)
	}
	c.WriteInt64(out)
}

// hashExtendBatch is Redisson's batched renewal: ARGV[1] is the lease,
// ARGV[i+1] the holder of KEYS[i]; each master renews the keys in one step,
// in order, as the script does, each key decided on the quorum, and the
// answer is 1 or 0 per key. A key whose renewal is not decided makes the
// whole answer NOQUORUM, which Redisson tries again.
func (s *Server) hashExtendBatch(st *client, c redcon.Conn, spec *lockscripts.Spec, keys []string, argv [][]byte) {
	ttl, ok := s.ttlArg(c, spec, argv)
	if !ok {
		return
	}
	if len(argv) < len(keys)+1 {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs a holder in ARGV for each key")
		return
	}
	ctx, cancel := s.opContext()
	defer cancel()
	start := time.Now()
	out, err := s.eng(st).ExtendHashBatch(ctx, keys, strs(argv[1:len(keys)+1]), ttl)
	for _, ok := range out {
		s.m.Extend(ok, err, time.Since(start))
	}
	if err != nil {
		quorum.WriteErr(c, err)
		return
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
	if n, err := lockscripts.Normalize(src); err == nil && strings.Contains(n, `"hget",KEYS[1],"mode"`) {
		return "ERR redlock-proxy: Redisson's read/write lock (RReadWriteLock) is not supported: its scripts would change one master alone; use RLock"
	}
	return ""
}
