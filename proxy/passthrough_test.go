package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

func TestPassthroughCommands(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	k := e.key("n")
	mustEqual(t, "INCR", must(e.do("INCR", k)), any(int64(1)))
	mustEqual(t, "HSET", must(e.do("HSET", k+"h", "f", "v")), any(int64(1)))
	mustEqual(t, "HGET", must(e.do("HGET", k+"h", "f")), any("v"))
	mustEqual(t, "GET of a non-lock key", must(e.do("GET", k)), any("1"))
	_, err := e.do("HGET", k, "f")
	if err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("backend error not passed through: %v", err)
	}
	vals := e.onMasters(k)
	mustEqual(t, "on the backend only", vals[0]+"|"+vals[1]+"|"+vals[2], "1||")
	cmd := must(e.do("COMMAND", "COUNT")).(int64)
	if cmd < 100 {
		t.Fatalf("COMMAND COUNT %d", cmd)
	}
}

func TestProxyAnsweredCommands(t *testing.T) {
	e := newEnv(t, 3, nil)
	mustEqual(t, "PING", must(e.do("PING")), any("PONG"))
	mustEqual(t, "PING msg", must(e.do("PING", "hi")), any("hi"))
	mustEqual(t, "ECHO", must(e.do("ECHO", "x")), any("x"))
	mustEqual(t, "SELECT 0", must(e.do("SELECT", 0)), any("OK"))
	_, err := e.do("SELECT", 16)
	mustEqual(t, "SELECT 16", err.Error(), "ERR DB index is out of range")
	_, err = e.do("HELLO", 4)
	mustEqual(t, "HELLO 4", err.Error(), "NOPROTO unsupported protocol version")
	h3 := must(e.do("HELLO", 3)).(map[any]any)
	mustEqual(t, "HELLO 3 proto", h3["proto"], any(int64(3)))
	h := must(e.do("HELLO", 2)).([]any)
	mustEqual(t, "HELLO 2 proto", h[5], any(int64(2)))
	mustEqual(t, "CLIENT SETNAME", must(e.do("CLIENT", "SETNAME", "me")), any("OK"))
	mustEqual(t, "CLIENT GETNAME", must(e.do("CLIENT", "GETNAME")), any("me"))
	mustEqual(t, "CLIENT SETINFO", must(e.do("CLIENT", "SETINFO", "lib-name", "x")), any("OK"))
	if id := must(e.do("CLIENT", "ID")).(int64); id <= 0 {
		t.Fatalf("CLIENT ID %d", id)
	}
	info := must(e.do("INFO")).(string)
	for _, want := range []string{"redis_version:", "# Redlock", "quorum:2", "master0:state=up", "master2:state=up"} {
		if !strings.Contains(info, want) {
			t.Fatalf("INFO lacks %q:\n%s", want, info)
		}
	}
	// Each master's pipelines and their commands: the proxy's start sent
	// one PING down each.
	if !regexp.MustCompile(`master1:[^\r]*,pipelines=[1-9][0-9]*,commands=[1-9][0-9]*,`).MatchString(info) {
		t.Fatalf("INFO lacks master1's pipelines and commands:\n%s", info)
	}
	_, err = e.do("MONITOR")
	if err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("MONITOR: %v", err)
	}
}

// go-redis v9 starts with HELLO 3 (AUTH and SETNAME in it) and speaks RESP3.
func TestGoRedisDefaultHandshake(t *testing.T) {
	e := newEnv(t, 3, nil)
	c := redis.NewClient(&redis.Options{Addr: e.addr, ClientName: "app", MaxRetries: -1})
	defer c.Close()
	ok, err := c.SetNX(context.Background(), e.key("k"), "v", 5*time.Second).Result()
	if err != nil || !ok {
		t.Fatalf("SetNX through the proxy: %v %v", ok, err)
	}
	info, err := c.Do(context.Background(), "CLIENT", "INFO").Text()
	if err != nil || !strings.Contains(info, " name=app ") || !strings.Contains(info, " resp=3 ") {
		t.Fatalf("CLIENT INFO of go-redis's connection: %q %v", info, err)
	}
	// go-redis's INFO parser reads the proxy's INFO.
	m, err := c.InfoMap(context.Background(), "redlock").Result()
	if err != nil || m["Redlock"]["quorum"] != "2" || !strings.Contains(m["Redlock"]["settings"], "quorum=2") {
		t.Fatalf("go-redis InfoMap: %v %v", m, err)
	}
}

