package proxy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// A pub/sub step: commands sent in one write on one of the connections of
// a scenario: "sub" and "sub2" (clients of the server under test), "pub"
// (another client of it) and "direct" (a client of the backend itself, which
// for the plain Redis is the same server).
type psStep struct {
	conn string
	cmds []string
}

// resp encodes commands written as space-separated words.
func resp(cmds ...string) []byte {
	var b []byte
	for _, c := range cmds {
		w := strings.Fields(c)
		b = fmt.Appendf(b, "*%d\r\n", len(w))
		for _, a := range w {
			b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	return b
}

// quietRead reads what arrives on c until nothing more comes for quiet.
func quietRead(t *testing.T, c net.Conn, quiet time.Duration) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(quiet))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return out
		}
		if err != nil {
			return append(out, "<closed>"...)
		}
	}
}

// readN reads n bytes from c, or what came within 5 s.
func readN(c net.Conn, n int) []byte {
	buf := make([]byte, n)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	k, err := io.ReadFull(c, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return buf[:k]
	}
	if err != nil {
		return append(buf[:k], "<closed>"...)
	}
	return buf
}

// Pub/sub through the proxy answers byte for byte what a plain Redis
// answers to the same steps: confirmations, messages in publish order from
// a client of the proxy and from a client of the backend, PING, refused
// commands, (un)subscribing down to zero, RESET and QUIT while subscribed,
// and lock commands served on the quorum again after the last UNSUBSCRIBE.
func TestPubSubLikeRedis(t *testing.T) {
	e := newEnv(t, 3, nil)
	plain := redistest.Start(t)
	k := e.key("lock")
	scenarios := map[string][]psStep{
		"subscribe, publish both ways, unsubscribe": {
			{"sub", []string{"SUBSCRIBE news:a news:b", "PSUBSCRIBE news:*", "SSUBSCRIBE shard:1"}},
			{"pub", []string{"PUBLISH news:a one", "PUBLISH news:b two", "SPUBLISH shard:1 three", "PUBLISH news:b " + strings.Repeat("z", 5000)}},
			{"direct", []string{"PUBLISH news:a four", "PUBLISH other five"}},
			{"sub", []string{"PING", "PING hello", "GET x", "PUBLISH news:a x", "HELLO 3", "SUBSCRIBE"}},
			{"pub", []string{"PUBSUB CHANNELS news:a*", "PUBSUB NUMSUB news:a news:c", "PUBSUB NUMPAT", "PUBSUB SHARDCHANNELS"}},
			{"sub", []string{"UNSUBSCRIBE news:a", "UNSUBSCRIBE", "PUNSUBSCRIBE", "GET x", "SUNSUBSCRIBE", "PING"}},
			{"sub", []string{"SET " + k + " t NX PX 10000", "GET " + k, "PING"}},
		},
		"pipelined lock operations, then subscribed": {
			{"sub", []string{"SET " + k + ":1 t NX PX 10000", "SET " + k + ":2 t NX PX 10000", "SET " + k + ":1 u NX PX 10000",
				"SUBSCRIBE ch", "PING", "SET " + k + ":3 t NX PX 10000", "UNSUBSCRIBE", "GET " + k + ":1", "DEL " + k + ":1 " + k + ":2", "PING"}},
		},
		"not subscribed": {
			{"sub", []string{"UNSUBSCRIBE", "UNSUBSCRIBE a b", "PUNSUBSCRIBE", "PUNSUBSCRIBE p*", "SUNSUBSCRIBE", "SUNSUBSCRIBE s", "SUBSCRIBE", "PING"}},
		},
		"reset while subscribed": {
			{"sub", []string{"SUBSCRIBE c1", "PSUBSCRIBE c*", "RESET", "GET x", "PING"}},
			{"pub", []string{"PUBLISH c1 gone"}},
			{"sub", []string{"PING"}},
		},
		"quit while subscribed": {
			{"sub", []string{"SUBSCRIBE q1", "QUIT", "PING"}},
		},
		"two subscribers": {
			{"sub", []string{"SUBSCRIBE room"}},
			{"sub2", []string{"PSUBSCRIBE ro*"}},
			{"pub", []string{"PUBLISH room 1", "PUBLISH room 2", "PUBLISH room 3"}},
			{"sub2", []string{"PUNSUBSCRIBE ro*"}},
			{"pub", []string{"PUBLISH room 4"}},
		},
	}
	for name, steps := range scenarios {
		t.Run(name, func(t *testing.T) { comparePubSub(t, e, plain.Addr, "", steps) })
	}
	// The lock taken after the last UNSUBSCRIBE is on the quorum; those
	// released after one are gone from every master, and the SET refused
	// while subscribed took nothing.
	if on := e.onMasters(k); count(on, "t") != 3 {
		t.Fatalf("the lock after unsubscribing is on %v", on)
	}
	for _, i := range []string{":1", ":2", ":3"} {
		if on := e.onMasters(k + i); count(on, "") != 3 {
			t.Fatalf("%s after the release is on %v", k+i, on)
		}
	}
}

