package wire

import (
	"testing"
	"time"
)

func TestLazyDeadline(t *testing.T) {
	var got []time.Time
	set := func(at time.Time) error { got = append(got, at); return nil }
	var l LazyDeadline
	const d = 800 * time.Millisecond
	before := time.Now()
	l.Arm(set, d)
	after := time.Now()
	l.Arm(set, d) // at once again: still far enough
	if len(got) != 1 {
		t.Fatalf("set %d times, want 1", len(got))
	}
	if got[0].Sub(before) < d || got[0].Sub(after) > d+d/8 {
		t.Fatalf("deadline %v away, want between %v and %v", got[0].Sub(before), d, d+d/8)
	}
	time.Sleep(d/8 + 20*time.Millisecond)
	before = time.Now()
	l.Arm(set, d) // less than d left: re-armed
	if len(got) != 2 || got[1].Sub(before) < d {
		t.Fatalf("after an eighth: %d sets, last %v", len(got), got[len(got)-1].Sub(before))
	}
	l.Arm(set, d/2) // a new length re-arms at once
	if len(got) != 3 {
		t.Fatalf("new length: %d sets, want 3", len(got))
	}
	l.Arm(set, 0) // off
	if len(got) != 4 || !got[3].IsZero() {
		t.Fatalf("off: %v", got)
	}
	l.Arm(set, 0)
	if len(got) != 4 {
		t.Fatalf("off twice: %d sets", len(got))
	}
}
