package backend

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// TestSentinelBackendRefusesReplica: a backend connection that reaches a
// server answering as a replica (the sentinels' answer lagging behind a
// failover) is refused when it opens, where without the ROLE check it
// would serve the replica's reads; a pooled connection that answered
// READONLY goes back to no pool. The primary the sentinels name passes.
func TestSentinelBackendRefusesReplica(t *testing.T) {
	g := redistest.StartSentinels(t, "app-r")
	be, err := New(Options{Addr: g.URL(), Timeout: time.Second, PoolSize: 4, SentinelEvery: time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	sb := be.Sentinel()
	defer sb.Close()
	primary, replica := g.Servers[0], g.Servers[1]

	open := func(addr string) *Conn {
		nc, err := be.dialAddr(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return &Conn{home: be, NC: nc, R: bufio.NewReader(nc)}
	}
	// Without the check the replica serves reads: the unsafe outcome.
	raw := open(replica.Addr)
	defer raw.Close()
	if reply, err := raw.Do([][]byte{[]byte("GET"), []byte("nope")}, time.Second); err != nil || reply[0] == '-' {
		t.Fatalf("a read on the replica = %q, %v", reply, err)
	}
	// The check refuses it.
	if err := sb.checkPrimary(raw); err == nil || !strings.Contains(err.Error(), "answers ROLE slave") {
		t.Fatalf("checkPrimary of the replica = %v, want it refused", err)
	}
	// A write on it answers READONLY, and the connection is not pooled.
	reply, err := raw.Do([][]byte{[]byte("SET"), []byte("k"), []byte("v")}, time.Second)
	if err != nil || !strings.HasPrefix(string(reply), "-READONLY") || !raw.readonly {
		t.Fatalf("SET on the replica = %q, %v (readonly %v)", reply, err, raw.readonly)
	}
	be.Put(raw)
	if len(be.idle) != 0 {
		t.Fatal("a connection that answered READONLY went back to the pool")
	}
	// A dial goes to the primary, which passes.
	bc, err := be.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if got := bc.NC.RemoteAddr().String(); got != primary.Addr {
		t.Fatalf("the backend dialled %s, not the primary %s", got, primary.Addr)
	}
	if err := sb.checkPrimary(bc); err != nil {
		t.Fatalf("checkPrimary of the primary: %v", err)
	}
}
