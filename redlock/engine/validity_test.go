package engine

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

// obs observes a master without a record (as when the record script is
// refused).
func obs(n *node, runID string, uptime time.Duration, durable bool, now time.Time) {
	n.observe(masterState{runID: runID, uptime: uptime, durable: durable}, now)
}

func TestObserveGuard(t *testing.T) {
	o := &options{guardWindow: 10 * time.Second, keyTTLs: newKeyTTLs()}
	n := &node{addr: "m", opts: o}
	now := time.Now()
	obs(n, "a", time.Hour, false, now)
	if !n.trusted(now) {
		t.Fatal("an old master seen for the first time must be trusted")
	}
	obs(n, "b", 2*time.Second, false, now)
	if n.trusted(now.Add(7*time.Second)) || !n.trusted(now.Add(8*time.Second)) {
		t.Fatal("a restarted master must be guarded until window − uptime has passed")
	}
	n3 := &node{addr: "m3", opts: &options{keyTTLs: newKeyTTLs()}}
	obs(n3, "x", 0, false, now)
	if !n3.trusted(now) {
		t.Fatal("window 0 disables the guard")
	}
}

// Whether a master kept its data is judged from evidence that it did (its
// record), not from its configuration alone.
func TestDataEvidence(t *testing.T) {
	rec := func(id, born string, seq int64, doubt string) record {
		return record{id: id, born: born, seq: seq, doubt: doubt}
	}
	st := func(run string, up time.Duration, durable bool, r *record) masterState {
		s := masterState{runID: run, uptime: up, durable: durable}
		if r != nil {
			s.rec, s.hasRec = *r, true
		}
		return s
	}
	r := func(x record) *record { return &x }
	old := st("a", time.Hour, true, r(rec("X", "a0", 5, "")))
	cases := []struct {
		name      string
		before    *masterState // seen before (a restart); nil: first sight
		oldFsync  bool         // with before: the old process persisted every write at its last check
		now       masterState
		off       bool // GuardDataEvidence off
		trusted   bool
		markDoubt bool
	}{
		{"first sight, young, not durable", nil, false, st("b", time.Second, false, r(rec("X", "a0", 5, ""))), false, false, false},
		{"first sight, young, durable, record survived a restart", nil, false, st("b", time.Second, true, r(rec("X", "a0", 5, ""))), false, true, false},
		{"first sight, young, durable, record made by this process", nil, false, st("b", time.Second, true, r(rec("X", "b", 0, ""))), false, false, false},
		{"first sight, young, durable, in doubt", nil, false, st("b", time.Second, true, r(rec("X", "a0", 5, "b"))), false, false, false},
		{"first sight, young, durable, no record", nil, false, st("b", time.Second, true, nil), false, false, false},
		{"first sight, young, durable, a new deployment", nil, false, st("b", time.Second, true, r(rec("X", NewDeployment, 0, ""))), false, true, false},
		{"first sight, young, durable, guard off", nil, false, st("b", time.Second, true, r(rec("X", "b", 0, ""))), true, true, false},
		{"restart, kept everything", &old, true, st("b", time.Second, true, r(rec("X", "a0", 5, ""))), false, true, false},
		{"restart, lost writes after AOF was turned off", &old, true, st("b", time.Second, true, r(rec("X", "a0", 4, ""))), false, false, true},
		{"restart, wiped (a new record)", &old, true, st("b", time.Second, true, r(rec("Y", "b", 0, ""))), false, false, false},
		{"restart, wiped, guard off", &old, true, st("b", time.Second, true, r(rec("Y", "b", 0, ""))), true, true, false},
		{"restart, not durable now", &old, true, st("b", time.Second, false, r(rec("X", "a0", 5, ""))), false, false, true},
		{"restart, old process not durable at its last check", &old, false, st("b", time.Second, true, r(rec("X", "a0", 5, ""))), false, false, true},
		{"restart, marked in doubt by another client", &old, true, st("b", time.Second, true, r(rec("X", "a0", 5, "b"))), false, false, false},
	}
	for _, c := range cases {
		o := &options{guardWindow: 10 * time.Second, keyTTLs: newKeyTTLs()}
		if c.off {
			WithGuardsOff(GuardDataEvidence)(o)
		}
		n := &node{addr: "m", opts: o}
		now := time.Now()
		if c.before != nil {
			n.observe(*c.before, now)
			n.durable.Store(c.oldFsync)
		}
		mark := n.observe(c.now, now)
		if n.trusted(now) != c.trusted || mark != c.markDoubt {
			t.Errorf("%s: trusted %v, mark doubt %v; want %v, %v", c.name, n.trusted(now), mark, c.trusted, c.markDoubt)
		}
	}
	// Erased in place (FLUSHALL on the master itself): guarded from then.
	n := &node{addr: "m", opts: &options{guardWindow: 10 * time.Second, keyTTLs: newKeyTTLs()}}
	now := time.Now()
	n.observe(old, now)
	n.mu.Lock()
	n.inspected(st("a", time.Hour, true, r(rec("Y", "a", 0, ""))), now)
	n.mu.Unlock()
	if n.trusted(now.Add(9 * time.Second)) {
		t.Error("a master whose record changed without a restart must be guarded")
	}
	// A doubt another client marked for this process is adopted.
	n = &node{addr: "m", opts: &options{guardWindow: 10 * time.Second, keyTTLs: newKeyTTLs()}}
	n.observe(st("b", time.Second, true, r(rec("X", "a0", 5, ""))), now)
	n.mu.Lock()
	n.inspected(st("b", 2*time.Second, true, r(rec("X", "a0", 6, "b"))), now)
	n.mu.Unlock()
	if n.trusted(now) {
		t.Error("a doubt marked by another client must be adopted")
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

// A new connection to a master already known by its run_id says nothing new:
// it has not restarted, so a longer TTL granted since the first sight does
// not put it back under the guard. (Pools open connections at any time.)
func TestSameRunIDIsNotGuardedAgain(t *testing.T) {
	c := &Client{quorum: 1, opts: options{guardWindow: 3 * time.Second, keyTTLs: newKeyTTLs()}}
	n := &node{addr: "m", opts: &c.opts}
	c.nodes = []*node{n}
	now := time.Now()
	obs(n, "a", 0, false, now) // first sight of a young master: guarded 3 s
	later := now.Add(3 * time.Second)
	if !n.trusted(later) {
		t.Fatal("guard outlived the window")
	}
	c.noteTTL([]string{"k"}, 60*time.Second, true, 0).settle(0)
	obs(n, "a", 3*time.Second, false, later)
	if _, g := n.guardFor(later, []string{"k"}); g {
		t.Fatal("a second connection to the same run made the master guarded again")
	}
	obs(n, "b", 0, false, later)
	if _, g := n.guardFor(now.Add(59*time.Second), []string{"k"}); !g { // the TTL was written at now
		t.Fatal("a real restart must still be guarded on the key for the TTL granted")
	}
}
