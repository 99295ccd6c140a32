// Package quorum holds the commands the quorum serves, apart from any
// client session: it parses their arguments (SET's and GETEX's options,
// expiries; a recognised lock script's token, TTL and database), runs
// them on the engine (package redlock/engine) and forms their replies (a
// lock script's as the script answers on one Redis, scripts.go; Redisson's
// hash lock's, hashlock.go, whose unlock message package proxy publishes
// on the backend between the quorum step and the reply; the native LOCK.*
// commands' fenced locks, nativecmds.go).
//
// Every lock operation on the engine is an Op method: it opens the
// operation's context (Context), calls the engine (the Engine interface,
// the client's *engine.Client) and counts acquires, extends and releases
// in Op.Metrics, which package proxy never does around one (Op.Acquire for
// SET NX and a one-key acquire script, Op.AcquireFenced… for LOCK.*,
// Op.ReleasePermits for ZREM of a semaphore's permits, the uncounted
// Op.EndLock for mixed mode's end of a lock whose mirror ended).
//
// Package proxy's handlers build an Op per command (Server.op) with what
// the command needs of the session (the client's engine, whether the
// backend holds data beside the locks), and act on what it returns
// (leases, waiters woken by a release that frees a key, mixed mode's
// mirrors, routes, a release's PUBLISH); this package never sees a client
// connection's state or the passthrough backend, and does not import
// package proxy (only proxy/lockscripts, for a script's Spec, and
// proxy/wire, for RESP3 maps).
package quorum
