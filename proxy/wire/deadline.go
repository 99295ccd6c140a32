package wire

import "time"

// LazyDeadline re-arms a connection's deadline only every eighth of its
// length instead of before every read or write: setting one costs a timer
// update, which for small pipelined replies was a few percent of the
// proxy's time. Each operation still gets at least d, and at most d·9/8.
type LazyDeadline struct {
	at time.Time     // the deadline set
	d  time.Duration // the length it was set for
}

// Arm makes sure the deadline is at least d away, calling set when it is
// not. d ≤ 0 clears it.
func (l *LazyDeadline) Arm(set func(time.Time) error, d time.Duration) {
	if d <= 0 {
		if !l.at.IsZero() {
			l.at, l.d = time.Time{}, 0
			_ = set(time.Time{})
		}
		return
	}
	now := time.Now()
	if d == l.d && l.at.Sub(now) >= d {
		return
	}
	l.at, l.d = now.Add(d+d/8), d
	_ = set(l.at)
}
