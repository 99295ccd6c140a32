package engine

import (
	"context"
	"fmt"
	"net"
	"sync"
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

// Probe opens each master's pipeline connection: the first lock operation
// after it does not spend its node timeout on a dial and a handshake. Here
// a dial takes 70 ms and the first reply on a connection 40 ms more, each
// within the node timeout of 100 ms, but not together: without Probe the
// first acquire reaches no master in time. The connection is opened on by
// its own timeout, so that a later acquire finds it open; opened within the
// operation's deadline instead (dial_inline), it never is.
func TestProbeWarmsThePipelines(t *testing.T) {
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
			_, err = c.Acquire(ctx, "first:"+tc.name, "t", time.Minute)
			if tc.probe {
				if err != nil {
					t.Fatalf("first acquire after Probe: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("first acquire without Probe was granted: the test's dials are not slow enough to show anything")
			}
			// The dials go on; the connections they open are kept.
			var granted int
			for i := 0; i < 10; i++ {
				time.Sleep(100 * time.Millisecond)
				if _, err = c.Acquire(ctx, fmt.Sprintf("later%d:%s", i, tc.name), "t", time.Minute); err == nil {
					granted++
				}
			}
			switch {
			case tc.inline && granted > 0:
				t.Fatalf("with each dial inside an operation's deadline, %d later acquires were granted: the test shows nothing", granted)
			case tc.inline:
				t.Logf("dialling within each operation's deadline: none of 10 later acquires granted (%v)", err)
			case granted == 0:
				t.Fatalf("none of 10 later acquires granted; the connections opened after the first should serve them (%v)", err)
			default:
				t.Logf("%d of 10 later acquires granted", granted)
			}
		})
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
