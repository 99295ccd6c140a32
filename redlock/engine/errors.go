package engine

import (
	"errors"
	"fmt"
)

// ErrNoQuorum is returned when too few masters answered for the outcome of an
// operation to be decided.
var ErrNoQuorum = errors.New("redlock: too few masters reachable for a quorum")

// ErrNotHeld is returned when a lock to be refreshed or released is no
// longer held on a quorum of masters: it expired, or was released.
var ErrNotHeld = errors.New("redlock: not held")

// NodeError is the failure of one master during a quorum operation.
type NodeError struct {
	Addr string
	Err  error
}

func (e *NodeError) Error() string { return fmt.Sprintf("redlock: master %s: %v", e.Addr, e.Err) }

// Unwrap returns the underlying error.
func (e *NodeError) Unwrap() error { return e.Err }

// QuorumError reports an outcome that could not be decided: too few masters
// answered, or those that could vote do not settle it (see votes); it
// matches ErrNoQuorum with errors.Is.
type QuorumError struct {
	Reachable int // masters that answered, or could have counted
	Needed    int // the quorum
	Nodes     []error
}

func (e *QuorumError) Error() string {
	if e.Reachable >= e.Needed {
		// Enough masters answered, yet their answers do not settle it.
		return fmt.Sprintf("redlock: outcome not known: the %d masters that could vote do not settle it (%d needed)", e.Reachable, e.Needed)
	}
	return fmt.Sprintf("redlock: %d of the masters answered, %d needed", e.Reachable, e.Needed)
}

// Unwrap returns ErrNoQuorum and the per-master errors.
func (e *QuorumError) Unwrap() []error { return append([]error{ErrNoQuorum}, e.Nodes...) }
