package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// multiKeyStack is three masters and a client of them; seed sets keys on
// them, master by master ("" leaves a key absent there).
type multiKeyStack struct {
	t  *testing.T
	ms []*redistest.Server
	c  *Client
}

func newMultiKeyStack(t *testing.T) *multiKeyStack {
	ms := redistest.StartN(t, 3)
	c, err := New(redistest.Addrs(ms), WithRestartGuard(0), WithMarkDown(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.Probe(ctx)
	return &multiKeyStack{t: t, ms: ms, c: c}
}

func (s *multiKeyStack) seed(key string, values ...string) {
	for i, v := range values {
		mc := s.ms[i].Client()
		if v == "" {
			mc.Del(context.Background(), key)
		} else {
			mc.Set(context.Background(), key, v, 10*time.Second)
		}
		mc.Close()
	}
}

// on is what key holds on each master, comma-separated.
func (s *multiKeyStack) on(key string) string {
	var out []string
	for _, m := range s.ms {
		mc := m.Client()
		v, _ := mc.Get(context.Background(), key).Result()
		mc.Close()
		out = append(out, v)
	}
	return strings.Join(out, ",")
}

// A holder's Reacquire sets its keys to the new value on each master
// where every one of them holds one of its values, and nowhere else;
// decided on the quorum. (The answers that come after the decision are
// not counted: the results are checked only as far as the quorum's.)
func TestReacquire(t *testing.T) {
	s := newMultiKeyStack(t)
	ctx := context.Background()
	s.seed("a", "tok-1", "tok-1", "tok-1")
	s.seed("b", "tok-1", "tok-0", "other")
	r, ok, err := s.c.Reacquire(ctx, []string{"a", "b"}, "tok-2", 30*time.Second, Holder{Prefix: "tok"})
	if !ok || err != nil || r.Extended != 2 {
		t.Fatalf("prefix: %+v %v %v", r, ok, err)
	}
	if a, b := s.on("a"), s.on("b"); a != "tok-2,tok-2,tok-1" || b != "tok-2,tok-2,other" {
		t.Fatalf("after the prefix's Reacquire: a %s, b %s", a, b)
	}
	// Exact: tok-2 only; b absent on master 0 and held by another on 2.
	s.seed("b", "", "tok-2", "other")
	r, ok, err = s.c.Reacquire(ctx, []string{"a", "b"}, "tok-2", 30*time.Second, Holder{Prefix: "tok-2", Exact: true})
	if ok || err != nil || r.Extended > 1 {
		t.Fatalf("exact, on one master: %+v %v %v", r, ok, err)
	}
}

// ReleaseEvery deletes the keys on a master only where every one holds
// the value: a master that holds one of them keeps it.
func TestReleaseEvery(t *testing.T) {
	s := newMultiKeyStack(t)
	ctx := context.Background()
	s.seed("a", "v", "v", "v")
	s.seed("b", "v", "v", "")
	r, err := s.c.ReleaseEvery(ctx, []string{"a", "b"}, "v")
	if err != nil || !r.Released(2) {
		t.Fatalf("release: %+v %v", r, err)
	}
	if a, b := s.on("a"), s.on("b"); a != ",,v" || b != ",," {
		t.Fatalf("after the release: a %s, b %s", a, b)
	}
	r, err = s.c.ReleaseEvery(ctx, []string{"a", "b"}, "v")
	if err != nil || r.Released(2) || r.Absent < 2 {
		t.Fatalf("release again: %+v %v", r, err)
	}
}
