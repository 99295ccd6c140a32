package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// pipeline sends cmds on one connection in one write and returns the
// replies, in order.
func pipeline(t *testing.T, c *redis.Client, cmds ...[]any) []*redis.Cmd {
	t.Helper()
	p := c.Pipeline()
	out := make([]*redis.Cmd, len(cmds))
	for i, args := range cmds {
		out[i] = p.Do(context.Background(), args...)
	}
	_, _ = p.Exec(context.Background())
	return out
}

// Lock operations pipelined on one connection run together: with every
// master 40 ms away, forty SET NX of different keys run one after another
// would reach each master in forty writes, one per round trip; run
// together they reach it in a few batches. Each is granted, on a quorum.
func TestPipelinedLockOperationsRunTogether(t *testing.T) {
	var relays []*redistest.Relay
	e := newEnv(t, 3, func(c *proxy.Config) {
		for i, m := range c.Redlock.Masters {
			r := redistest.NewRelay(t, m)
			relays = append(relays, r)
			c.Redlock.Masters[i] = r.Addr()
		}
	})
	mustEqual(t, "warm", must(e.do("SET", e.key("warm"), "w", "NX", "PX", 1000)), any("OK"))
	for _, r := range relays {
		r.Delay.Store(int64(40 * time.Millisecond))
	}
	var cmds [][]any
	for i := 0; i < 40; i++ {
		cmds = append(cmds, []any{"SET", e.key(fmt.Sprint(i)), "t", "NX", "PX", 10000})
	}
	var before []int64
	for _, r := range relays {
		before = append(before, r.Chunks.Load())
	}
	ran := pipelinedOps(t, e)
	start := time.Now()
	replies := pipeline(t, e.c, cmds...)
	t.Logf("40 pipelined SET NX with the masters 40 ms away: %v", time.Since(start).Round(time.Millisecond))
	for i, r := range replies {
		if v, err := r.Result(); v != "OK" {
			t.Fatalf("SET NX %d: %v %v", i, v, err)
		}
	}
	for i, r := range relays {
		// The clock check and the data evidence write now and then too;
		// forty writes would be the operations one by one.
		if n := r.Chunks.Load() - before[i]; n > 10 {
			t.Errorf("master %d: the forty operations reached it in %d writes: they ran one after another", i, n)
		}
	}
	// INFO counts them among the operations run together with others of
	// their connection (the first may have run alone, were it read alone).
	if n := pipelinedOps(t, e) - ran; n < 39 {
		t.Errorf("INFO pipelined_lock_operations grew by %d for forty pipelined SET NX", n)
	}
	for _, r := range relays {
		r.Delay.Store(0)
	}
	for i := 0; i < 40; i++ {
		if n := count(e.onMasters(e.key(fmt.Sprint(i))), "t"); n < 2 {
			t.Fatalf("key %d held on %d masters", i, n)
		}
	}
}

// pipelinedOps reads INFO's count of the lock operations run together with
// others of their connection.
func pipelinedOps(t *testing.T, e *env) int64 {
	t.Helper()
	info := must(e.do("INFO", "redlock")).(string)
	_, rest, ok := strings.Cut(info, "pipelined_lock_operations:")
	if !ok {
		t.Fatalf("INFO redlock has no pipelined_lock_operations:\n%s", info)
	}
	v, _, _ := strings.Cut(rest, "\r\n")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("pipelined_lock_operations:%s: %v", v, err)
	}
	return n
}

