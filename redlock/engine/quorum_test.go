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

// fanoutVotes hands a step's replies over only once fewestToDecide have
// come: no set of fewer answers decides a vote under any rule countVotes
// is given (won, lost, decidedOrLost, with the guard on or off), whatever
// the answers are, and some set of that many does.
func TestFewestToDecide(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for q := n/2 + 1; q <= n; q++ {
			c := &Client{nodes: make([]*node, n), quorum: q}
			k := c.fewestToDecide(q)
			reached := false
			// Every mix of yes, no, failed and withheld answers.
			for yes := 0; yes <= n; yes++ {
				for no := 0; yes+no <= n; no++ {
					for failed := 0; yes+no+failed <= n; failed++ {
						for withheld := 0; yes+no+failed+withheld <= n; withheld++ {
							for _, loose := range []bool{false, true} {
								v := votes{n: n, quorum: q, loose: loose}
								for i := 0; i < yes; i++ {
									v.add(&node{}, nil, voteYes, false)
								}
								for i := 0; i < no; i++ {
									v.add(&node{}, nil, voteNo, false)
								}
								for i := 0; i < failed; i++ {
									v.add(&node{}, errMasterDown, voteNo, false)
								}
								for i := 0; i < withheld; i++ {
									v.add(&node{}, nil, voteYes, true)
								}
								decided := v.decided() || decidedOrLost(&v)
								if decided && v.answered() < k {
									t.Fatalf("%d masters, quorum %d: %d answers (%d yes, %d no, %d failed, %d withheld, guard off %v) decide, fewer than %d",
										n, q, v.answered(), yes, no, failed, withheld, loose, k)
								}
								reached = reached || decided && v.answered() == k
							}
						}
					}
				}
			}
			if !reached {
				t.Errorf("%d masters, quorum %d: no %d answers decide", n, q, k)
			}
		}
	}
}

// A fanout that holds its first replies hands them over together with the
// one that completes them, then each as it comes.
func TestFanoutHoldsFirstReplies(t *testing.T) {
	op := &fanoutOp[int64]{ch: make(chan reply[int64], 5), hold: 3}
	op.kept = op.keptBuf[:0]
	for i := 1; i <= 5; i++ {
		op.deliver(reply[int64]{val: int64(i)})
		want := 0
		if i >= 3 {
			want = i
		}
		if len(op.ch) != want {
			t.Fatalf("after %d replies, %d handed over, want %d", i, len(op.ch), want)
		}
	}
	for i := 1; i <= 5; i++ {
		if r := <-op.ch; r.val != int64(i) {
			t.Fatalf("reply %d handed over as %d", i, r.val)
		}
	}
}
