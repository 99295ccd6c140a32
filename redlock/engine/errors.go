package engine

import (
	"errors"
	"fmt"
	"slices"
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
	for _, n := range e.Nodes {
		s += "; " + strings.TrimPrefix(n.Error(), "redlock: ")
	}
	return s
}

// GuardedText says which masters are under the restart guard and for how
// much longer ("" for none), as "2 masters are under the restart guard:
// master0 and master2 for another 58s": each master named by its place
// among the masters (master0 first), with its address when addrs is set;
// masters guarded alike grouped; a master held back on one key only with
// that key, written by quote (nil: Go-quoted). The time left is rounded
// up, to the second from a second on.
func GuardedText(gs []GuardedMaster, now time.Time, addrs bool, quote func(string) string) string {
	if quote == nil {
		quote = strconv.Quote
	}
	if len(gs) == 0 {
		return ""
	}
	gs = slices.Clone(gs)
	slices.SortStableFunc(gs, func(a, b GuardedMaster) int { return a.Index - b.Index })
	// Groups of masters guarded alike, in the order of their first master.
	type group struct {
		how   string
		names []string
	}
	var groups []*group
	for _, g := range gs {
		var how string
		switch {
		case g.Replica:
			how = "answering as a replica"
		case g.Key != "":
			how = fmt.Sprintf("on key %s for another %s", quote(g.Key), timeLeft(g.Until.Sub(now)))
		default:
			how = "for another " + timeLeft(g.Until.Sub(now))
		}
		name := fmt.Sprintf("master%d", g.Index)
		if addrs {
			name += " (" + g.Addr + ")"
		}
		i := slices.IndexFunc(groups, func(gr *group) bool { return gr.how == how })
		if i < 0 {
			groups = append(groups, &group{how: how})
			i = len(groups) - 1
		}
		groups[i].names = append(groups[i].names, name)
	}
	var b strings.Builder
	if len(gs) == 1 {
		b.WriteString("1 master is under the restart guard: ")
	} else {
		fmt.Fprintf(&b, "%d masters are under the restart guard: ", len(gs))
	}
	for i, gr := range groups {
		if i > 0 {
			b.WriteString("; ")
		}
		for j, n := range gr.names {
			switch {
			case j == 0:
			case j == len(gr.names)-1:
				b.WriteString(" and ")
			default:
				b.WriteString(", ")
			}
			b.WriteString(n)
		}
		b.WriteString(" " + gr.how)
	}
	return b.String()
}

// timeLeft writes a guard's time left for people, rounded up: to the
// second from a second on ("58s", "59m12s"), else to the millisecond.
func timeLeft(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d >= time.Second:
		return FormatTTL((d + time.Second - 1).Truncate(time.Second))
	}
	return FormatTTL((d + time.Millisecond - 1).Truncate(time.Millisecond))
}

// Unwrap returns ErrNoQuorum and the per-master errors.
func (e *QuorumError) Unwrap() []error { return append([]error{ErrNoQuorum}, e.Nodes...) }
