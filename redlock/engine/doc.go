// Package engine implements the Redlock distributed lock algorithm over N
// independent Redis masters: quorum acquire with drift-adjusted validity,
// release and extend by token, majority reads of lock keys, a restart
// guard that withholds the votes of masters that may have lost their data,
// a clock check that treats a master whose clock jumps like a restarted
// one (clock.go), and fenced locks whose every grant carries a number larger
// than all earlier grants of the key (fence.go).
//
// Commands bound for one master from concurrent operations are sent
// together, as pipelines on a connection per master (batch.go), and
// every operation answers as soon as its outcome is decided.
//
// # Usage
//
// Create a Client over the masters with New, then take a lock with
// Client.Obtain: it answers a *Mutex you hold, with Refresh, Release,
// Validity (how long it is still safe to act on), Token and, for a lock
// obtained WithFence, its fencing number. Obtain retries a held key as its
// RetryStrategy says (NoRetry, LinearBackoff, ExponentialBackoff,
// LimitRetry) until its context is done. The errors to test with
// errors.Is are ErrNotAcquired (not obtained), ErrNotHeld (refresh or
// release of a lock no longer held) and ErrNoQuorum (too few masters
// answered to know).
//
// The other methods of Client (Acquire, AcquireGet, Extend, Release,
// their fenced, multi-key and read/write forms, Read, Broadcast, …) are the
// lower layer that Obtain and the proxy are built on: each is one quorum
// operation, shaped after the Redis command the proxy serves.
//
// The package has no logging and no configuration files; it can be used
// without the proxy that is built on it.
package engine
