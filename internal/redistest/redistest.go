// Package redistest starts real redis-server processes for tests, on free
// loopback ports, and stops them when the test ends.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process.
type Server struct {
	Addr string
	Port int
	Dir  string // its data directory
	t    testing.TB
	args []string
	cmd  *exec.Cmd
	// exited is closed once cmd's process has exited and been waited for.
	exited chan struct{}
}

// Require fails the test when redis-server is missing and CI=true, and
// skips it otherwise.
func Require(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed; CI must install it (apt-get install redis-server)")
		}
		t.Skip("redis-server not installed")
	}
	return path
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start runs a redis-server with no persistence on a free port; extra
// arguments are passed as config directives ("--appendonly", "yes").
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	Require(t)
	s := &Server{t: t, Dir: t.TempDir()}
	t.Cleanup(s.Kill)
	// A port found free can be taken before the server binds it (by the
	// local end of a connection, or by another test's server): then the
	// server exits, or another answers in its place. Another port then.
	for try := 0; ; try++ {
		s.Port = FreePort(t)
		s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
		s.args = append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", s.Dir, "--protected-mode", "no"}, extra...)
		err := s.tryStart()
		if err == nil {
			return s
		}
		s.Kill()
		if try == 4 {
			t.Fatal(err)
		}
		t.Logf("%v; trying another port", err)
	}
}

// StartN starts n servers.
func StartN(t testing.TB, n int, extra ...string) []*Server {
	out := make([]*Server, n)
	for i := range out {
		out[i] = Start(t, extra...)
	}
	return out
}

// Addrs lists the servers' addresses.
func Addrs(ss []*Server) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Addr
	}
	return out
}

func (s *Server) start() {
	s.t.Helper()
	if err := s.tryStart(); err != nil {
		s.t.Fatal(err)
	}
}

// tryStart starts the process and waits until it answers PING as itself
// (its process_id): a server that exits (its port taken) or another
// process answering on its port is an error.
func (s *Server) tryStart() error {
	s.cmd = exec.Command("redis-server", s.args...)
	dieWithTest(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(s.cmd)
	c := s.Client()
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited at start", s.Addr)
		default:
		}
		if info, err := c.Info(context.Background(), "server").Result(); err == nil {
			if !strings.Contains(info, "process_id:"+strconv.Itoa(s.cmd.Process.Pid)+"\r\n") {
				return fmt.Errorf("another process answers on %s", s.Addr)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer", s.Addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Client returns a direct client of this server.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, Protocol: 2})
}

// Kill stops the server with SIGKILL and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart kills the server and starts a new one on the same port: empty,
// unless its arguments make it persist its data (Durable).
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// Wipe kills the server, empties its data directory (as an ephemeral
// volume would be) and starts it again with the same configuration.
func (s *Server) Wipe() {
	s.t.Helper()
	s.Kill()
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.Dir, e.Name())); err != nil {
			s.t.Fatal(err)
		}
	}
	s.start()
}

// Durable are the arguments of a master that persists every write.
var Durable = []string{"--appendonly", "yes", "--appendfsync", "always"}

// Stop freezes the server with SIGSTOP; Cont resumes it. Both do nothing
// to a server that is not running.
func (s *Server) Stop() { s.signal(syscall.SIGSTOP) }

// Cont resumes a stopped server.
func (s *Server) Cont() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// InfoField reads one field of an INFO section of the server ("" when it
// is not running, does not answer in a second, or has no such field).
func (s *Server) InfoField(section, field string) string {
	if s.cmd == nil {
		return ""
	}
	c := s.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// String names the server.
func (s *Server) String() string { return fmt.Sprintf("redis@%s", s.Addr) }

// BuildProxy builds the proxy binary into a temporary directory, for a
// TestMain; cleanup removes it. Build tags may be given: UnsafeGuardsTag
// builds the binary that tests use to switch safety guards off (the
// production binary has no such switch).
func BuildProxy(cmdDir string, tags ...string) (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "redlock-proxy-bin")
	if err != nil {
		return "", nil, err
	}
	path = dir + "/redlock-proxy"
	// Built in its own directory, so in its own module, whatever module
	// the test that asks is in: a test module with other dependencies
	// (compat/gozero) does not change the binary's.
	args := []string{"build", "-o", path}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	build := exec.Command("go", append(args, ".")...)
	build.Dir = cmdDir
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build %s: %v\n%s", cmdDir, err, out)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// UnsafeGuardsTag is the build tag of a proxy binary that reads
// REDLOCK_PROXY_UNSAFE_GUARDS_OFF, for the tests that switch a safety
// guard off to show what it prevents (cmd/redlock-proxy/guardsoff.go).
const UnsafeGuardsTag = "unsafeguards"

// MainWithProxy is a TestMain body: it builds the proxy binary from cmdDir
// into *bin, runs the tests, removes the binary (and the one UnsafeProxy
// built, if a test asked for it) and exits.
func MainWithProxy(m *testing.M, cmdDir string, bin *string) {
	path, cleanup, err := BuildProxy(cmdDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = path
	unsafeBin.dir = cmdDir
	code := m.Run()
	cleanup()
	if unsafeBin.cleanup != nil {
		unsafeBin.cleanup()
	}
	os.Exit(code)
}

// unsafeBin is the binary UnsafeProxy builds, once.
var unsafeBin struct {
	dir     string // MainWithProxy's cmdDir
	once    sync.Once
	path    string
	cleanup func()
	err     error
}

// UnsafeProxy returns the proxy binary built with UnsafeGuardsTag, which
// reads REDLOCK_PROXY_UNSAFE_GUARDS_OFF, from the directory MainWithProxy
// built the production one from; it is built at the first call, for the
// tests that switch a guard off, and removed with the other.
func UnsafeProxy(t testing.TB) string {
	t.Helper()
	if unsafeBin.dir == "" {
		t.Fatal("UnsafeProxy needs MainWithProxy in TestMain")
	}
	unsafeBin.once.Do(func() {
		unsafeBin.path, unsafeBin.cleanup, unsafeBin.err = BuildProxy(unsafeBin.dir, UnsafeGuardsTag)
	})
	if unsafeBin.err != nil {
		t.Fatal(unsafeBin.err)
	}
	return unsafeBin.path
}
