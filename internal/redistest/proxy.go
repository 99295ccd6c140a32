package redistest

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Proxy is a redlock-proxy process running from a configuration file the
// test wrote; it is killed when the test ends.
type Proxy struct {
	Addr   string // where it listens for clients
	Config string // the configuration file

	t         testing.TB
	bin       string
	stderr    io.Writer
	fileLimit int
	env       []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// ProxyOption adjusts how StartProxy runs the binary.
type ProxyOption func(*Proxy)

// WithProxyLog sends the proxy's log lines to the test's log.
func WithProxyLog() ProxyOption {
	return func(p *Proxy) { p.stderr = testLog{p.t} }
}

// WithStderr sends the proxy's log lines to w.
func WithStderr(w io.Writer) ProxyOption { return func(p *Proxy) { p.stderr = w } }

// WithFileLimit runs the proxy with its open-file limit raised to n (or as
// far as the hard limit allows).
func WithFileLimit(n int) ProxyOption { return func(p *Proxy) { p.fileLimit = n } }

// WithEnv adds environment variables ("NAME=value") to the proxy's, which
// are otherwise the test process's own.
func WithEnv(kv ...string) ProxyOption { return func(p *Proxy) { p.env = append(p.env, kv...) } }

// StartProxy picks a free port, writes the configuration that config makes
// for that listen address, runs the binary bin with it and returns once the
// proxy answers PING. Its log goes to the test process's stderr unless an
// option says otherwise.
func StartProxy(t testing.TB, bin string, config func(listen string) string, opts ...ProxyOption) *Proxy {
	t.Helper()
	p := &Proxy{t: t, bin: bin, stderr: os.Stderr, Addr: fmt.Sprintf("127.0.0.1:%d", FreePort(t))}
	for _, o := range opts {
		o(p)
	}
	p.Config = filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p.Config, []byte(config(p.Addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(p.Kill)
	return p
}

// ClientStack is three masters and the proxy binary in front of them, as
// the client-library suites use it.
type ClientStack struct {
	Masters []*Server
	Backend *Server // the application's Redis: proxy.backend
	Addr    string  // the proxy's
}

// StartClientStack starts three masters, a Redis of the application's own
// (proxy.backend, as scripts/run.sh deploys it) and the proxy binary bin in
// front of them: no restart guard (the masters are new), a 200 ms node
// timeout, warnings and errors in the test's log.
func StartClientStack(t testing.TB, bin string) *ClientStack {
	t.Helper()
	masters := StartN(t, 3)
	backend := Start(t)
	p := StartProxy(t, bin, func(listen string) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\nbackend = %q\n[redlock]\nmasters = [%s]\nrestart_guard = false\nnode_timeout = \"200ms\"\n[log]\nformat = \"json\"\nlevel = \"warn\"\n",
			listen, backend.Addr, Quote(Addrs(masters)))
	}, WithProxyLog())
	return &ClientStack{Masters: masters, Backend: backend, Addr: p.Addr}
}

// Values reads key on each master: its value ("" if absent) and PTTL in ms.
func (s *ClientStack) Values(key string) (values []string, pttls []int64) {
	for _, m := range s.Masters {
		c := m.Client()
		v, _ := c.Get(context.Background(), key).Result()
		d, _ := c.PTTL(context.Background(), key).Result()
		c.Close()
		values, pttls = append(values, v), append(pttls, d.Milliseconds())
	}
	return values, pttls
}

// Holders counts the masters on which key holds value.
func (s *ClientStack) Holders(key, value string) int {
	vs, _ := s.Values(key)
	n := 0
	for _, v := range vs {
		if v == value {
			n++
		}
	}
	return n
}

// Start runs the proxy (again, after Kill) and waits until it answers PING.
func (p *Proxy) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fileLimit > 0 {
		p.cmd = exec.Command("bash", "-c", fmt.Sprintf("ulimit -n %d 2>/dev/null || ulimit -n $(ulimit -Hn); exec \"$0\" -config \"$1\"", p.fileLimit), p.bin, p.Config)
	} else {
		p.cmd = exec.Command(p.bin, "-config", p.Config)
	}
	p.cmd.Stderr = p.stderr
	dieWithTest(p.cmd)
	if len(p.env) > 0 {
		p.cmd.Env = append(os.Environ(), p.env...)
	}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			p.t.Fatal("the proxy did not answer PING within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill ends the proxy with SIGKILL, as a crash would.
func (p *Proxy) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// Restart kills the proxy and starts it again on the same port, as a
// supervisor would after a crash.
func (p *Proxy) Restart() { p.Kill(); p.Start() }

// Pid is the proxy's process id (with WithFileLimit, bash execs into it).
func (p *Proxy) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Client returns a go-redis client of the proxy.
func (p *Proxy) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: p.Addr, MaxRetries: -1, Protocol: 2}
	for _, f := range opts {
		f(o)
	}
	return redis.NewClient(o)
}

// testLog writes each line to the test's log.
type testLog struct{ t testing.TB }

func (w testLog) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.t.Log("proxy: " + l)
	}
	return len(b), nil
}

// Quote joins addresses as the elements of a TOML array of strings.
func Quote(addrs []string) string {
	q := make([]string, len(addrs))
	for i, a := range addrs {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, ", ")
}
