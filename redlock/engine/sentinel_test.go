package engine

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

func TestParseSentinelAddr(t *testing.T) {
	good := []struct {
		in   string
		want SentinelAddr
	}{
		{"sentinel://h1:26379/locks-a", SentinelAddr{Sentinels: []string{"h1:26379"}, Name: "locks-a"}},
		{"sentinel://h1:26379,10.0.0.2:26380,[::1]:26379/locks-a", SentinelAddr{Sentinels: []string{"h1:26379", "10.0.0.2:26380", "[::1]:26379"}, Name: "locks-a"}},
		{"sentinel://user:p%40ss@h1:26379/x", SentinelAddr{Sentinels: []string{"h1:26379"}, Name: "x", Username: "user", Password: "p@ss"}},
		{"sentinel://:secret@h1:26379/x", SentinelAddr{Sentinels: []string{"h1:26379"}, Name: "x", Password: "secret"}},
	}
	for _, g := range good {
		got, err := ParseSentinelAddr(g.in)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(g.want) {
			t.Errorf("ParseSentinelAddr(%q) = %+v, %v; want %+v", g.in, got, err, g.want)
		}
	}
	bad := map[string]string{
		"sentinel://h1:26379":              "name is missing",
		"sentinel://h1:26379/":             "name is missing",
		"sentinel:///locks":                "no sentinel",
		"sentinel://h1/locks":              "not host:port",
		"sentinel://h1:0/locks":            "no valid port",
		"sentinel://h1:26379,/locks":       "not host:port",
		"sentinel://h1:1,h1:1/locks":       "listed twice",
		"sentinel://h1:1/a/b":              "not a group name",
		"sentinel://user@h1:1/a":           "need a password",
		"sentinel://user:s3cret%zz@h1:1/a": "escape",
	}
	for in, want := range bad {
		_, err := ParseSentinelAddr(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSentinelAddr(%q) = %v, want an error saying %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if _, err := New([]string{"sentinel://h1:1/a/b"}); err == nil {
		t.Error("New accepted a malformed Sentinel group")
	}
	if got := Redact("sentinel://u:secret@h1:1,h2:2/a"); got != "sentinel://u:xxxxx@h1:1,h2:2/a" {
		t.Errorf("Redact = %q", got)
	}
}

// dialLog dials for the client (WithRedisOptions' Dialer, which a Sentinel
// group's dialer calls with the primary's address) and counts, per address,
// the connections open and the writes made.
type dialLog struct {
	mu     sync.Mutex
	open   map[string]int
	writes map[string]int
}

func newDialLog() *dialLog { return &dialLog{open: map[string]int{}, writes: map[string]int{}} }

func (d *dialLog) option() Option {
	return WithRedisOptions(func(_ int, o *redis.Options) { o.Dialer = d.dial })
}

func (d *dialLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.open[addr]++
	d.mu.Unlock()
	return &loggedConn{Conn: nc, d: d, addr: addr}, nil
}

func (d *dialLog) get(addr string) (open, writes int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.open[addr], d.writes[addr]
}

type loggedConn struct {
	net.Conn
	d    *dialLog
	addr string
	once sync.Once
}

func (c *loggedConn) Write(b []byte) (int, error) {
	c.d.mu.Lock()
	c.d.writes[c.addr]++
	c.d.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *loggedConn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		c.d.open[c.addr]--
		c.d.mu.Unlock()
	})
	return c.Conn.Close()
}

