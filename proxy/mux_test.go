package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// Plain passthrough commands of many clients share a few backend
// connections, and every client still gets its own replies, in order.
func TestPassthroughSharesBackendConnections(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	ctx := context.Background()
	be := e.masters[0].Client() // the passthrough backend
	defer be.Close()
	before := backendClients(t, be)

	const clients, rounds = 40, 200
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := redis.NewClient(&redis.Options{Addr: e.addr, PoolSize: 1, Protocol: 2, DisableIdentity: true})
			defer c.Close()
			k := fmt.Sprintf("%s:%d", e.key("k"), i)
			for r := 0; r < rounds; r++ {
				want := fmt.Sprintf("%d-%d", i, r)
				if err := c.Set(ctx, k, want, 0).Err(); err != nil {
					errs <- err
					return
				}
				// A pipelined pair, as one batch.
				p := c.Pipeline()
				g := p.Get(ctx, k)
				n := p.Incr(ctx, k+":n")
				if _, err := p.Exec(ctx); err != nil {
					errs <- err
					return
				}
				if g.Val() != want || n.Val() != int64(r+1) {
					errs <- fmt.Errorf("client %d round %d: GET %q INCR %d", i, r, g.Val(), n.Val())
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := backendClients(t, be) - before; got > 4 {
		t.Errorf("%d connections to the backend for %d clients: not shared", got, clients)
	}
}

// A shared connection that fails fails only the commands on it; the next
// commands dial a new one.
func TestPassthroughSharedConnectionFails(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	ctx := context.Background()
	be := e.masters[0].Client()
	defer be.Close()
	mustEqual(t, "SET", must(e.do("SET", e.key("a"), "1")), any("OK"))
	// Close every connection the proxy has to the backend.
	if err := be.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := 0; i < 10; i++ {
		v, err := e.do("GET", e.key("a"))
		switch {
		case err != nil && strings.Contains(err.Error(), "passthrough backend failed"):
			failed++
		case err != nil || v != "1":
			t.Fatalf("GET after the backend dropped the proxy: %v %v", v, err)
		}
	}
	if failed > 2 {
		t.Fatalf("%d of 10 GETs failed after one broken connection: the proxy did not reconnect", failed)
	}
}

func backendClients(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "connected_clients:"); ok {
			fmt.Sscan(v, &n)
		}
	}
	return n
}

// A backend that closes idle clients (Redis's timeout setting) does not
// fail the first passthrough commands after a pause: shared and pooled
// backend connections it closed are replaced before they are used.
func TestPassthroughAfterBackendClosedIdleConnections(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	ctx := context.Background()
	be := e.masters[0].Client()
	defer be.Close()
	if err := be.ConfigSet(ctx, "timeout", "1").Err(); err != nil {
		t.Fatal(err)
	}
	k := e.key("n")
	long := func() error { // more commands than a shared connection takes: a pooled one
		_, err := e.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < 40; i++ {
				p.Incr(ctx, k)
			}
			return nil
		})
		return err
	}
	for round := 0; round < 2; round++ {
		if err := long(); err != nil {
			t.Errorf("round %d: 40 pipelined INCRs: %v", round, err)
		}
		for i := 0; i < 4; i++ { // on the shared connection
			if err := e.c.Incr(ctx, k).Err(); err != nil {
				t.Errorf("round %d: INCR: %v", round, err)
			}
		}
		if round == 0 {
			// The backend closes clients idle for more than a second.
			time.Sleep(2500 * time.Millisecond)
		}
	}
}