// A client that multiplexes loops on one connection, as ioredis does:
// each loop sends SET NX, and on its reply the unlock script, while the
// others' requests are in flight, so the connection's operations start
// and finish continually. Every reply reaches the loop it belongs to (a
// reply out of order would answer a SET with 1 or an unlock with OK), and
// nothing is left held.
func TestPipelinedStreamOnOneConnection(t *testing.T) {
	e := newEnv(t, 3, nil)
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var (
		mu      sync.Mutex
		waiting []chan string
	)
	send := func(cmd string) chan string {
		ch := make(chan string, 1)
		mu.Lock()
		defer mu.Unlock()
		waiting = append(waiting, ch)
		if _, err := nc.Write([]byte(cmd)); err != nil {
			ch <- err.Error()
		}
		return ch
	}
	go func() { // the reader hands each reply to the oldest request
		rd := bufio.NewReader(nc)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(line, "$") && line != "$-1\r\n" {
				n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
				b := make([]byte, n+2)
				if _, err := io.ReadFull(rd, b); err != nil {
					return
				}
				line += string(b)
			}
			mu.Lock()
			ch := waiting[0]
			waiting = waiting[1:]
			mu.Unlock()
			ch <- strings.TrimSpace(line)
		}
	}()
	unlock := unlockSpellings[0]
	const loops, pairs = 20, 150
	errs := make(chan error, loops)
	for l := 0; l < loops; l++ {
		go func() {
			key := e.key(fmt.Sprint("loop", l))
			for i := 0; i < pairs; i++ {
				tok := fmt.Sprint("t", i)
				if r := <-send(fmt.Sprintf("SET %s %s NX PX 10000\r\n", key, tok)); r != "+OK" {
					errs <- fmt.Errorf("loop %d pair %d: SET NX answered %q", l, i, r)
					return
				}
				cmd := fmt.Sprintf("*5\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n1\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n",
					len(unlock), unlock, len(key), key, len(tok), tok)
				if r := <-send(cmd); r != ":1" {
					errs <- fmt.Errorf("loop %d pair %d: unlock answered %q", l, i, r)
					return
				}
			}
			errs <- nil
		}()
	}
	for l := 0; l < loops; l++ {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the loops did not finish in a minute")
		}
	}
	for l := 0; l < loops; l++ {
		if on := e.onMasters(e.key(fmt.Sprint("loop", l))); count(on, "") != 3 {
			t.Fatalf("loop %d: its key is left on the masters: %q", l, on)
		}
	}
}

// Replies come back in the order of the requests, and the effects of
// pipelined operations on one key come in that order too, with passthrough
// commands in between kept in their places.
func TestPipelinedLockOperationsInOrder(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	k, n := "lock:"+e.key("k"), "lock:"+e.key("n")
	r := pipeline(t, e.c,
		[]any{"SET", k, "t1", "NX", "PX", 10000},
		[]any{"EVAL", unlockSpellings[0], 1, k, "t1"},
		[]any{"SET", k, "t2", "NX", "PX", 10000},
		[]any{"GET", k},
		[]any{"PTTL", k},
		[]any{"INCR", e.key("counter")}, // passthrough, between lock operations
		[]any{"SET", k, "t3", "NX", "PX", 10000},
		[]any{"LOCK.ACQUIRE", n, 10000, "TOKEN", "a"},
		[]any{"CLIENT", "SETNAME", "x"}, // connection state: after those in flight
		[]any{"LOCK.RELEASE", n, "a"},
		[]any{"EXISTS", k, n},
		[]any{"PING"},
	)
	want := []string{"OK", "1", "OK", "t2", "ttl", "1", "nil", "grant", "OK", "1", "1", "PONG"}
	for i, c := range r {
		v, err := c.Result()
		got := fmt.Sprint(v)
		switch {
		case want[i] == "nil" && err == redis.Nil:
		case want[i] == "ttl" && err == nil && v.(int64) > 9000:
		case want[i] == "grant" && err == nil && len(v.([]any)) == 3:
		case err == nil && got == want[i]:
		default:
			t.Errorf("reply %d (%v): %v %v, want %s", i, c.Args(), v, err, want[i])
		}
	}
}

// Pipelined SET NX of one key, each with its own token, grant it once.
func TestPipelinedSameKeyGrantedOnce(t *testing.T) {
	e := newEnv(t, 3, nil)
	var cmds [][]any
	for i := 0; i < 20; i++ {
		cmds = append(cmds, []any{"SET", e.key("k"), fmt.Sprint("t", i), "NX", "PX", 10000})
	}
	granted := 0
	for _, c := range pipeline(t, e.c, cmds...) {
		if v, _ := c.Result(); v == "OK" {
			granted++
		}
	}
	mustEqual(t, "grants", granted, 1)
	mustEqual(t, "the first is the holder", must(e.do("GET", e.key("k"))), any("t0"))
}

// A client may have at most proxy.max_inflight operations running: a
// longer pipeline runs in groups of that many, every reply in order.
func TestPipelinedBeyondMaxInflight(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.MaxInflight = 4 })
	var cmds [][]any
	for i := 0; i < 30; i++ {
		cmds = append(cmds, []any{"SET", e.key(fmt.Sprint(i)), fmt.Sprint("t", i), "NX", "PX", 10000},
			[]any{"GET", e.key(fmt.Sprint(i))})
	}
	r := pipeline(t, e.c, cmds...)
	for i := 0; i < 30; i++ {
		if v, _ := r[2*i].Result(); v != "OK" {
			t.Fatalf("SET NX %d: %v", i, v)
		}
		if v, _ := r[2*i+1].Result(); v != fmt.Sprint("t", i) {
			t.Fatalf("GET %d: %v", i, v)
		}
	}
}