// sentinelClient is a client of one master given as g's Sentinel group,
// its quorum 1: a lock is granted only where the primary it reaches takes
// it.
func sentinelClient(t *testing.T, g *redistest.SentinelGroup, logs *syncLog, opts ...Option) *Client {
	t.Helper()
	opts = append([]Option{WithRestartGuard(500 * time.Millisecond), WithRetry(0, 0), WithLogf(logs.logf)}, opts...)
	c, err := New([]string{g.URL()}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// syncLog collects a client's log lines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) logf(f string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, f+"\n", args...)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// grant acquires a new key until one is granted, and returns it.
func grant(t *testing.T, c *Client, what string) string {
	t.Helper()
	var key string
	i := 0
	waitFor(t, 20*time.Second, what, func() bool {
		i++
		key = fmt.Sprintf("%s-%d", strings.ReplaceAll(what, " ", "-"), i)
		l, err := c.Acquire(context.Background(), key, "tok", time.Minute)
		return err == nil && l != nil
	})
	return key
}

func holds(s *redistest.Server, key string) bool {
	rc := s.Client()
	defer rc.Close()
	v, _ := rc.Get(context.Background(), key).Result()
	return v == "tok"
}

func sentinelOf(t *testing.T, c *Client) SentinelStatus {
	t.Helper()
	st := c.Status()[0]
	if st.Sentinel == nil {
		t.Fatal("a master given as a Sentinel group has no Sentinel status")
	}
	return *st.Sentinel
}

func TestSentinelFollowsFailover(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinels(t, "locks-a")
	d := newDialLog()
	var logs syncLog
	c := sentinelClient(t, g, &logs, d.option())
	first := g.Servers[0]
	if k := grant(t, c, "before"); !holds(first, k) {
		t.Fatalf("lock %s granted, not on the primary %s", k, first.Addr)
	}
	if st := c.Status()[0]; st.Addr != g.URL() || st.Sentinel.Primary != first.Addr || st.Sentinel.Name != "locks-a" || !st.Sentinel.Reachable || st.Sentinel.Switches != 0 {
		t.Fatalf("status before the failover: %+v %+v", st, st.Sentinel)
	}
	old, next := g.Failover()
	waitFor(t, 20*time.Second, "the client follows the failover", func() bool {
		s := sentinelOf(t, c)
		return s.Primary == next.Addr && s.Switches == 1
	})
	// Every connection to the old primary is closed: the pipeline's,
	// the probe pool's.
	waitFor(t, 5*time.Second, "the connections to the old primary are closed", func() bool {
		open, _ := d.get(old.Addr)
		return open == 0
	})
	_, wrote := d.get(old.Addr)
	k := grant(t, c, "after")
	if !holds(next, k) {
		t.Fatalf("lock %s granted after the failover, not on the new primary %s", k, next.Addr)
	}
	for i := range 20 {
		key := fmt.Sprintf("more-%d", i)
		if _, err := c.Acquire(context.Background(), key, "tok", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Release(context.Background(), key, "tok"); err != nil {
			t.Fatal(err)
		}
	}
	if open, w := d.get(old.Addr); open != 0 || w != wrote {
		t.Fatalf("after the switch the client opened %d connection(s) to the old primary and wrote %d more times to it", open, w-wrote)
	}
	if !strings.Contains(logs.String(), "moved from "+old.Addr+" to "+next.Addr) {
		t.Fatalf("the switch is not logged:\n%s", logs.String())
	}
	// Sentinels that learn of the switch later than its announcement do
	// not move the client back and forth: a few rounds of questions on,
	// it has switched once.
	time.Sleep(3 * time.Second)
	if s := sentinelOf(t, c); s.Primary != next.Addr || s.Switches != 1 {
		t.Fatalf("after a few rounds of questions: %+v\n%s", s, logs.String())
	}
}

func TestSentinelFollowsKilledPrimary(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinels(t, "locks-b")
	var logs syncLog
	c := sentinelClient(t, g, &logs)
	grant(t, c, "before")
	old := g.KillPrimary()
	next := g.WaitPrimary(old)
	k := grant(t, c, "after")
	if !holds(next, k) {
		t.Fatalf("lock %s granted after the failover, not on the new primary %s", k, next.Addr)
	}
	if s := sentinelOf(t, c); s.Primary != next.Addr || s.Switches != 1 {
		t.Fatalf("status after the failover: %+v", s)
	}
}

func TestSentinelsUnreachableKeepTheLastPrimary(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinels(t, "locks-c")
	var logs syncLog
	c := sentinelClient(t, g, &logs, WithClockCheck(200*time.Millisecond, time.Second))
	grant(t, c, "before")
	for _, s := range g.Sentinels {
		s.Kill()
	}
	waitFor(t, 10*time.Second, "the status says the sentinels are unreachable", func() bool {
		s := sentinelOf(t, c)
		return !s.Reachable && !s.UnreachableSince.IsZero() && s.Answered == 0 && s.LastError != ""
	})
	s := sentinelOf(t, c)
	if s.Primary != g.Servers[0].Addr || s.Switches != 0 {
		t.Fatalf("the last primary is not kept: %+v", s)
	}
	if k := grant(t, c, "without sentinels"); !holds(g.Servers[0], k) {
		t.Fatalf("lock %s not on the last known primary", k)
	}
	if !strings.Contains(logs.String(), "keeping the last primary they named, "+g.Servers[0].Addr) {
		t.Fatalf("not logged:\n%s", logs.String())
	}
}