// Keyspace notifications reach a subscriber of the proxy.
func TestKeyspaceNotifications(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	if err := e.masters[0].Client().ConfigSet(t.Context(), "notify-keyspace-events", "KEA").Err(); err != nil {
		t.Fatal(err)
	}
	sub := e.client().Subscribe(t.Context())
	defer sub.Close()
	if err := sub.PSubscribe(t.Context(), "__keyspace@0__:"+e.key("*")); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Receive(t.Context()); err != nil {
		t.Fatal(err)
	}
	ch := sub.Channel()
	must(e.do("SET", e.key("plain"), "v"))
	select {
	case m := <-ch:
		if m.Channel != "__keyspace@0__:"+e.key("plain") || m.Payload != "set" {
			t.Fatalf("notification %+v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no keyspace notification")
	}
}

// A subscriber that disconnects, or is killed mid-stream, leaves no
// subscription on the backend and no goroutine in the proxy.
func TestSubscriberGoneLeavesNothing(t *testing.T) {
	e := newEnv(t, 3, nil)
	backend := e.masters[0].Client()
	numsub := func() int64 {
		v, err := backend.PubSubNumSub(t.Context(), "stream").Result()
		if err != nil {
			t.Fatal(err)
		}
		return v["stream"]
	}
	before := runtime.NumGoroutine()
	var subs []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(resp("SUBSCRIBE stream")); err != nil {
			t.Fatal(err)
		}
		readN(c, len("*3\r\n$9\r\nsubscribe\r\n$6\r\nstream\r\n:1\r\n"))
		subs = append(subs, c)
	}
	mustEqual(t, "subscribers on the backend", numsub(), int64(20))
	// Mid-stream: messages flowing while half the subscribers go, some by
	// a reset connection.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = backend.Publish(t.Context(), "stream", strings.Repeat("x", 512)).Err()
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	for i, c := range subs {
		if i%2 == 0 {
			_ = c.(*net.TCPConn).SetLinger(0) // killed: RST
		}
		c.Close()
	}
	close(stop)
	eventually(t, "no subscription left on the backend", func() bool { return numsub() == 0 })
	eventually(t, "no goroutine left in the proxy", func() bool { return runtime.NumGoroutine() <= before+2 })
}

