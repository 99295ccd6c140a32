package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// A grant made for a waiting client that left is undone by one hold: a
// reentrant grant of a token that another connection holds leaves that
// connection's hold. (Giving back every hold freed the lock under it.)
func TestUndoGrantGivesBackOneHold(t *testing.T) {
	s := serverOnMasters(t, nil)
	ctx := context.Background()
	held, err := s.rl.AcquireFenced(ctx, "k", "t", 10*time.Second, true) // another connection holds it
	if err != nil {
		t.Fatal(err)
	}
	left, err := s.rl.AcquireFenced(ctx, "k", "t", 10*time.Second, true) // the waiter's grant
	if err != nil || left.Grant.Holds != 2 {
		t.Fatalf("reentry: %+v %v", left.Grant, err)
	}
	s.undoGrant(s.op(nil), "k", left.Grant)
	info, err := s.rl.InfoFenced(ctx, "k")
	if err != nil || info.Token == nil || *info.Token != "t" || info.Holds != 1 {
		t.Fatalf("after the undo: %+v %v; want t still holding, 1 hold (held with fence %d)", info, err, held.Grant.Fence)
	}
}

// serverOnMasters is a Server, not listening, in front of three new
// masters, with mutate's changes to the default config; closed at the
// test's end.
func serverOnMasters(t *testing.T, mutate func(*Config)) *Server {
	t.Helper()
	ms := redistest.StartN(t, 3)
	cfg := DefaultConfig()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Redlock.Masters = redistest.Addrs(ms)
	cfg.Redlock.RestartGuard = false
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