// A client that leaves with lock operations in flight: each still
// completes, or is taken back on every master where it is refused;
// nothing of a refused one is left behind.
func TestPipelinedOperationsOfAClientThatLeft(t *testing.T) {
	e := newEnv(t, 3, nil)
	for i := 0; i < 20; i += 2 { // the even keys are held elsewhere on two masters: refused
		e.seed(e.key(fmt.Sprint(i)), "other", 10*time.Second, 0, 1)
	}
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	var req []byte
	for i := 0; i < 20; i++ {
		req = fmt.Appendf(req, "SET %s mine NX PX 10000\r\n", e.key(fmt.Sprint(i)))
	}
	if _, err := nc.Write(req); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	eventually(t, "every operation settled", func() bool {
		for i := 0; i < 20; i++ {
			on := e.onMasters(e.key(fmt.Sprint(i)))
			if i%2 == 0 && count(on, "mine") != 0 || i%2 == 1 && count(on, "mine") != 3 {
				return false
			}
		}
		return true
	})
}

// Malformed input after pipelined lock operations: their replies come
// first, then the protocol error, then the close, as on Redis.
func TestPipelinedThenBadInput(t *testing.T) {
	e := newEnv(t, 3, nil)
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var req []byte
	for i := 0; i < 5; i++ {
		req = fmt.Appendf(req, "SET %s t NX PX 10000\r\n", e.key(fmt.Sprint(i)))
	}
	req = append(req, "*1\r\n$x\r\n"...)
	if _, err := nc.Write(req); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	all, _ := io.ReadAll(nc)
	want := strings.Repeat("+OK\r\n", 5) + "-ERR Protocol error"
	if !strings.HasPrefix(string(all), want) {
		t.Fatalf("got %q, want the five replies, then the protocol error", all)
	}
}

// Pipelining × a late master × rollback. One master answers late (its
// commands cross a relay that holds each chunk; under that load it times
// out now and then and is marked down for a moment, as a slow master is).
// A connection's pipelined operations on one key still answer in order and
// as on one Redis, grants stand on a quorum, and what a refused SET NX took
// on the late master is taken back there: rollbacks are retried until they
// land, after the SET they undo (per-master FIFO).
func TestPipelinedWithALateMaster(t *testing.T) {
	var late *redistest.Relay
	e := newEnv(t, 3, func(c *proxy.Config) {
		late = redistest.NewRelay(t, c.Redlock.Masters[2])
		c.Redlock.Masters[2] = late.Addr()
	})
	mustEqual(t, "warm", must(e.do("SET", e.key("warm"), "w", "NX", "PX", 1000)), any("OK"))
	late.Delay.Store(int64(60 * time.Millisecond)) // each way, each chunk; node timeout 200 ms
	k := e.key("k")
	e.seed(k, "other", 10*time.Second, 0, 1) // held elsewhere on a quorum
	r := pipeline(t, e.c,
		[]any{"SET", k, "t1", "NX", "PX", 10000},
		[]any{"SET", k, "t2", "NX", "PX", 10000},
	)
	for i, c := range r {
		if _, err := c.Result(); err != redis.Nil {
			t.Fatalf("SET NX %d of a key held elsewhere: %v, want nil", i, err)
		}
	}
	settled := func(what string, ok func(on []string) bool) {
		t.Helper()
		deadline := time.Now().Add(8 * time.Second)
		for !ok(e.onMasters(k)) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: masters hold %v", what, e.onMasters(k))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	settled("what the refused SETs took is taken back", func(on []string) bool {
		return count(on, "t1") == 0 && count(on, "t2") == 0
	})
	must(e.masters[0].Client().Del(context.Background(), k).Result())
	must(e.masters[1].Client().Del(context.Background(), k).Result())
	r = pipeline(t, e.c,
		[]any{"SET", k, "a", "NX", "PX", 10000},
		[]any{"EVAL", unlockSpellings[0], 1, k, "a"},
		[]any{"SET", k, "b", "NX", "PX", 10000},
		[]any{"GET", k},
	)
	want := []string{"OK", "1", "OK", "b"}
	for i, c := range r {
		if v, err := c.Result(); err != nil || fmt.Sprint(v) != want[i] {
			t.Fatalf("reply %d (%v): %v %v, want %s", i, c.Args(), v, err, want[i])
		}
	}
	late.Delay.Store(0)
	settled("b held on a quorum", func(on []string) bool { return count(on, "b") >= 2 })
}
