package engine

import (
	"errors"
	"testing"
	"time"
)

// A QuorumError says why each vote is missing: the masters under the
// restart guard, grouped when guarded alike, in their order, each with the
// time left rounded up; and each master that did not answer, with its
// error.
func TestQuorumErrorText(t *testing.T) {
	now := time.Now()
	fresh := func(i int, left time.Duration) GuardedMaster {
		return GuardedMaster{Index: i, Addr: "10.0.0." + string(rune('1'+i)) + ":6379", Until: now.Add(left)}
	}
	cases := []struct {
		err  *QuorumError
		want string
	}{
		{&QuorumError{Reachable: 1, Needed: 2, Guarded: []GuardedMaster{fresh(2, 58*time.Second), fresh(1, 58*time.Second)}},
			"redlock: 1 of the masters can vote, 2 needed; 2 masters are under the restart guard: master1 (10.0.0.2:6379) and master2 (10.0.0.3:6379) for another 58s"},
		{&QuorumError{Reachable: 0, Needed: 2, Guarded: []GuardedMaster{fresh(0, 3*time.Second), fresh(1, 59*time.Second), fresh(2, 59*time.Second)}},
			"redlock: 0 of the masters can vote, 2 needed; 3 masters are under the restart guard: master0 (10.0.0.1:6379) for another 3s; master1 (10.0.0.2:6379) and master2 (10.0.0.3:6379) for another 59s"},
		{&QuorumError{Reachable: 1, Needed: 2, Guarded: []GuardedMaster{{Index: 0, Addr: "a:1", Until: now.Add(time.Hour), Key: "lock:a"}, {Index: 1, Addr: "b:1", Replica: true}},
			Nodes: []error{&NodeError{Addr: "b:1", Err: errors.New("READONLY You can't write against a read only replica.")}}},
			`redlock: 1 of the masters can vote, 2 needed; 2 masters are under the restart guard: master0 (a:1) on key "lock:a" for another 1h; master1 (b:1) answering as a replica; master b:1: READONLY You can't write against a read only replica.`},
		{&QuorumError{Reachable: 1, Needed: 2, Nodes: []error{&NodeError{Addr: "c:1", Err: errors.New("i/o timeout")}}},
			"redlock: 1 of the masters answered, 2 needed; master c:1: i/o timeout"},
		{&QuorumError{Reachable: 2, Needed: 2, Guarded: []GuardedMaster{fresh(0, 20*time.Second)}},
			"redlock: outcome not known: the 2 masters that could vote do not settle it (2 needed); 1 master is under the restart guard: master0 (10.0.0.1:6379) for another 20s"},
	}
	// The time left is counted from the call: whole seconds stay whole
	// for the second the test may take.
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
		if !errors.Is(c.err, ErrNoQuorum) {
			t.Errorf("%v does not match ErrNoQuorum", c.err)
		}
	}
}

// The time left is rounded up: a guard never reads shorter than it is.
func TestGuardedTextRoundsUp(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for left, want := range map[time.Duration]string{
		400 * time.Microsecond:       "1ms",
		999 * time.Millisecond:       "999ms",
		57200 * time.Millisecond:     "58s",
		time.Hour - time.Millisecond: "1h",
		-time.Second:                 "0s",
	} {
		got := GuardedText([]GuardedMaster{{Index: 1, Until: now.Add(left)}}, now, false, nil)
		if w := "1 master is under the restart guard: master1 for another " + want; got != w {
			t.Errorf("%v left: got %q, want %q", left, got, w)
		}
	}
}
