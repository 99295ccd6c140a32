package engine

import "testing"

// PermitQuorum is the least quorum that keeps a semaphore of limit L to L
// holders on n masters. Each master holds at most L members at once, so
// L+1 holders each admitted by q masters fit exactly when L+1 sets of q
// masters can be chosen with no master in more than L of them. The test
// searches every such choice: with q = PermitQuorum(n, L) none fits (at
// most L holders), with q − 1 one does (L+1 holders, each on q − 1
// masters).
func TestPermitQuorum(t *testing.T) {
	want := map[[2]int]int{ // {n, limit}: quorum, as docs/clients.md lists it
		{3, 1}: 2, {3, 2}: 3, {3, 3}: 3, {3, 10}: 3,
		{5, 1}: 3, {5, 2}: 4, {5, 3}: 4, {5, 4}: 5, {5, 10}: 5,
	}
	for k, q := range want {
		if got := PermitQuorum(k[0], int64(k[1])); got != q {
			t.Errorf("PermitQuorum(%d, %d) = %d, want %d", k[0], k[1], got, q)
		}
	}
	for n := 1; n <= 5; n++ {
		for limit := 1; limit <= 6; limit++ {
			q := PermitQuorum(n, int64(limit))
			if q > n || fits(n, limit, q) {
				t.Errorf("%d masters, limit %d: %d holders fit with quorum %d", n, limit, limit+1, q)
			}
			if q > 1 && !fits(n, limit, q-1) {
				t.Errorf("%d masters, limit %d: quorum %d is not the least (%d holders cannot fit with %d)", n, limit, q, limit+1, q-1)
			}
		}
	}
	if PermitQuorum(3, 0) != 3 || PermitQuorum(3, -1) != 3 || PermitQuorum(5, 1<<62) != 5 {
		t.Error("a limit below 1, or a huge one, needs every master")
	}
}

// fits reports whether limit+1 holders, each admitted by q distinct
// masters of n, can be placed with no master holding more than limit.
func fits(n, limit, q int) bool {
	var subsets []uint
	for m := uint(0); m < 1<<n; m++ {
		if popcount(m) == q {
			subsets = append(subsets, m)
		}
	}
	load := make([]int, n)
	var place func(holder, from int) bool
	place = func(holder, from int) bool {
		if holder == limit+1 {
			return true
		}
		for i := from; i < len(subsets); i++ { // holders in non-decreasing subset order
			ok := true
			for b := 0; b < n; b++ {
				if subsets[i]&(1<<b) != 0 && load[b] == limit {
					ok = false
				}
			}
			if !ok {
				continue
			}
			for b := 0; b < n; b++ {
				if subsets[i]&(1<<b) != 0 {
					load[b]++
				}
			}
			found := place(holder+1, i)
			for b := 0; b < n; b++ {
				if subsets[i]&(1<<b) != 0 {
					load[b]--
				}
			}
			if found {
				return true
			}
		}
		return false
	}
	return place(0, 0)
}

func popcount(m uint) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}