// A subscriber that stops reading while messages flood in is closed, and
// the proxy's memory does not follow the flood.
func TestSlowSubscriberBounded(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.WriteTimeout = proxy.Duration{Duration: time.Second} })
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := c.Write(resp("SUBSCRIBE flood")); err != nil {
		t.Fatal(err)
	}
	readN(c, len("*3\r\n$9\r\nsubscribe\r\n$5\r\nflood\r\n:1\r\n"))
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	pub := e.masters[0].Client()
	payload := strings.Repeat("m", 64<<10)
	var peak uint64
	deadline := time.Now().Add(20 * time.Second)
	published := 0
	for ; time.Now().Before(deadline); published++ {
		n, err := pub.Publish(t.Context(), "flood", payload).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break // the subscriber is gone
		}
		if published%64 == 0 {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
		}
	}
	t.Logf("published %d messages of 64 KB (%d MB) before the subscriber was dropped; proxy heap in use %d MB before, at most %d MB during",
		published, published>>4, m0.HeapInuse>>20, peak>>20)
	if published*len(payload) < 64<<20 && time.Now().Before(deadline) {
		// Dropped early is fine; the memory bound is what matters.
		t.Logf("dropped after %d MB", published>>4)
	}
	if !time.Now().Before(deadline) {
		t.Fatal("the subscriber that does not read was never dropped")
	}
	if peak > m0.HeapInuse+16<<20 {
		t.Fatalf("the proxy's heap grew from %d to %d MB under a flood to a subscriber that does not read", m0.HeapInuse>>20, peak>>20)
	}
	if s, err := e.do("PING"); err != nil || s != "PONG" {
		t.Fatalf("the proxy after the flood: %v %v", s, err)
	}
}

