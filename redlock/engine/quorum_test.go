package engine

import "testing"

// The one rule every quorum step decides by, on three masters (quorum 2)
// and five (quorum 3): won with a quorum of yes votes, lost only when a
// quorum is out of reach even with every unknown vote a yes, undecided
// (a quorum error) otherwise. With the guard off, as before it existed, an
// answer the restart guard withholds reads as "no" and a quorum of answers
// decides "not held".
func TestVotesRule(t *testing.T) {
	type answers struct{ yes, no, failed, withheld int }
	cases := []struct {
		n     int
		a     answers
		won   bool
		lost  bool
		loose bool // lost with the guard off
	}{
		{3, answers{2, 0, 0, 0}, true, false, false},
		{3, answers{1, 2, 0, 0}, false, true, true},
		{3, answers{0, 2, 0, 0}, false, true, true}, // one still pending cannot make a quorum
		{3, answers{1, 1, 0, 0}, false, false, true},
		// The renewal: one renewed, one guarded said absent, one timed out.
		{3, answers{1, 0, 1, 1}, false, false, true},
		{3, answers{0, 1, 1, 1}, false, false, true},
		{3, answers{0, 1, 2, 0}, false, false, false},
		{3, answers{0, 0, 3, 0}, false, false, false},
		{3, answers{0, 0, 0, 3}, false, false, true},
		{5, answers{2, 1, 1, 1}, false, false, true},
		{5, answers{2, 3, 0, 0}, false, true, true},
		{5, answers{0, 2, 0, 3}, false, false, true},
		{5, answers{3, 0, 2, 0}, true, false, false},
	}
	for _, c := range cases {
		for _, loose := range []bool{false, true} {
			v := votes{n: c.n, quorum: c.n/2 + 1, loose: loose}
			for i := 0; i < c.a.yes; i++ {
				v.add(&node{}, nil, voteYes, false)
			}
			for i := 0; i < c.a.no; i++ {
				v.add(&node{}, nil, voteNo, false)
			}
			for i := 0; i < c.a.failed; i++ {
				v.add(&node{}, errMasterDown, voteNo, false)
			}
			for i := 0; i < c.a.withheld; i++ {
				v.add(&node{}, nil, voteYes, true)
			}
			wantLost := c.lost
			if loose {
				wantLost = c.loose
			}
			if v.won() != c.won || v.lost() != wantLost {
				t.Errorf("%d masters, %+v, guard off %v: won %v lost %v, want %v %v", c.n, c.a, loose, v.won(), v.lost(), c.won, wantLost)
			}
		}
	}
}