func TestMultiExecAndLockCommandsInside(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	ctx := context.Background()
	k := e.key("n")
	res, err := e.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, k)
		p.Incr(ctx, k)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "second INCR in MULTI", res[1].(*redis.IntCmd).Val(), int64(2))

	// A lock command inside MULTI is refused and EXEC aborts.
	conn := e.c.Conn()
	defer conn.Close()
	mustEqual(t, "MULTI", conn.Do(ctx, "MULTI").Val(), any("OK"))
	mustEqual(t, "queued", conn.Do(ctx, "INCR", k).Val(), any("QUEUED"))
	if err := conn.Do(ctx, "SET", "lock:"+k, "t", "NX", "PX", 1000).Err(); err == nil {
		t.Fatal("lock command inside MULTI was accepted")
	}
	err = conn.Do(ctx, "EXEC").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		t.Fatalf("EXEC: %v", err)
	}
	mustEqual(t, "INCR not applied", must(e.do("GET", k)), any("2"))
	mustEqual(t, "lock not taken", count(e.onMasters("lock:"+k), ""), 3)
}

func TestWatchIsPerClient(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	ctx := context.Background()
	k := e.key("w")
	err := e.c.Watch(ctx, func(tx *redis.Tx) error {
		// Another client changes the watched key: EXEC must fail.
		other := e.client()
		defer other.Close()
		other.Set(ctx, k, "changed", 0)
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k, "mine", 0)
			return nil
		})
		return err
	}, k)
	mustEqual(t, "WATCH conflict", err, error(redis.TxFailedErr))
	mustEqual(t, "value", must(e.do("GET", k)), any("changed"))
}

