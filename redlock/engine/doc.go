// Package engine is the quorum engine under package redlock and the proxy:
// the Redlock algorithm over N independent Redis masters, one quorum
// operation per method. Acquire, AcquireGet, Extend and Release (and their
// multi-key, fenced and read/write forms) take, renew and give back a key
// for a value with drift-adjusted validity (validity.go), undoing what a
// refused attempt took (undo.go); Reacquire lets a lock's holder take it
// again with a new value, decided as an extend; Read answers a key as a single Redis
// holding the quorum's state would (read.go); fenced locks carry a number
// larger than every earlier grant of the key (fence.go); AcquirePermit,
// ExtendPermit and ReleasePermit run counting semaphores, decided by a
// quorum of their own that keeps them to their limit (permits.go);
// Broadcast sends any command to every master. A restart guard withholds the votes of
// masters that may have lost their data, on every key for its window and on
// the keys this client wrote with longer TTLs until they run out (guard.go,
// evidence.go); no TTL above WithMaxLockTTL is written. A clock check
// treats a master whose clock jumps like a restarted one (clock.go).
//
// Every operation goes the same way (quorum.go): fanoutCmd queues each
// master's command on that master's batcher (batch.go), which sends the
// commands of concurrent operations together, as pipelines on a
// connection of its own (conn.go); countVotes counts the replies into
// votes, the one rule every quorum step decides by, and the operation
// answers as soon as its outcome is decided.
//
// Package redlock is the API for programs that take locks; this package
// is what the proxy serves Redis commands with. It has no logging and no
// configuration files.
package engine
