package proxy

import (
	"strings"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// Redisson's RLock (docs/clients.md#redisson): the lock is a hash whose
// field, "<client id>:<thread id>", counts the holder's holds; contenders
// are told the lock's PTTL and wait on the channel KEYS[2] for the unlock
// message. Each script, recognised in package lockscripts, runs as a quorum
// operation on the hash lock (redlock/engine/hashlock.go): its arguments,
// engine calls and replies are package quorum's (hashlock.go); here are
// the session's part — the lock keys, the TTL's bound, the client's
// database — and the unlock message, published on the backend between the
// quorum step and the reply.

// runHashScript runs one of Redisson's lock scripts on the quorum. KEYS[1]
// is the lock; the unlocks' channel and latch need not be lock keys.
func (s *Server) runHashScript(c redcon.Conn, st *client, spec *lockscripts.Spec, keys []string, argv [][]byte) {
	if spec.Op == lockscripts.OpHashExtendBatch {
		for _, k := range keys {
			if !s.isLockKey([]byte(k)) {
				c.WriteError("ERR redlock-proxy: the keys of a lock script must all be lock keys (proxy.lock_keys)")
				return
			}
		}
		s.hashExtendBatch(st, c, spec, keys, argv)
		return
	}
	if !quorum.HashKeys(c, spec, len(keys)) {
		return
	}
	key := keys[0]
	holder, ok := quorum.HashHolder(c, s.dbOf(st).n, spec, argv)
	if !ok {
		return
	}
	op := s.op(st)
	switch spec.Op {
	case lockscripts.OpHashAcquire:
		ttl, ok := s.ttlArg(c, spec, argv)
		if !ok {
			return
		}
		r, err := op.AcquireHash(key, holder, ttl)
		quorum.WriteHashAcquired(c, r, err)
	case lockscripts.OpHashExtend:
		ttl, ok := s.ttlArg(c, spec, argv)
		if !ok {
			return
		}
		extended, err := op.ExtendHash(key, holder, ttl)
		quorum.WriteDone(c, extended, err)
	case lockscripts.OpHashRelease:
		s.hashRelease(c, st, spec, keys, holder, argv)
	case lockscripts.OpHashForceUnlock:
		publish, ok := quorum.PublishCommand(c, spec, argv, 1)
		if !ok {
			return
		}
		deleted, err := op.ForceUnlockHash(key)
		if err == nil && deleted {
			s.publishUnlock(st, publish, keys[1], argv)
		}
		quorum.WriteDone(c, deleted, err)
	}
}

// publishUnlock publishes a freed lock's unlock message, ARGV[1], on the
// backend where Redisson's waiters subscribe, on channel, once.
func (s *Server) publishUnlock(st *client, publish, channel string, argv [][]byte) {
	msg, _ := quorum.Arg(argv, 0)
	s.forward(wire.Discard{}, st, [][]byte{[]byte(publish), []byte(channel), []byte(msg)}, false)
}

// hashRelease gives back one hold on the quorum (quorum.Op.ReleaseHash,
// with the latch of Redisson 3.24 and later). The last hold's release
// publishes the unlock message before the reply.
func (s *Server) hashRelease(c redcon.Conn, st *client, spec *lockscripts.Spec, keys []string, holder string, argv [][]byte) {
	ttl, ok := s.ttlArg(c, spec, argv)
	if !ok {
		return
	}
	publish, ok := quorum.PublishCommand(c, spec, argv, 3)
	if !ok {
		return
	}
	latch, latchMS, ok := quorum.HashLatch(c, spec, keys, argv)
	if !ok {
		return
	}
	r, err := s.op(st).ReleaseHash(keys[0], holder, ttl, latch, latchMS)
	if quorum.HashUnlocked(r, err) {
		s.publishUnlock(st, publish, keys[1], argv)
	}
	quorum.WriteHashReleased(c, r, err)
}

// hashExtendBatch is Redisson's batched renewal (quorum.Op.ExtendHashBatch):
// ARGV[1] is the lease, ARGV[i+1] the holder of KEYS[i].
func (s *Server) hashExtendBatch(st *client, c redcon.Conn, spec *lockscripts.Spec, keys []string, argv [][]byte) {
	ttl, ok := s.ttlArg(c, spec, argv)
	if !ok {
		return
	}
	holders, ok := quorum.HashHolders(c, spec, len(keys), argv)
	if !ok {
		return
	}
	out, err := s.op(st).ExtendHashBatch(keys, holders, ttl)
	quorum.WriteHashBatch(c, out, err)
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
