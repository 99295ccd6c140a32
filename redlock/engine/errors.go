package engine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
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
	// Guarded lists the masters whose votes the restart guard withheld,
	// and until when.
	Guarded []GuardedMaster
}

func (e *QuorumError) Error() string {
	var s string
	if e.Reachable >= e.Needed {
		// Enough masters answered, yet their answers do not settle it.
		s = fmt.Sprintf("redlock: outcome not known: the %d masters that could vote do not settle it (%d needed)", e.Reachable, e.Needed)
	} else if len(e.Guarded) > 0 {
		s = fmt.Sprintf("redlock: %d of the masters can vote, %d needed", e.Reachable, e.Needed)
	} else {
		s = fmt.Sprintf("redlock: %d of the masters answered, %d needed", e.Reachable, e.Needed)
	}
	if g := GuardedText(e.Guarded, time.Now(), true, nil); g != "" {
		s += "; " + g
	}
	return s
}

// GuardedText says which masters are under the restart guard and until
// when ("" for none): each named by its place among the masters (master0
// first), with its address when addrs is set, and, when the guard holds
// it back on one key only, that key, written by quote (nil: Go-quoted).
func GuardedText(gs []GuardedMaster, now time.Time, addrs bool, quote func(string) string) string {
	if quote == nil {
		quote = strconv.Quote
	}
	if len(gs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("under the restart guard: ")
	for i, g := range gs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "master%d", g.Index)
		if addrs {
			fmt.Fprintf(&b, " (%s)", g.Addr)
		}
		if g.Replica {
			b.WriteString(" answering as a replica")
			continue
		}
		if g.Key != "" {
			fmt.Fprintf(&b, " on key %s", quote(g.Key))
		}
		left := max(g.Until.Sub(now), 0)
		fmt.Fprintf(&b, " until %s (%s from now)", g.Until.UTC().Format("2006-01-02T15:04:05.000Z"), FormatTTL(left.Round(time.Millisecond)))
	}
	return b.String()
}

// Unwrap returns ErrNoQuorum and the per-master errors.
func (e *QuorumError) Unwrap() []error { return append([]error{ErrNoQuorum}, e.Nodes...) }
