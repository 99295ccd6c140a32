package redlock

import (
	"testing"
	"time"
)

func TestValidity(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		ttl, elapsed time.Duration
		factor       float64
		want         time.Duration
	}{
		{10000 * ms, 5 * ms, 0.01, 10000*ms - 5*ms - 100*ms - 2*ms},
		{100 * ms, 0, 0.01, 97 * ms},
		{2 * ms, 0, 0.01, -20 * time.Microsecond},
		{1000 * ms, 999 * ms, 0, -1 * ms},
	}
	for _, c := range cases {
		if got := validity(c.ttl, c.elapsed, c.factor); got != c.want {
			t.Errorf("validity(%s, %s, %v) = %s, want %s", c.ttl, c.elapsed, c.factor, got, c.want)
		}
	}
}

func TestQuorumTTL(t *testing.T) {
	s := time.Second
	cases := []struct {
		ttls   []time.Duration
		quorum int
		want   time.Duration
	}{
		{[]time.Duration{10 * s, 30 * s, 20 * s}, 2, 20 * s},
		{[]time.Duration{10 * s, -1, 20 * s}, 2, 20 * s},
		{[]time.Duration{-1, -1, 5 * s}, 2, -1},
		{[]time.Duration{5 * s, 7 * s}, 2, 5 * s},
	}
	for _, c := range cases {
		if got := quorumTTL(c.ttls, c.quorum); got != c.want {
			t.Errorf("quorumTTL(%v, %d) = %s, want %s", c.ttls, c.quorum, got, c.want)
		}
	}
}

func TestObserveGuard(t *testing.T) {
	o := &options{guardWindow: 10 * time.Second, expiries: newExpiries()}
	n := &node{addr: "m", opts: o}
	now := time.Now()
	n.observe("a", time.Hour, false, now)
	if !n.trusted(now) {
		t.Fatal("an old master seen for the first time must be trusted")
	}
	n.observe("b", 2*time.Second, false, now)
	if n.trusted(now.Add(7*time.Second)) || !n.trusted(now.Add(8*time.Second)) {
		t.Fatal("a restarted master must be guarded until window − uptime has passed")
	}
	n2 := &node{addr: "m2", opts: o}
	n2.observe("x", time.Second, true, now)
	if !n2.trusted(now) {
		t.Fatal("a durable master needs no guard")
	}
	n3 := &node{addr: "m3", opts: &options{expiries: newExpiries()}}
	n3.observe("x", 0, false, now)
	if !n3.trusted(now) {
		t.Fatal("window 0 disables the guard")
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Error("no masters accepted")
	}
	if _, err := New([]string{"a:1", "b:1", "c:1"}, WithQuorum(1)); err == nil {
		t.Error("quorum 1 of 3 accepted")
	}
	c, err := New([]string{"a:1", "b:1", "c:1", "d:1", "e:1"})
	if err != nil || c.Quorum() != 3 {
		t.Fatalf("default quorum of 5: %v %v", c, err)
	}
	c.Close()
}

// A lock granted with a TTL longer than the window stretches the guard.
func TestGuardCoversLongestTTLGranted(t *testing.T) {
	c := &Client{opts: options{guardWindow: 10 * time.Second, expiries: newExpiries()}}
	c.noteTTL(30*time.Second, true)
	c.noteTTL(5*time.Second, true)
	n := &node{addr: "m", opts: &c.opts}
	now := time.Now()
	n.observe("a", time.Hour, false, now)
	n.observe("b", 0, false, now)
	if n.trusted(now.Add(29 * time.Second)) {
		t.Fatal("guard shorter than the longest TTL granted")
	}
	if !n.trusted(now.Add(30 * time.Second)) {
		t.Fatal("guard longer than the longest TTL granted")
	}
}

// A new connection to a master already known by its run_id says nothing new:
// it has not restarted, so a longer TTL granted since the first sight does
// not put it back under the guard. (Pools open connections at any time.)
func TestSameRunIDIsNotGuardedAgain(t *testing.T) {
	c := &Client{opts: options{guardWindow: 3 * time.Second, expiries: newExpiries()}}
	n := &node{addr: "m", opts: &c.opts}
	now := time.Now()
	n.observe("a", 0, false, now) // first sight of a young master: guarded 3 s
	later := now.Add(3 * time.Second)
	if !n.trusted(later) {
		t.Fatal("guard outlived the window")
	}
	c.noteTTL(60*time.Second, true)
	n.observe("a", 3*time.Second, false, later)
	if !n.trusted(later) {
		t.Fatal("a second connection to the same run made the master guarded again")
	}
	n.observe("b", 0, false, later)
	if n.trusted(now.Add(59 * time.Second)) { // the TTL was written at now
		t.Fatal("a real restart must still be guarded for the TTL granted")
	}
}