func TestBlockingCommandPinned(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	ctx := context.Background()
	k := e.key("list")
	done := make(chan []string, 1)
	go func() {
		c := e.client()
		defer c.Close()
		v, _ := c.BLPop(ctx, 5*time.Second, k).Result()
		done <- v
	}()
	time.Sleep(200 * time.Millisecond)
	// Other clients are not held up by the blocked one.
	mustEqual(t, "PING while blocked", must(e.do("PING")), any("PONG"))
	must(e.do("RPUSH", k, "x"))
	select {
	case v := <-done:
		if len(v) != 2 || v[1] != "x" {
			t.Fatalf("BLPOP got %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("BLPOP did not return")
	}
}

// A pipeline that mixes passthrough and lock commands gets its replies in
// request order; runs of passthrough commands go to the backend in one write.
func TestPipelineMixesPassthroughAndLockCommands(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	ctx := context.Background()
	n, lk := e.key("n"), "lock:"+e.key("l")
	p := e.c.Pipeline()
	var incrs []*redis.IntCmd
	for i := 0; i < 50; i++ {
		incrs = append(incrs, p.Incr(ctx, n))
	}
	acq := p.SetNX(ctx, lk, "tok", 10*time.Second)
	after := p.Incr(ctx, n)
	get := p.Get(ctx, lk)
	set := p.Set(ctx, n+"s", "v", 0)
	getS := p.Get(ctx, n+"s")
	bad := p.Do(ctx, "HGET", n, "f") // WRONGTYPE from the backend, in its place
	last := p.Incr(ctx, n)
	if _, err := p.Exec(ctx); err != nil && !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatal(err)
	}
	for i, c := range incrs {
		mustEqual(t, "INCR in order", c.Val(), int64(i+1))
	}
	mustEqual(t, "SET NX in the pipeline", acq.Val(), true)
	mustEqual(t, "INCR after the lock", after.Val(), int64(51))
	mustEqual(t, "GET of the lock", get.Val(), "tok")
	mustEqual(t, "SET passthrough", set.Val(), "OK")
	mustEqual(t, "GET passthrough", getS.Val(), "v")
	if bad.Err() == nil || !strings.HasPrefix(bad.Err().Error(), "WRONGTYPE") {
		t.Fatalf("error reply out of place: %v", bad.Err())
	}
	mustEqual(t, "last INCR", last.Val(), int64(52))
	eventually(t, "lock on every master", func() bool { return count(e.onMasters(lk), "tok") == 3 })
}

// A client that pipelines small commands gets a bigger input buffer, so
// that its whole pipeline (16 SETs, about 2 KB, sent in one write) reaches
// the backend as one batch, as it reaches Redis itself, instead of in
// 512-byte pieces that each cost a write to the backend and one to the
// client. Counted by the backend's total_reads_processed.
func TestPipelineOfSmallCommandsIsOneBatch(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	// Pipelines from about 1 to 3 KB: where the first read does not take
	// them whole, the tail is a short read that must not shrink the buffer.
	for _, size := range []int{1, 8, 20, 40, 100} {
		t.Run(fmt.Sprint(size), func(t *testing.T) { pipelineReads(t, e, size) })
	}
}

func pipelineReads(t *testing.T, e *env, size int) {
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	k, v := e.key("p"), strings.Repeat("v", size)
	var batch bytes.Buffer
	for i := 0; i < 16; i++ {
		fmt.Fprintf(&batch, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
	}
	round := func() {
		if _, err := nc.Write(batch.Bytes()); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 16; i++ {
			if line, err := br.ReadString('\n'); line != "+OK\r\n" || err != nil {
				t.Fatalf("reply %d: %q %v", i, line, err)
			}
		}
	}
	backend := e.masters[0].Client()
	defer backend.Close()
	reads := func() int {
		s, err := backend.Info(context.Background(), "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(s, "\r\n") {
			if v, ok := strings.CutPrefix(l, "total_reads_processed:"); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		t.Fatal("no total_reads_processed")
		return 0
	}
	for i := 0; i < 3; i++ {
		round() // the first ones grow the buffer
	}
	before := reads()
	const rounds = 20
	for i := 0; i < rounds; i++ {
		round()
	}
	// Each round is one read; the INFO above, and the proxy's health checks
	// of this master meanwhile, add a few. In 512-byte pieces it is 4 a round.
	got := reads() - before
	if got > rounds+rounds/2 {
		t.Fatalf("the backend read %d times for %d pipelines", got, rounds)
	}
	t.Logf("the backend read %d times for %d pipelines", got, rounds)
}

// Once a pipelining client runs, its plain GETs and SETs cost the proxy
// almost no allocations: the input buffer, the list of commands, their
// arguments' storage and the request on the shared backend connection are
// reused from batch to batch. (Counted for the whole test process, whose
// other activity in that time adds a little.)
func TestPassthroughSteadyStateAllocations(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	k := e.key("steady")
	var batch, want bytes.Buffer
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&batch, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(k), k, len(k), k)
		want.WriteString("+OK\r\n$1\r\nv\r\n")
	}
	got := make([]byte, want.Len())
	round := func() {
		if _, err := nc.Write(batch.Bytes()); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, got); err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("replies %q %v", got, err)
		}
	}
	for i := 0; i < 200; i++ {
		round()
	}
	const rounds = 2000
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 0; i < rounds; i++ {
		round()
	}
	runtime.ReadMemStats(&m1)
	per := float64(m1.Mallocs-m0.Mallocs) / (rounds * 16)
	t.Logf("%.4f allocations per command", per)
	if per > 0.05 {
		t.Fatalf("%.3f allocations per pipelined passthrough command", per)
	}
}

// Counts and lengths written with a leading zero ("$03") are refused as
// Redis refuses them, with the same reply, after the commands before them.
// (The proxy passes plain commands on as the client wrote them: one that
// reached Redis so would close the backend connection other clients share.)
func TestLeadingZeroLengthsRefusedAsByRedis(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	k := e.key("zeros")
	answer := func(addr, in string) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(in)); err != nil {
			t.Fatal(err)
		}
		return readUntilClosed(t, c)
	}
	for _, in := range []string{
		"*1\r\n$04\r\nPING\r\n",
		"*01\r\n$4\r\nPING\r\n",
		fmt.Sprintf("*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n*3\r\n$03\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n", len(k), k, len(k), k),
		fmt.Sprintf("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$00\r\n\r\n", len(k), k),
	} {
		redis, proxied := answer(e.masters[0].Addr, in), answer(e.addr, in)
		if proxied != redis || !strings.Contains(redis, "Protocol error") {
			t.Errorf("input %q: the proxy answered %q, Redis %q", in, proxied, redis)
		}
	}
	if n, err := e.c.Exists(context.Background(), k).Result(); err != nil || n != 0 {
		t.Fatalf("the refused SETs wrote the key: %d, %v", n, err)
	}
}

