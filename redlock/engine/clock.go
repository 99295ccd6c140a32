package engine

import (
	"context"
	"strconv"
	"time"
)

// Masters expire keys by their own wall clocks: a master whose clock jumps
// forward drops the locks it holds early, as if it had restarted empty. The
// client cannot prevent that, but it can notice it: every clockEvery it asks
// each master for TIME and compares how far the master's clock moved with
// how far its own monotonic clock did. The uncertainty of a comparison is the
// two round trips (a reply was made somewhere inside each); a difference
// beyond that and the allowed jump puts the master under the restart guard.
// A clock that jumps back makes locks outlive their TTL on that master; that
// costs liveness, not safety, but it is counted and guarded the same way: a
// clock that jumps at all is not to be trusted.

// WithClockCheck sets how often each master's TIME is compared with the
// client's monotonic clock, and the jump beyond which the master is treated
// as restarted (its votes are withheld for the guard window). Default every
// 1 s, 1 s of jump; every 0 turns the check off. It does nothing when the
// restart guard is off.
func WithClockCheck(every, jump time.Duration) Option {
	return func(o *options) { o.clockEvery, o.clockJump = every, jump }
}

// clockSample is one TIME reading of a master.
type clockSample struct {
	master time.Time     // the master's wall clock
	local  time.Time     // the client's clock at the middle of the round trip (monotonic)
	rtt    time.Duration // the round trip
}

// checkClock reads the master's TIME and compares it with the last reading.
func (n *node) checkClock(ctx context.Context) {
	if n.isDown() {
		return
	}
	start := time.Now()
	v, err := n.do(ctx, "time").StringSlice()
	end := time.Now()
	if err != nil || len(v) != 2 {
		return
	}
	sec, err1 := strconv.ParseInt(v[0], 10, 64)
	usec, err2 := strconv.ParseInt(v[1], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	rtt := end.Sub(start)
	s := clockSample{
		master: time.Unix(sec, usec*1000).Add(time.Duration(n.clockSkew.Load())),
		local:  start.Add(rtt / 2),
		rtt:    rtt,
	}
	n.mu.Lock()
	prev := n.clock
	n.clock = s
	runID := n.runID
	n.mu.Unlock()
	if prev.local.IsZero() || runID == "" {
		return
	}
	moved := s.master.Sub(prev.master)
	elapsed := s.local.Sub(prev.local) // monotonic
	jump := moved - elapsed
	slack := (s.rtt+prev.rtt)/2 + n.opts.clockJump
	if jump > slack || -jump > slack {
		n.clockJumped(jump, time.Now())
	}
}

// clockJumped puts the master under the restart guard for the full window,
// and on the keys this client wrote with longer TTLs until they run out, as
// a restart would.
func (n *node) clockJumped(jump time.Duration, now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.clockJumps++
	if n.opts.guardWindow == 0 {
		return
	}
	n.logf("redlock: master %s clock jumped by %s against this client's clock", n.addr, jump.Round(time.Millisecond))
	n.lost(now, now, "restart guard after a clock jump")
}
