package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// NewFromClients reaches each master with its client's options: a password
// and a database the masters' addresses alone do not give. Without the
// password the same masters refuse every vote. WithRedisOptions sees the
// client's options, and the caller's clients stay open after Close.
func TestNewFromClients(t *testing.T) {
	t.Parallel()
	ms := redistest.StartN(t, 3)
	ctx := context.Background()
	for _, s := range ms {
		rc := s.Client()
		err := rc.ConfigSet(ctx, "requirepass", "s3cret").Err()
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	clients := func(pass string) []redis.UniversalClient {
		var out []redis.UniversalClient
		for _, s := range ms {
			rc := redis.NewClient(&redis.Options{Addr: s.Addr, Password: pass, DB: 3})
			t.Cleanup(func() { rc.Close() })
			out = append(out, rc)
		}
		return out
	}

	// The control: the same masters, clients without the password.
	c, err := NewFromClients(clients(""), WithRestartGuard(0), WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.Obtain(ctx, "from:clients", 5*time.Second); m != nil || err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("obtain through clients without the password: %v, want the masters' NOAUTH", err)
	}
	c.Close()

	rcs := clients("s3cret")
	var mu sync.Mutex
	seen := map[int]string{}
	c, err = NewFromClients(rcs, WithRestartGuard(0), WithNodeTimeout(time.Second),
		WithRedisOptions(func(i int, o *redis.Options) {
			mu.Lock()
			defer mu.Unlock()
			seen[i] = o.Password
		}))
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Obtain(ctx, "from:clients", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, rc := range rcs {
		if v, err := rc.Get(ctx, "from:clients").Result(); err != nil || v != m.Token() {
			t.Errorf("master %d, database 3: %q %v, want the token %q", i, v, err, m.Token())
		}
	}
	mu.Lock()
	if len(seen) != 3 || seen[0] != "s3cret" || seen[2] != "s3cret" {
		t.Errorf("WithRedisOptions saw passwords %v, want the clients' own", seen)
	}
	mu.Unlock()
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for i, rc := range rcs {
		if err := rc.Ping(ctx).Err(); err != nil {
			t.Errorf("client %d after Close: %v, want it still open", i, err)
		}
	}
}

// A master may be a Redis Cluster, given by its cluster client: the lock
// lands on the shard that owns the key.
func TestNewFromClientsCluster(t *testing.T) {
	t.Parallel()
	ms := redistest.StartN(t, 2)
	cl := redistest.StartCluster(t, 3, 0)
	cc := cl.Client()
	defer cc.Close()
	clients := []redis.UniversalClient{ms[0].Client(), ms[1].Client(), cc}
	defer clients[0].Close()
	defer clients[1].Close()
	c, err := NewFromClients(clients, WithRestartGuard(0), WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	// Two of the three masters can settle it alone; wait for the third.
	m, err := c.Obtain(ctx, "from:cluster", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	owner := cl.Owner("from:cluster").Client()
	defer owner.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := owner.Get(ctx, "from:cluster").Result()
		if err == nil && v == m.Token() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster's owner of the key holds %q %v, want the token", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Clients that do not name one master each are refused.
func TestNewFromClientsRefuses(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	defer failover.Close()
	unix := redis.NewClient(&redis.Options{Network: "unix", Addr: "/tmp/redis.sock"})
	defer unix.Close()
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer plain.Close()
	for _, c := range []struct {
		client redis.UniversalClient
		want   string
	}{
		{ring, "*redis.Ring"},
		{failover, "sentinel://"},
		{unix, "over unix"},
		{nil, "nil"},
	} {
		_, err := NewFromClients([]redis.UniversalClient{plain, plain, c.client})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: %v, want an error naming %q", c.client, err, c.want)
		}
	}
	if _, err := NewFromClients(nil); err == nil {
		t.Error("no clients: no error")
	}
}

// Masters just created, persisting every write: without InitMasters the
// first Obtain is refused, with ErrNoQuorum naming the masters under the
// restart guard and the time left; once InitMasters declared them a new
// deployment, it is granted at once.
func TestInitMastersFirstObtain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, declared := range []bool{false, true} {
		ms := redistest.StartN(t, 3, redistest.Durable...)
		if declared {
			ic, err := New(redistest.Addrs(ms))
			if err != nil {
				t.Fatal(err)
			}
			if err := ic.InitMasters(ctx); err != nil {
				t.Fatal(err)
			}
			ic.Close()
		}
		c, err := New(redistest.Addrs(ms), WithNodeTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Obtain(ctx, "init:first", 5*time.Second)
		c.Close()
		if declared {
			if err != nil {
				t.Fatalf("first obtain on masters declared a new deployment: %v", err)
			}
			continue
		}
		var qe *QuorumError
		if m != nil || !errors.As(err, &qe) || !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("first obtain on masters just created, not declared: %v, want a *QuorumError", err)
		}
		// The acquire stops once a quorum is out of reach: two or three
		// masters are named, each for the window's remaining time.
		if len(qe.Guarded) < 2 || !strings.Contains(err.Error(), " masters are under the restart guard: ") ||
			!strings.Contains(err.Error(), "for another ") {
			t.Fatalf("%v: want the guarded masters named, with the time left", err)
		}
		for _, g := range qe.Guarded {
			if left := time.Until(g.Until); left <= 0 || left > time.Minute || g.Key != "" || g.Replica {
				t.Errorf("%+v: want the window, at most 60 s, on every key", g)
			}
		}
	}
}
