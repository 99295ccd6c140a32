// Package redlock takes locks with the Redlock algorithm over N
// independent Redis masters: a lock is granted only when a quorum of them
// took it with validity left, after the drift allowance.
//
// Create a Client over the masters with New (options: WithQuorum,
// WithDriftFactor, WithNodeTimeout, WithRestartGuard, WithMaxLockTTL,
// WithClockCheck, WithRedisOptions, WithLogf), then take a lock with Client.Obtain: it
// answers a *Lock you hold, with Refresh, Release, Validity (how long it
// is still safe to act on), TTL, Token and, for a lock obtained
// WithFence, its fencing number (Fence). Obtain retries a held key as its
// RetryStrategy says (NoRetry, LinearBackoff, ExponentialBackoff,
// LimitRetry) until its context is done. The errors to test with
// errors.Is are ErrNotAcquired (not obtained), ErrNotHeld (refresh or
// release of a lock no longer held), ErrNoQuorum (too few masters
// answered to know) and ErrTTLTooLong (a TTL above WithMaxLockTTL, refused
// with nothing sent).
//
// The masters are guarded as the proxy built on this package guards them:
// a master that restarted and may have lost its locks, or whose clock
// jumped, does not vote until every lock it could have held has expired
// (on every key for the restart guard's window, and on each key this
// client locked for longer until that TTL has run out);
// what a refused attempt took is undone on every master; commands of
// concurrent operations bound for one master share a pipeline.
//
// Each method of a Lock is one quorum operation of package
// redlock/engine, the lower layer that the proxy is built on too.
package redlock
