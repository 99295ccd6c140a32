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
	// to be known. The lock may or may not be held. Its errors are
	// *QuorumError, which say why each missing vote is missing.
	ErrNoQuorum = engine.ErrNoQuorum
	// ErrTTLTooLong: the TTL asked for is above the longest allowed
	// (WithMaxLockTTL). Nothing was sent.
	ErrTTLTooLong = engine.ErrTTLTooLong
)

// QuorumError is the error of an operation whose outcome could not be
// known; it matches ErrNoQuorum. Reachable is how many masters answered
// or could have counted, Needed the quorum. Guarded lists the masters
// whose votes the restart guard withheld, and until when (a master that
// started or restarted less than WithRestartGuard's window ago and may
// have lost its locks; see InitMasters for masters just created empty);
// Nodes holds each failure of a master that did not answer, a *NodeError.
// Its text names the masters by their place among the addresses given to
// New (master0 first) and by address.
type QuorumError = engine.QuorumError

// GuardedMaster is a master whose vote the restart guard withheld, in a
// QuorumError: Index is its place among the masters (0 first), Until when
// it votes again; Key, when set, is the one key it does not vote on (a
// longer TTL this client wrote there may still be alive); Replica, that
// it answers as a replica, which never votes.
type GuardedMaster = engine.GuardedMaster

// NodeError is the failure of one master in a quorum operation, in
// QuorumError.Nodes.
type NodeError = engine.NodeError

// TTLError is the error of a TTL above WithMaxLockTTL; it matches
// ErrTTLTooLong.
type TTLError = engine.TTLError
