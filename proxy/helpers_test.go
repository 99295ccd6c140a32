package proxy_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

type env struct {
	t       *testing.T
	masters []*redistest.Server
	srv     *proxy.Server
	addr    string
	c       *redis.Client
	logs    *logBuf // the proxy's log lines (warnings and above)
}

// testConfig is the tests' proxy configuration in front of masters: a
// free port, the restart guard off, a node timeout of 200 ms.
func testConfig(masters []string) proxy.Config {
	cfg := proxy.DefaultConfig()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Redlock.Masters = masters
	cfg.Redlock.RestartGuard = false
	cfg.Redlock.NodeTimeout = proxy.Duration{Duration: 200 * time.Millisecond}
	return cfg
}

// newEnv starts n real masters and an in-process proxy in front of them,
// with the restart guard off unless mutate turns it on.
func newEnv(t *testing.T, n int, mutate func(*proxy.Config)) *env {
	t.Helper()
	e := &env{t: t, masters: redistest.StartN(t, n)}
	cfg := testConfig(redistest.Addrs(e.masters))
	if mutate != nil {
		mutate(&cfg)
	}
	e.startProxy(cfg)
	return e
}

func (e *env) startProxy(cfg proxy.Config) {
	t := e.t
	t.Helper()
	e.logs = &logBuf{}
	srv, err := proxy.New(cfg, zerolog.New(zerolog.MultiLevelWriter(e.logs, zerolog.NewTestWriter(t))).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	a, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	e.srv, e.addr = srv, a.String()
	e.c = e.client()
	t.Cleanup(func() { _ = e.c.Close() })
}

// ownBackend starts a Redis of the application's own and returns its
// address, for proxy.backend: the passthrough backend is then not a master.
func ownBackend(t *testing.T) string { return redistest.Start(t).Addr }

// client returns a go-redis client of the proxy, as an application has.
func (e *env) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: e.addr, MaxRetries: -1, ReadTimeout: 5 * time.Second})
}

// key returns a key unique to the test.
func (e *env) key(suffix string) string {
	return strings.ReplaceAll(e.t.Name(), "/", "_") + ":" + suffix
}

// do runs a raw command through the proxy.
func (e *env) do(args ...any) (any, error) {
	return e.c.Do(context.Background(), args...).Result()
}

// onMasters returns the value of key on each master ("" if absent).
func (e *env) onMasters(key string) []string {
	out := make([]string, len(e.masters))
	for i, m := range e.masters {
		c := m.Client()
		v, err := c.Get(context.Background(), key).Result()
		if err != nil && err != redis.Nil {
			v = "<" + err.Error() + ">"
		}
		out[i] = v
		c.Close()
	}
	return out
}

// seed sets key=val with a TTL directly on the masters at idx.
func (e *env) seed(key, val string, ttl time.Duration, idx ...int) {
	for _, i := range idx {
		c := e.masters[i].Client()
		if err := c.Set(context.Background(), key, val, ttl).Err(); err != nil {
			e.t.Fatal(err)
		}
		c.Close()
	}
}

// userKeys counts the keys a master holds, leaving out the proxy's own
// (engine.FenceStatePrefix: the dataset record, the clients' settings).
func userKeys(t *testing.T, m *redistest.Server) int {
	t.Helper()
	c := m.Client()
	defer c.Close()
	keys, err := c.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if !strings.HasPrefix(k, engine.FenceStatePrefix) {
			n++
		}
	}
	return n
}

func count(vals []string, v string) int {
	n := 0
	for _, x := range vals {
		if x == v {
			n++
		}
	}
	return n
}

func mustEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// eventually polls cond for up to two seconds: the proxy answers as soon as
// a quorum decides, and the other masters finish a moment later.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after 2s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logBuf collects a proxy's log lines, safe for its goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
