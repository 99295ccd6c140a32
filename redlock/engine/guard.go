package engine

import (
	"sync/atomic"
	"time"
)

// The restart guard (WithRestartGuard) withholds the votes of a master that
// may have lost what it held, until every lock it could have held has
// expired: those of other clients, whose TTLs the window bounds, counted
// from when the master started; and those this client wrote, whose
// expiries it remembers here. Every TTL written on a lock key counts, not
// only those granted by an acquire: a lock extended from 2 s to 30 s lives
// 30 s.

// expiries remembers until when the TTLs this client wrote may keep a lock
// alive.
type expiries struct {
	epoch  time.Time    // a monotonic base
	latest atomic.Int64 // the latest expiry, in ns after epoch; 0: none
}

func newExpiries() *expiries { return &expiries{epoch: time.Now()} }

// note records that a lock may live until until.
func (e *expiries) note(until time.Time) {
	d := int64(until.Sub(e.epoch))
	for {
		cur := e.latest.Load()
		if d <= cur || e.latest.CompareAndSwap(cur, d) {
			return
		}
	}
}

// until is the latest expiry noted; the zero time when there is none.
func (e *expiries) until() time.Time {
	d := e.latest.Load()
	if d == 0 {
		return time.Time{}
	}
	return e.epoch.Add(time.Duration(d))
}

// GuardTTLStretch: every TTL written on a lock key (acquires, extends,
// renewals, CoverTTL) stretches the restart guard to cover it; off, only
// the TTLs granted by acquires do.
const GuardTTLStretch Guard = "ttl-stretch"

// noteTTL records, before a TTL of ttl is written on a lock key, that the
// lock may live until ttl from now. Acquires note theirs always; other
// writes (extends, renewals) unless GuardTTLStretch is off.
func (c *Client) noteTTL(ttl time.Duration, acquire bool) {
	if ttl <= 0 || !acquire && c.off(GuardTTLStretch) {
		return
	}
	c.opts.expiries.note(time.Now().Add(ttl))
}

// CoverTTL tells the restart guard, before a TTL of ttl is written on a
// lock key by other means than this client's lock operations (Broadcast of
// PEXPIRE, SET … PX), that the lock may live until ttl from now.
func (c *Client) CoverTTL(ttl time.Duration) { c.noteTTL(ttl, false) }

// guardEnd is until when a master that started at start and lost its data
// is guarded: the window after its start, or the latest expiry this client
// wrote, whichever is later.
func (n *node) guardEnd(start time.Time) time.Time {
	end := start.Add(n.opts.guardWindow)
	if e := n.opts.expiries.until(); e.After(end) {
		end = e
	}
	return end
}
