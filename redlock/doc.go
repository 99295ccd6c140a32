// Package redlock takes locks with the Redlock algorithm over N
// independent Redis masters: a lock is granted only when a quorum of them
// took it with validity left, after the drift allowance.
//
//	c, err := redlock.New([]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"})
//	lock, err := c.Obtain(ctx, "lock:report", 10*time.Second)
//	// work while lock.Validity() > 0
//	err = lock.Release(ctx)
//
// Create a Client over the masters' addresses with New, or over the
// application's own go-redis clients with NewFromClients (options:
// WithQuorum, WithDriftFactor, WithNodeTimeout, WithRestartGuard,
// WithMaxLockTTL, WithClockCheck, WithRedisOptions, WithLogf), then take
// a lock with Client.Obtain: it answers a *Lock you hold, with Refresh,
// Release, Validity (how long it is still safe to act on), TTL, Token
// and, for a lock obtained WithFence, its fencing number (Fence). Obtain
// retries a held key as its RetryStrategy says (NoRetry, LinearBackoff,
// ExponentialBackoff, LimitRetry) until its context is done. The errors
// to test with errors.Is are ErrNotAcquired (not obtained), ErrNotHeld
// (refresh or release of a lock no longer held), ErrNoQuorum (too few
// masters answered, or could vote, to know: a *QuorumError that says
// why) and ErrTTLTooLong (a TTL above WithMaxLockTTL, refused with
// nothing sent).
//
// The masters are guarded as the redlock-proxy server guards them (both
// are built on package redlock/engine): a master that restarted and may
// have lost its locks, or whose clock jumped, does not vote until every
// lock it could have held has expired (on every key for the restart
// guard's window, and on each key this client locked for longer until
// that TTL has run out). A master that has been up for less than the
// window counts as one that restarted, so masters just created do not
// vote until the window (60 s by default) has passed since they started,
// unless they persist every write
// (appendonly yes, appendfsync always) and Client.InitMasters declared
// them a new deployment. What a refused attempt took is undone on every
// master; commands of concurrent operations bound for one master share a
// pipeline.
//
// Each method of a Lock is one quorum operation of package
// redlock/engine, the lower layer.
package redlock