// A transaction whose backend connection fails is aborted, never run in
// pieces: when MULTI finds the backend down, the commands a client
// pipelined after it are refused (on one connection to Redis they would
// have been queued and run together) and EXEC answers EXECABORT; so when
// the connection fails while commands are queued. Before, the commands
// after a failed MULTI ran one by one, outside any transaction.
func TestTransactionAbortedWithItsConnection(t *testing.T) {
	be := redistest.Start(t)
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Proxy.Backend = be.Addr
		c.Proxy.PassthroughTimeout = proxy.Duration{Duration: time.Second}
	})
	p := dialRESP(t, e.addr)
	defer p.close()
	be.Kill()
	got := p.pipeline(t, []string{"MULTI"}, []string{"SET", "tx", "1"}, []string{"INCR", "tx"}, []string{"EXEC"},
		[]string{"EXEC"}, []string{"PING"})
	for i, want := range []string{"-ERR redlock-proxy: passthrough backend", "-ERR redlock-proxy: passthrough backend failed",
		"-ERR redlock-proxy: passthrough backend failed", "-EXECABORT", "-ERR EXEC without MULTI", "+PONG"} {
		if !strings.HasPrefix(got[i], want) {
			t.Fatalf("reply %d: %q, want %q…", i, got[i], want)
		}
	}
	be.Restart()
	mustEqual(t, "MULTI with the backend back", p.do(t, "MULTI"), "+OK\r\n")
	mustEqual(t, "queued", p.do(t, "SET", "tx", "2"), "+QUEUED\r\n")
	be.Kill()
	if r := p.do(t, "INCR", "tx"); !strings.HasPrefix(r, "-ERR redlock-proxy: passthrough backend failed") {
		t.Fatalf("INCR queued after the connection failed: %q", r)
	}
	mustEqual(t, "EXEC", p.do(t, "EXEC")[:len("-EXECABORT")], "-EXECABORT")
	mustEqual(t, "DISCARD after EXEC", p.do(t, "DISCARD"), "-ERR DISCARD without MULTI\r\n")
	be.Restart()
	mustEqual(t, "MULTI, DISCARD", p.do(t, "MULTI")+p.do(t, "DISCARD"), "+OK\r\n+OK\r\n")
	c := be.Client()
	defer c.Close()
	if n, _ := c.Exists(context.Background(), "tx").Result(); n != 0 {
		t.Fatalf("a command of an aborted transaction ran: tx exists")
	}
}

// A command whose pooled backend connection fails (the backend closed it:
// a restart, CLIENT KILL) is answered with the bare error: the client had
// no WATCH or open MULTI on that connection, and the WATCH/MULTI wording of
// a failed pinned connection would mislead it. Once the pool's closed
// connections are spent, commands run on new ones.
func TestPooledConnectionFailureWording(t *testing.T) {
	// A voting backend: EXPIRE of a data key goes through the pool.
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	ctx := context.Background()
	p := dialRESP(t, e.addr)
	defer p.close()
	mc := e.masters[0].Client()
	defer mc.Close()
	mustEqual(t, "SET", p.do(t, "SET", "data:k", "v"), "+OK\r\n")
	for try := 1; ; try++ {
		mustEqual(t, "PERSIST", p.do(t, "PERSIST", "data:k"), ":0\r\n")
		if err := mc.ClientKillByFilter(ctx, "TYPE", "normal").Err(); err != nil {
			t.Fatal(err)
		}
		got := p.do(t, "EXPIRE", "data:k", "100")
		if got == ":1\r\n" {
			// The pool found the connection closed before handing it out
			// (it checks one idle for a second): nothing to see; again.
			if try == 5 {
				t.Fatal("5 tries: the pool never handed out the closed connection")
			}
			mustEqual(t, "PERSIST after EXPIRE", p.do(t, "PERSIST", "data:k"), ":1\r\n")
			continue
		}
		mustEqual(t, "EXPIRE on the closed pooled connection", got, "-"+errBackendFailedText+"\r\n")
		break
	}
	// Each connection of the pool the kill closed answers one command so;
	// then the pool dials anew.
	for i := 0; ; i++ {
		got := p.do(t, "EXPIRE", "data:k", "100")
		if got == ":1\r\n" {
			break
		}
		mustEqual(t, "EXPIRE again, on another closed pooled connection", got, "-"+errBackendFailedText+"\r\n")
		if i == 300 {
			t.Fatal("300 EXPIREs after the kill all failed")
		}
	}
}

const errBackendFailedText = "ERR redlock-proxy: passthrough backend failed"
