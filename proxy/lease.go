package proxy

import (
	"errors"
	"sync"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Connection-bound leases: LOCK.ACQUIRE key LEASE takes the lock with
// proxy.lease_ttl and renews it (a quorum extend) every third of that
// while the client's connection is open. Closing the connection releases
// it (every hold of its token); if the proxy dies, it expires by its TTL.
// A renewal that finds the token gone (released, or expired during an
// outage of the masters) stops renewing.

// leaseSet is one client's leases. It is made on the client's first lease;
// closeAll runs in the server's closed callback and only signals.
type leaseSet struct {
	mu     sync.Mutex
	closed bool
	m      map[string]*lease // by key and token
}

type lease struct {
	key, token string
	stop       chan struct{} // closed: release the lock and end
	cancel     chan struct{} // closed: end without releasing (released already)
	once       sync.Once
}

func leaseID(key, token string) string { return key + "\x00" + token }

// leasesOf returns the client's lease set, making it on first use.
func (st *client) leasesOf() *leaseSet {
	if ls := st.leases.Load(); ls != nil {
		return ls
	}
	st.leases.CompareAndSwap(nil, &leaseSet{m: map[string]*lease{}})
	return st.leases.Load()
}

// add registers a lease; false when the client is already gone.
func (ls *leaseSet) add(l *lease) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return false
	}
	if old := ls.m[leaseID(l.key, l.token)]; old != nil {
		old.once.Do(func() { close(old.cancel) }) // a reentrant LEASE: one renewer is enough
	}
	ls.m[leaseID(l.key, l.token)] = l
	return true
}

// drop forgets a lease and ends its renewals without releasing the lock.
func (ls *leaseSet) drop(key, token string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.m[leaseID(key, token)]; l != nil {
		l.once.Do(func() { close(l.cancel) })
		delete(ls.m, leaseID(key, token))
	}
}

func (ls *leaseSet) remove(l *lease) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m[leaseID(l.key, l.token)] == l {
		delete(ls.m, leaseID(l.key, l.token))
	}
}

// closeAll tells every lease of a closed client to release its lock.
func (ls *leaseSet) closeAll() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.closed = true
	for _, l := range ls.m {
		close(l.stop)
	}
	ls.m = nil
}

// acquireLease grants a lock bound to the client's connection.
func (s *Server) acquireLease(c redcon.Conn, st *client, o acquireOpts) {
	o.ttl = s.cfg.Proxy.LeaseTTL.Duration
	g, err := s.acquireNative(c, o)
	if g != nil {
		l := &lease{key: o.key, token: g.Token, stop: make(chan struct{}), cancel: make(chan struct{})}
		ls := st.leasesOf()
		if !ls.add(l) {
			close(l.stop) // the client left while it waited
		}
		s.leasesActive.Add(1)
		go s.renewLease(ls, l, o.ttl)
	}
	writeGrant(c, g, err)
}

// renewLease extends the lock every third of its TTL until the client's
// connection closes (then releases it) or the lock is lost.
func (s *Server) renewLease(ls *leaseSet, l *lease, ttl time.Duration) {
	defer s.leasesActive.Add(-1)
	defer ls.remove(l)
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	expires := time.Now().Add(ttl) // at the latest, on every master that holds it
	for {
		select {
		case <-l.cancel:
			return
		case <-l.stop:
			s.releaseLease(l, expires)
			return
		case <-t.C:
			sent := time.Now()
			_, ok, err := s.extendNative(l.key, l.token, ttl)
			if ok {
				expires = sent.Add(ttl)
			}
			if !ok && !errors.Is(err, redlock.ErrNoQuorum) {
				s.log.Warn().Str("key", l.key).Err(err).Msg("lease lost: its token no longer holds the lock; renewals stop")
				return
			}
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
		ctx, cancel := s.opContext()
		r, err := s.rl.ReleaseFencedAll(ctx, l.key, l.token)
		cancel()
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
