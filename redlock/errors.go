package redlock

import "github.com/redlock-proxy/redlock-proxy/redlock/engine"

// The errors of Obtain and of a Lock's methods, to test with errors.Is.
var (
	// ErrNotAcquired: the lock was not obtained. The key is held elsewhere,
	// or no holder reached a quorum, or the quorum was reached with no
	// validity left.
	ErrNotAcquired = engine.ErrNotAcquired
	// ErrNotHeld: the lock to refresh or release is no longer held on a
	// quorum of masters. It expired, or was released.
	ErrNotHeld = engine.ErrNotHeld
	// ErrNoQuorum: too few masters answered, or could vote, for the outcome
	// to be known. The lock may or may not be held.
	ErrNoQuorum = engine.ErrNoQuorum
	// ErrTTLTooLong: the TTL asked for is above the longest allowed
	// (WithMaxLockTTL). Nothing was sent.
	ErrTTLTooLong = engine.ErrTTLTooLong
)