// SUBSCRIBE cannot be queued in MULTI through the proxy: the transaction
// is aborted, as for a lock command.
func TestSubscribeInMulti(t *testing.T) {
	e := newEnv(t, 3, nil)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(resp("MULTI", "SUBSCRIBE a", "EXEC", "PING")); err != nil {
		t.Fatal(err)
	}
	got := string(quietRead(t, c, 300*time.Millisecond))
	want := "+OK\r\n-ERR redlock-proxy: SUBSCRIBE cannot be queued in MULTI through the proxy; the transaction will be aborted\r\n-EXECABORT Transaction discarded because of previous errors.\r\n+PONG\r\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// comparePubSub runs steps against a plain Redis at plain and then against
// the proxy of e, and fails unless every connection of the proxy receives,
// at each step, the bytes the plain Redis sent. setup, when not empty, is a
// command each connection sends first, its reply not compared (HELLO 3).
func comparePubSub(t *testing.T, e *env, plain string, setup string, steps []psStep) {
	t.Helper()
	// The plain Redis first: what it answers at each step, read
	// until it is quiet.
	want := map[int][]byte{}
	conns := map[string]net.Conn{}
	dial := func(addr, who string) net.Conn {
		if c := conns[who]; c != nil {
			return c
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if setup != "" {
			if _, err := c.Write(resp(setup)); err != nil {
				t.Fatal(err)
			}
			quietRead(t, c, 150*time.Millisecond)
		}
		conns[who] = c
		return c
	}
	for i, st := range steps {
		c := dial(plain, st.conn)
		if _, err := c.Write(resp(st.cmds...)); err != nil {
			t.Fatal(err)
		}
		for who, c := range conns {
			if who != "pub" && who != "direct" || who == st.conn {
				want[i] = append(want[i], fmt.Sprintf("[%s]", who)...)
				want[i] = append(want[i], quietRead(t, c, 150*time.Millisecond)...)
			}
		}
	}
	// Then the proxy, reading as many bytes as the plain Redis
	// sent at each step.
	conns = map[string]net.Conn{}
	for i, st := range steps {
		addr := e.addr
		if st.conn == "direct" {
			addr = e.masters[0].Addr
		}
		c := dial(addr, st.conn)
		if _, err := c.Write(resp(st.cmds...)); err != nil {
			t.Fatal(err)
		}
		var got []byte
		parts := bytes.Split(want[i], []byte("["))
		for _, p := range parts[1:] {
			who, exp, _ := bytes.Cut(p, []byte("]"))
			got = append(got, fmt.Sprintf("[%s]", who)...)
			if bytes.HasSuffix(exp, []byte("<closed>")) {
				got = append(got, readN(conns[string(who)], len(exp)-len("<closed>"))...)
				if rest := quietRead(t, conns[string(who)], time.Second); string(rest) == "<closed>" {
					got = append(got, rest...)
				}
				continue
			}
			got = append(got, readN(conns[string(who)], len(exp))...)
		}
		if !bytes.Equal(got, want[i]) {
			t.Fatalf("step %d %v:\nproxy %q\nRedis %q", i, st.cmds, got, want[i])
		}
	}
	for who, c := range conns {
		if extra := quietRead(t, c, 100*time.Millisecond); len(extra) > 0 && string(extra) != "<closed>" {
			t.Fatalf("%s: the proxy sent more than Redis: %q", who, extra)
		}
	}
}

// Malformed input from a subscribed client: the replies owed before it
// (the subscription's confirmations) come first, then Redis's protocol
// error, then the close, byte for byte as from a plain Redis, in RESP2 and
// RESP3; the subscription is gone from the backend.
func TestSubscribedThenBadInput(t *testing.T) {
	e := newEnv(t, 3, nil)
	plain := redistest.Start(t)
	for _, hello := range []string{"", "HELLO 3"} {
		in := append(resp("SUBSCRIBE bad:a bad:b", "PING"), "*2\r\n$4\r\nPING\r\n$x\r\n"...)
		answer := func(addr string) string {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if hello != "" {
				if _, err := c.Write(resp(hello)); err != nil {
					t.Fatal(err)
				}
				quietRead(t, c, 150*time.Millisecond)
			}
			if _, err := c.Write(in); err != nil {
				t.Fatal(err)
			}
			return readUntilClosed(t, c)
		}
		redis, proxied := answer(plain.Addr), answer(e.addr)
		if proxied != redis || !strings.Contains(redis, "Protocol error") {
			t.Errorf("%q: the proxy answered %q, Redis %q", hello, proxied, redis)
		}
	}
	eventually(t, "no subscription left on the backend", func() bool {
		v, err := e.masters[0].Client().PubSubNumSub(t.Context(), "bad:a").Result()
		return err == nil && v["bad:a"] == 0
	})
}

// As on Redis, a subscribed client has no idle timeout: with
// proxy.idle_timeout set, a subscriber that sends PINGs, or nothing, stays
// connected well past it; once it unsubscribes, and for a tracking
// client's own connection (not a subscription), the timeout applies again.
func TestSubscriberHasNoIdleTimeout(t *testing.T) {
	idle := 300 * time.Millisecond
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.IdleTimeout = proxy.Duration{Duration: idle} })
	open := func(cmds ...string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write(resp(cmds...)); err != nil {
			t.Fatal(err)
		}
		quietRead(t, c, 100*time.Millisecond)
		return c
	}
	// alive waits for the reply's first bytes or the close however slow the
	// machine (a closed connection's read ends at once), then reads the rest.
	alive := func(c net.Conn) bool {
		if _, err := c.Write(resp("PING")); err != nil {
			return false
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n == 0 || err != nil {
			return false
		}
		got := quietRead(t, c, 50*time.Millisecond)
		return !strings.HasSuffix(string(got), "<closed>")
	}
	pinging, quiet := open("SUBSCRIBE ch"), open("SUBSCRIBE ch")
	unsubscribed := open("SUBSCRIBE ch", "UNSUBSCRIBE ch")
	tracking := open("HELLO 3", "CLIENT TRACKING ON")
	for range 8 { // 4 idle timeouts
		time.Sleep(idle / 2)
		if !alive(pinging) {
			t.Fatal("a subscriber sending PINGs was closed")
		}
	}
	if !alive(quiet) {
		t.Fatal("a quiet subscriber was closed")
	}
	if alive(unsubscribed) {
		t.Fatal("a client that unsubscribed was not closed when idle")
	}
	if alive(tracking) {
		t.Fatal("a tracking client (not subscribed) was not closed when idle")
	}
}
