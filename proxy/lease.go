package proxy

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
)

// Connection-bound leases: LOCK.ACQUIRE key LEASE takes the lock with
// proxy.lease_ttl and renews it (a quorum extend) every third of that
// while the client's connection is open. The client closing the
// connection, or RESET on it, releases it (every hold of its token); when
// the proxy closes the connection (the lease lapsed, shutdown, a timeout)
// or dies, it expires by its TTL, since the client may act on it for up
// to a third of the TTL after its last reply.
//
// The client holds the lock while its connection is open: a lease that
// cannot be renewed in time is lost, and the proxy closes the connection
// rather than leave its client believing it holds a lock another may be
// granted. Its validity (from the last renewal that reached a quorum) must
// keep a third of the TTL in hand: a renewal that fails (NOQUORUM) is
// tried again soon, and when the margin is reached without one, or a
// renewal finds the token gone from a quorum (deleted by other means, or
// expired), the connection is closed. No command of that connection is
// answered once its lease's margin is reached (Server.dispatch), so a
// reply on it means every lease it holds had a third of its TTL left
// when the command was read.

// guardLeaseLapse: a lease that cannot be renewed in time, or is found
// gone, closes its client's connection; off, it only stops renewing (or
// keeps trying) while its client goes on believing it holds the lock.
const guardLeaseLapse = "lease-lapse"

// leaseSet is one client's leases. It is made on the client's first lease;
// closeAll runs in the server's closed callback (and RESET) and only
// signals.
type leaseSet struct {
	mu     sync.Mutex
	closed bool
	m      map[string]*lease // by key and token
	lapse  func()            // closes the client's connection
	// due is the earliest instant (ns after leaseEpoch) at which one of
	// the leases reaches its margin unrenewed; 0: none.
	due atomic.Int64
}

// leaseEpoch is the monotonic base of leaseSet.due.
var leaseEpoch = time.Now()

type lease struct {
	op         quorum.Op // its calls on the quorum, with its database's engine (databases.go)
	db         int
	key, token string
	stop       chan struct{} // closed: release the lock and end
	cancel     chan struct{} // closed: end without releasing (released already)
	once       sync.Once
	due        time.Time // under leaseSet.mu: renewed by then, or lost
}

func leaseID(db int, key, token string) string {
	return strconv.Itoa(db) + "\x00" + key + "\x00" + token
}

// leasesOf returns the client's lease set, making it on first use; lapse
// closes the client's connection.
func (st *client) leasesOf(lapse func()) *leaseSet {
	if ls := st.leases.Load(); ls != nil {
		return ls
	}
	st.leases.CompareAndSwap(nil, &leaseSet{m: map[string]*lease{}, lapse: lapse})
	return st.leases.Load()
}

// add registers a lease; false when the client is already gone.
func (ls *leaseSet) add(l *lease) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return false
	}
	if old := ls.m[leaseID(l.db, l.key, l.token)]; old != nil {
		old.once.Do(func() { close(old.cancel) }) // a reentrant LEASE: one renewer is enough
	}
	ls.m[leaseID(l.db, l.key, l.token)] = l
	ls.refreshDue()
	return true
}

// drop forgets a lease and ends its renewals without releasing the lock:
// its client released it.
func (ls *leaseSet) drop(db int, key, token string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.m[leaseID(db, key, token)]; l != nil {
		l.once.Do(func() { close(l.cancel) })
		delete(ls.m, leaseID(db, key, token))
		ls.refreshDue()
	}
}

// dropKey is drop for every token of key.
func (ls *leaseSet) dropKey(db int, key string) {
	ls.mu.Lock()
	var tokens []string
	for _, l := range ls.m {
		if l.db == db && l.key == key {
			tokens = append(tokens, l.token)
		}
	}
	ls.mu.Unlock()
	for _, t := range tokens {
		ls.drop(db, key, t)
	}
}

// releasedLease ends the renewal of the client's leases of key (of token
// only, unless token is empty) without releasing: the client removed the
// lock by other means than LOCK.RELEASE (an unlock script, DEL), and a
// renewal would find it gone and close the connection.
func (st *client) releasedLease(key, token string) {
	ls := st.leases.Load()
	db := 0
	if st.db != nil {
		db = st.db.n
	}
	switch {
	case ls == nil:
	case token == "":
		ls.dropKey(db, key)
	default:
		ls.drop(db, key, token)
	}
}

func (ls *leaseSet) remove(l *lease) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m[leaseID(l.db, l.key, l.token)] == l {
		delete(ls.m, leaseID(l.db, l.key, l.token))
		ls.refreshDue()
	}
}

// renewed sets until when l must be renewed next.
func (ls *leaseSet) renewed(l *lease, due time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l.due = due
	ls.refreshDue()
}

// refreshDue recomputes due; ls.mu held.
func (ls *leaseSet) refreshDue() {
	var first time.Time
	for _, l := range ls.m {
		if first.IsZero() || l.due.Before(first) {
			first = l.due
		}
	}
	if first.IsZero() {
		ls.due.Store(0)
		return
	}
	ls.due.Store(max(int64(first.Sub(leaseEpoch)), 1))
}

