// Package proxy serves the Redis protocol in front of N independent Redis
// masters: lock commands and recognised lock scripts run as Redlock quorum
// operations (package redlock/engine, the quorum engine that package
// redlock's API is built on too), reads and writes of lock keys are answered
// as one store, and every other command passes through to one backend. The
// proxy's own LOCK.* commands add fencing numbers, waiting, reentrancy and
// connection-bound leases (nativecmds.go).
//
// Where each stage of a request lives, in the order a SET NX meets them
// (docs/architecture.md draws the path):
//
//   - Listener and lifecycle: server.go (Listen, Serve, accept, dispatch,
//     Close), config.go, reload.go (SIGHUP), guardsoff.go (the guards
//     tests switch off).
//   - RESP framing: package wire (a client connection's framing checks,
//     limits and writes with deadlines; the parser of a read's commands;
//     reading backend replies; wire.Buf, the replies the proxy writes, in
//     RESP2 or RESP3; lazily re-armed deadlines; the stand-ins for a
//     client connection that discard, capture, buffer or look at a reply).
//   - The client connection: session.go (the read–run–reply loop),
//     client.go (per-client state), auth.go and credentials.go (client
//     AUTH; masters' and backend's), databases.go (SELECT).
//   - Classification and dispatch: table.go (the command table: a row per
//     command with its arity, key positions, where it is served and what
//     kind of command it is; serve, which checks the arity and routes from
//     the row, its handler answering or naming where the command goes),
//     dispatch.go (handle: AUTH gate, MULTI, subscribed clients, plain
//     passthrough, pipelined lock operations; forwarding to the backend).
//   - Answered by the proxy: conncmds.go (PING, HELLO, CLIENT, SELECT,
//     RESET…), clients.go (CLIENT LIST, INFO, KILL), info.go,
//     commandcmd.go (COMMAND, with the proxy's own commands added),
//     admincmds.go (commands refused on a voting backend).
//   - Lock operations pipelined on one connection: pipeline.go (started when
//     read, replies in request order, same-key order).
//   - Lock commands on the quorum: package quorum (parsing SET's and
//     GETEX's options, the quorum's reads of a lock key and their replies,
//     a command sent to every master and the answer a quorum gave, an
//     operation's context, Go errors to RESP replies, and the recognised
//     lock scripts' arguments, engine calls and replies; every engine
//     call of a lock operation and its metrics are its Op's; it never sees
//     a client's session or the backend), called by quorumcmds.go (SET NX
//     and its forms, GET, PTTL, EXISTS, DEL, EXPIRE… of lock keys: the
//     client's engine, leases and mixed mode's mirrors; Server.op, what a
//     command hands package quorum), payload.go (the bound on what a lock
//     operation carries).
//   - Lock scripts: package lockscripts recognises them (normalising, the
//     digests, the script cache, the libraries' scripts and [[scripts]],
//     each a lockscripts.Spec); eval.go runs them (EVAL/EVALSHA, SCRIPT:
//     the script cache, the spec, the session's part of a script's
//     operation — leases, mixed mode's mirrors, a release's PUBLISH —
//     around package quorum's Op.Release, Op.Extend, Op.OwnerTTL…),
//     with rwlock.go (Symfony's read/write locks, run by quorum's
//     Op.RWScript once their TTL is read), redisson.go (Redisson's
//     RLock, a hash lock: its scripts' arguments, quorum steps and
//     replies are quorum's Op.AcquireHash, Op.ReleaseHash… in
//     quorum/hashlock.go; here the lock keys, the TTL's bound and the
//     unlock message published on the backend between the quorum step
//     and the reply), redissonhash.go (Redisson's hash reads) and
//     semaphore.go (redis-semaphore's counting semaphores, their permit
//     scripts run by quorum's Op.PermitScript once their TTL is read, and
//     the sorted-set commands on their keys).
//   - Native locks: nativecmds.go (LOCK.*: the lock keys, and the waiters
//     and leases around quorum's calls on the fenced locks; their
//     arguments, calls and replies are quorum's ParseLockAcquire,
//     Op.AcquireFenced, Op.ReleaseFenced, WriteGrant, WriteLockInfo… in
//     quorum/nativecmds.go), lockwait.go (WAIT), lease.go
//     (connection-bound leases, each renewed and released through the Op
//     of the command that took it).
//   - Passthrough: package backend (pooled and pinned backend connections,
//     RESP2 and RESP3, backend.go; the shared connection plain commands
//     travel on, mux.go; a Sentinel group as the backend, its connections
//     following its primary, sentinel.go; a Redis Cluster as the backend,
//     its nodes' connections, slot map and redirects, cluster.go),
//     dispatch.go (forwarding to it), pubsub.go (a subscribed client's
//     connection and its relay), tracking.go (client-side caching),
//     keyspace.go (SCAN, KEYS, DBSIZE with the locks the backend has no
//     key for); on a Redis Cluster backend: cluster.go (its configuration
//     check), clusterroute.go (a command's node by its keys, the splits by
//     slot and the runs on every primary), clustertx.go (transactions,
//     WATCH, blocking commands on a client's own connection),
//     clusterinfo.go (INFO merged from every primary).
//   - Data beside locks (a backend of its own and every key a lock key):
//     mixed.go (locks mirrored into the backend's keyspace), flush.go
//     (FLUSHDB and FLUSHALL end the locks whose mirrors they erased).
//   - The boundary between lock state and everything else: boundary.go
//     (what may reach the backend, the proxy's reserved records, scripts
//     the proxy does not know), keyspecs.go (where a command's keys are),
//     glob.go (Redis's glob patterns: proxy.lock_keys, users' keys).
//   - Admin surfaces: package admin (metrics, health, status page), given
//     an admin.Source; server.go serves its handler.
//
// Imports go one way: proxy imports proxy/admin, proxy/backend,
// proxy/lockscripts, proxy/quorum and proxy/wire, none of which imports
// proxy; of them only proxy/backend (proxy/wire) and proxy/quorum
// (proxy/lockscripts, proxy/wire) import another.
package proxy
