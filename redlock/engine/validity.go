package engine

import "time"

// driftAllowance is the clock-drift term of the Redlock algorithm:
// ttl·factor plus 2 ms (1 ms of Redis expiry precision, 1 ms minimum drift).
func driftAllowance(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + 2*time.Millisecond
}

// validity is what is left of a lock of the given ttl once elapsed has
// passed since before the first send, less the drift allowance. It is not
// positive when the lock must not be considered held.
func validity(ttl, elapsed time.Duration, factor float64) time.Duration {
	return ttl - elapsed - driftAllowance(ttl, factor)
}

// acquireOutcome decides an acquire from its votes t, counted from before
// the first send until elapsed: granted with the validity left (positive),
// or why not. held says the votes show the key taken by others (each kind
// of lock has its rule for that); a ttl of 0 (no expiry) has no validity
// to spend.
func (c *Client) acquireOutcome(t *votes, held bool, ttl, elapsed time.Duration) (time.Duration, error) {
	v := validity(ttl, elapsed, c.opts.drift)
	switch {
	case t.won() && (ttl == 0 || v > 0):
		return max(v, 0), nil
	case t.won():
		return 0, ErrValiditySpent
	case held:
		return 0, ErrHeld
	case t.reachable() < t.quorum:
		return 0, t.err()
	}
	return 0, ErrSplitVote
}

// Validity is what is left of a lock of the given ttl once elapsed has
// passed since before the first send, less this client's drift allowance:
// how long a holder may still act on it. Not positive: not held.
func (c *Client) Validity(ttl, elapsed time.Duration) time.Duration {
	return validity(ttl, elapsed, c.opts.drift)
}