// lapsed reports whether a lease has reached its margin unrenewed.
func (ls *leaseSet) lapsed(now time.Time) bool {
	d := ls.due.Load()
	return d != 0 && int64(now.Sub(leaseEpoch)) >= d
}

// closeAll ends every lease of a closed (or RESET) client: with release,
// each releases its lock; without, each stops renewing and its lock
// expires by its TTL.
func (ls *leaseSet) closeAll(release bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.closed = true
	for _, l := range ls.m {
		if release {
			close(l.stop)
		} else {
			l.once.Do(func() { close(l.cancel) })
		}
	}
	ls.m = nil
	ls.due.Store(0)
}

// acquireLease grants a lock bound to the client's connection.
func (s *Server) acquireLease(c redcon.Conn, st *client, o quorum.LockAcquire) {
	o.TTL = s.cfg.Proxy.LeaseTTL.Duration
	op := s.op(st)
	g, err := s.acquireNative(op, c, o)
	if g != nil {
		now := time.Now()
		l := &lease{op: op, db: s.dbOf(st).n, key: o.Key, token: g.Token, stop: make(chan struct{}), cancel: make(chan struct{}),
			due: now.Add(g.Validity - o.TTL/3)}
		ls := st.leasesOf(func() { _ = c.NetConn().Close() })
		if !ls.add(l) {
			close(l.stop) // the client left while it waited
		}
		s.leasesActive.Add(1)
		go s.renewLease(ls, l, o.TTL)
	}
	quorum.WriteGrant(c, g, err)
}

// renewLease extends the lock every third of its TTL until the client's
// connection closes (then releases it), the client releases it, or the
// lock is lost (then closes the connection). A renewal that fails is tried
// again soon, until the margin.
func (s *Server) renewLease(ls *leaseSet, l *lease, ttl time.Duration) {
	defer s.leasesActive.Add(-1)
	defer ls.remove(l)
	ls.mu.Lock()
	due := l.due
	ls.mu.Unlock()
	margin := ttl / 3
	expires := due.Add(margin) // the end of its validity, on every master that holds it
	t := time.NewTimer(ttl / 3)
	defer t.Stop()
	retry := 100 * time.Millisecond
	for {
		select {
		case <-l.cancel:
			return
		case <-l.stop:
			s.releaseLease(l, expires)
			return
		case <-t.C:
		}
		if !time.Now().Before(due) && !s.off(guardLeaseLapse) {
			s.log.Warn().Str("key", l.key).Msg("lease lost: not renewed in time; closing its client's connection")
			ls.lapse() // closed by the proxy: its cancel comes next, and the lock expires
			continue
		}
		v, ok, err := l.op.ExtendFenced(l.key, l.token, ttl)
		switch {
		case ok:
			expires = time.Now().Add(v)
			due = expires.Add(-margin)
			ls.renewed(l, due)
			retry = 100 * time.Millisecond
			t.Reset(ttl / 3)
		case err == nil && !s.off(guardLeaseLapse):
			s.log.Warn().Str("key", l.key).Msg("lease lost: its token no longer holds the lock; closing its client's connection")
			ls.lapse() // closed by the proxy: its cancel comes next
		case err == nil:
			s.log.Warn().Str("key", l.key).Msg("lease lost: its token no longer holds the lock; renewals stop")
			return
		default:
			// Not known (NOQUORUM): it may still hold. Try again soon:
			// after 100 ms, then twice as long each time, up to an eighth
			// of the margin, so that a master back before the margin is
			// reached is used in time.
			next := min(retry, max(time.Until(due), time.Millisecond))
			if s.off(guardLeaseLapse) {
				next = ttl / 3
			}
			retry = min(2*retry, max(margin/8, 100*time.Millisecond))
			t.Reset(next)
		}
	}
}

// releaseLease releases the lock of a lease whose client has gone. A
// release that fails (too few masters answered in time) is tried again,
// waiting twice as long each time (100 ms to 1 s), until it is done or the
// lock has expired on its own; while the proxy shuts down, once.
func (s *Server) releaseLease(l *lease, expires time.Time) {
	wait := 100 * time.Millisecond
	for tries := 1; ; tries++ {
		r, err := l.op.ReleaseFencedAll(l.key, l.token)
		if r.Freed {
			s.waits.wake(l.key)
		}
		switch {
		case err == nil:
			if tries > 1 {
				s.log.Info().Str("key", l.key).Int("tries", tries).Msg("lease released on client close")
			}
			return
		case s.closing.Load() || s.noLeaseRetry || time.Now().Add(wait).After(expires):
			s.log.Warn().Str("key", l.key).Int("tries", tries).Err(err).Msg("lease not released on client close; it expires by its TTL")
			return
		}
		if tries == 1 {
			s.log.Warn().Str("key", l.key).Err(err).Msg("lease not released on client close; trying again until it expires")
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}
