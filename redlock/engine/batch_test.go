package engine

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// Concurrent operations share pipelines: fewer round trips reach each
// master than there were commands, and every operation still gets its own
// answer.
func TestConcurrentOperationsShareMasterPipelines(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c, err := New([]string{ms[0].Addr, ms[1].Addr, ms[2].Addr}, WithRestartGuard(0), WithNodeTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k := fmt.Sprintf("k%d", i%100) // three goroutines per key: one wins
			l, err := c.Acquire(ctx, k, fmt.Sprint(i), time.Minute)
			if err != nil {
				if err != ErrHeld && err != ErrSplitVote {
					errs <- fmt.Errorf("acquire %s: %w", k, err)
				}
				return
			}
			if r, err := c.Release(ctx, k, l.Value); err != nil || !r.Released(c.Quorum()) {
				errs <- fmt.Errorf("release %s by its holder: %+v %v", k, r, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, nd := range c.nodes {
		p, cmds := nd.batch.pipelines.Load(), nd.batch.commands.Load()
		t.Logf("%s: %d commands in %d pipelines", nd.addr, cmds, p)
		if cmds < n || p >= cmds {
			t.Errorf("%s: %d commands in %d pipelines: not batched", nd.addr, cmds, p)
		}
	}
	for i := 0; i < 100; i++ {
		for _, m := range ms {
			cl := m.Client()
			if v, _ := cl.Exists(ctx, fmt.Sprintf("k%d", i)).Result(); v != 0 {
				t.Errorf("k%d left behind on %s", i, m.Addr)
			}
			cl.Close()
		}
	}
}

// A master that lost its scripts (SCRIPT FLUSH, or a restart) is sent the
// script's text again, in the same operation.
func TestScriptFlushedOnAMaster(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c, err := New([]string{ms[0].Addr, ms[1].Addr, ms[2].Addr}, WithRestartGuard(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for round := 0; round < 2; round++ {
		l, err := c.Acquire(ctx, "k", "v", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := c.Release(ctx, "k", l.Value); err != nil || !r.Released(c.Quorum()) {
			t.Fatalf("round %d: release %+v %v", round, r, err)
		}
		// The script ran on every master, the late one included.
		deadline := time.Now().Add(2 * time.Second)
		for _, m := range ms {
			cl := m.Client()
			for cl.Exists(ctx, "k").Val() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("round %d: k left on %s", round, m.Addr)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cl.Close()
		}
		for _, m := range ms {
			cl := m.Client()
			if err := cl.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			cl.Close()
		}
	}
}

// A stalled master's queue fills up; operations do not wait for room in it
// (which would hold them for a node timeout per batch ahead of them): the
// command that finds it full fails at once, and the other masters decide.
func TestFullQueueDoesNotHoldOperations(t *testing.T) {
	ms := redistest.StartN(t, 3)
	// Long, so that only waiting on the stalled master, not a loaded
	// machine, takes an acquire that long (3 s was reached by 102 of 1000
	// acquires once, on two CPUs shared with two other test suites).
	const nodeTimeout = 10 * time.Second
	c, err := New([]string{ms[0].Addr, ms[1].Addr, ms[2].Addr}, WithRestartGuard(0), WithNodeTimeout(nodeTimeout),
		WithMarkDown(0, 0), WithRetry(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Only the master that stalls gets a small queue: the healthy ones
	// never refuse, so every acquire has their two votes at once and waits
	// for the stalled one only if its queue holds it.
	stalled := c.nodes[2]
	stalled.batch.close()
	stalled.batch = newBatcher(stalled, c.opts.pipelines, 100)
	ctx := context.Background()
	c.Probe(ctx)
	ms[2].Stop()
	defer ms[2].Cont()
	const n = 1000 // more than the stalled master's queue holds
	var wg sync.WaitGroup
	slow := make(chan time.Duration, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start := time.Now()
			_, _ = c.Acquire(ctx, fmt.Sprintf("q%d", i), "v", time.Minute)
			if d := time.Since(start); d >= nodeTimeout {
				slow <- d
			}
		}(i)
	}
	wg.Wait()
	close(slow)
	if k := len(slow); k > 0 {
		t.Fatalf("%d of %d acquires waited a node timeout (%v) or more for the stalled master's queue", k, n, nodeTimeout)
	}
}

// A new client's first operation waits for its masters' first
// connections, as a go-redis client's first command waits for its dial:
// here a dial takes 70 ms and the first reply on a connection 40 ms more,
// each within the node timeout of 100 ms but not together, and the first
// acquire is granted all the same, with Probe before it or without.
// Opening each connection within the operation's deadline instead
// (dial_inline), neither the first acquire nor any later one reaches a
// master in time.
func TestFirstOperationWaitsForTheConnections(t *testing.T) {
	ms := redistest.StartN(t, 3)
	slowDial := slowDialer()
	for _, tc := range []struct {
		name          string
		probe, inline bool
	}{{"probe", true, false}, {"no_probe", false, false}, {"no_probe/dial_inline", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New([]string{ms[0].Addr, ms[1].Addr, ms[2].Addr}, WithRestartGuard(0),
				WithNodeTimeout(100*time.Millisecond), WithRetry(0, 0), WithMarkDown(0, 0), slowDial)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.opts.dialInline = tc.inline
			ctx := context.Background()
			if tc.probe {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				n := c.Probe(pctx)
				cancel()
				if n != 3 {
					t.Fatalf("Probe reached %d masters", n)
				}
			}
			start := time.Now()
			_, err = c.Acquire(ctx, "first:"+tc.name, "t", time.Minute)
			took := time.Since(start)
			if !tc.inline {
				if err != nil {
					t.Fatalf("first acquire: %v", err)
				}
				t.Logf("first acquire granted after %v", took)
				return
			}
			if err == nil {
				t.Fatal("first acquire with the dial inside its deadline was granted: the test's dials are not slow enough to show anything")
			}
			var granted int
			for i := 0; i < 10; i++ {
				time.Sleep(100 * time.Millisecond)
				if _, err = c.Acquire(ctx, fmt.Sprintf("later%d:%s", i, tc.name), "t", time.Minute); err == nil {
					granted++
				}
			}
			if granted > 0 {
				t.Fatalf("with each dial inside an operation's deadline, %d later acquires were granted: the test shows nothing", granted)
			}
			t.Logf("dialling within each operation's deadline: neither the first nor any of 10 later acquires granted (%v)", err)
		})
	}
}

// A master that once answered and is reconnecting does not hold
// operations past their node timeout: only a client's first connection to
// a master is waited for. Master 2 takes 300 ms to connect to after its
// restart, master 0 holds the key for another token: the acquire needs
// master 2's vote, which cannot come within the node timeout of 100 ms,
// and is refused (waiting for the connection, it would be granted after
// 300 ms). The connection opened meanwhile, by its own timeout, serves a
// later acquire.
func TestReconnectKeepsTheNodeTimeout(t *testing.T) {
	ms := redistest.StartN(t, 3)
	var slow atomic.Bool
	dial := WithRedisOptions(func(i int, o *redis.Options) {
		if i != 2 {
			return
		}
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if slow.Load() {
				time.Sleep(300 * time.Millisecond)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	c, err := New([]string{ms[0].Addr, ms[1].Addr, ms[2].Addr}, WithRestartGuard(0),
		WithNodeTimeout(100*time.Millisecond), WithRetry(0, 0), WithMarkDown(0, 0), dial)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Acquire(ctx, "before", "t", time.Minute); err != nil {
		t.Fatalf("acquire before the restart: %v", err)
	}
	r0 := ms[0].Client()
	defer r0.Close()
	if err := r0.Set(ctx, "during", "other", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	slow.Store(true)
	ms[2].Kill()
	ms[2].Restart()
	// This one finds the old connection closed; the next waits on the new.
	_, _ = c.Acquire(ctx, "poke", "t", time.Minute)
	start := time.Now()
	l, err := c.Acquire(ctx, "during", "t", time.Minute)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("acquire needing master 2's vote while it reconnects: granted by %d votes after %v; its connection was waited for past the node timeout", l.Votes, took)
	}
	t.Logf("acquire needing master 2's vote while it reconnects: refused after %v (%v)", took, err)
	// The connection opened meanwhile carries a later acquire to master 2.
	rc := ms[2].Client()
	defer rc.Close()
	for i := 0; ; i++ {
		if i == 20 {
			t.Fatal("no acquire reached master 2 in 2 s after its restart")
		}
		time.Sleep(100 * time.Millisecond)
		k := fmt.Sprintf("after%d", i)
		if _, err := c.Acquire(ctx, k, "t", time.Minute); err != nil {
			continue
		}
		c.WaitWrites(ctx, k)
		if v, _ := rc.Get(ctx, k).Result(); v == "t" {
			t.Logf("acquire %d after the restart reached master 2", i)
			return
		}
	}
}

// A master that went down and takes longer to connect to than the node
// timeout (a 70 ms dial and a first reply 40 ms late, against 100 ms) is
// found back by the probes, which connect by the connect timeout. Probing
// within the node timeout (dial_inline), it stays marked down.
func TestSlowToConnectMasterComesBack(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("dial_inline=%v", inline), func(t *testing.T) {
			ms := redistest.StartN(t, 3)
			c, err := New([]string{ms[0].Addr, ms[1].Addr, ms[2].Addr}, WithRestartGuard(0),
				WithNodeTimeout(100*time.Millisecond), WithRetry(0, 0), WithMarkDown(1, 50*time.Millisecond), slowDialer())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.opts.dialInline = inline
			ctx := context.Background()
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if n := c.Probe(pctx); n != 3 {
				t.Fatalf("Probe reached %d masters", n)
			}
			ms[2].Kill()
			for i := 0; !c.Status()[2].Down; i++ {
				if i == 50 {
					t.Fatalf("the killed master is not marked down: %+v", c.Status()[2])
				}
				_, _ = c.Acquire(ctx, fmt.Sprintf("k%d", i), "t", time.Minute)
				time.Sleep(20 * time.Millisecond)
			}
			ms[2].Restart()
			start := time.Now()
			for c.Status()[2].Down && time.Since(start) < 3*time.Second {
				time.Sleep(20 * time.Millisecond)
			}
			down := c.Status()[2].Down
			switch {
			case inline && !down:
				t.Fatal("probing within the node timeout found the slow master back: the test shows nothing")
			case inline:
				t.Logf("probing within the node timeout: still down 3 s after the restart (%s)", c.Status()[2].LastError)
			case down:
				t.Fatalf("the restarted master is still marked down 3 s later (%s)", c.Status()[2].LastError)
			default:
				t.Logf("back %v after the restart", time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// slowDialer makes every connection to a master take 70 ms to dial and
// its first reply 40 ms more.
func slowDialer() Option {
	return WithRedisOptions(func(_ int, o *redis.Options) {
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			time.Sleep(70 * time.Millisecond)
			var d net.Dialer
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &slowFirstRead{Conn: nc}, nil
		}
	})
}

// slowFirstRead delays the first read on a connection by 40 ms.
type slowFirstRead struct {
	net.Conn
	read bool
}

func (c *slowFirstRead) Read(b []byte) (int, error) {
	if !c.read {
		c.read = true
		time.Sleep(40 * time.Millisecond)
	}
	return c.Conn.Read(b)
}

// A batch's commands run on the master in the order they were queued, also
// where a script is new to the master: a script's first use on a connection
// carries its text, so no command of the batch waits for a NOSCRIPT and a
// resend while the commands after it run. (With EVALSHA first, the GET
// below ran before the release it follows, and read the deleted value.)
func TestScriptsNewToAMasterKeepTheBatchOrder(t *testing.T) {
	m := redistest.Start(t)
	c, err := New([]string{m.Addr}, WithRestartGuard(0), WithNodeTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	cl := m.Client()
	defer cl.Close()
	w := &worker{b: c.nodes[0].batch}
	defer func() {
		if w.conn != nil {
			w.conn.close()
		}
	}()
	for round := 0; round < 2; round++ { // a new connection, then the same one
		if err := cl.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if err := cl.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var vals [2]any
		var errs [2]error
		deadline := time.Now().Add(2 * time.Second)
		calls := []*call{
			{script: releaseScript, keys: []string{"k"}, args: []any{"v"}, deadline: deadline},
			{args: []any{"get", "k"}, deadline: deadline},
		}
		for i, cc := range calls {
			i := i
			cc.done = func(r *redis.Cmd) { vals[i], errs[i] = r.Result() }
		}
		w.exec(calls)
		if vals[0] != int64(1) || errs[0] != nil {
			t.Fatalf("round %d: release: %v %v", round, vals[0], errs[0])
		}
		if errs[1] != redis.Nil {
			t.Fatalf("round %d: GET after the release in one batch: %v %v, want nil (the release ran first)", round, vals[1], errs[1])
		}
	}
}
