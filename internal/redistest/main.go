package redistest

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// ErrNoServer is StartServers' error when redis-server is not installed.
var ErrNoServer = errors.New("redis-server not installed")

// StartServers starts n redis-servers as Start does (extra arguments are
// config directives), for a TestMain, where there is no test to tie them
// to: stop kills them and removes their data directories. The servers can
// be killed, not restarted. It answers ErrNoServer when redis-server is
// not installed; the caller decides whether that fails the run (CI=true)
// or skips what needs them.
func StartServers(n int, extra ...string) (servers []*Server, stop func(), err error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, nil, ErrNoServer
	}
	stop = func() {
		for _, s := range servers {
			s.Kill()
			os.RemoveAll(s.Dir)
		}
	}
	for range n {
		s, err := startDetached(extra)
		if s != nil {
			servers = append(servers, s)
		}
		if err != nil {
			stop()
			return nil, nil, err
		}
	}
	return servers, stop, nil
}

// startDetached is Start without a test: a port that another process takes
// before the server binds it is replaced by another, up to five times.
func startDetached(extra []string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir}
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return s, err
		}
		s.Port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
		s.args = append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", s.Dir, "--protected-mode", "no"}, extra...)
		err = s.tryStart()
		if err == nil {
			return s, nil
		}
		s.Kill()
		if try == 4 {
			return s, fmt.Errorf("redistest: %w", err)
		}
	}
}

// MainWithServers is a TestMain body for examples that need n servers
// (extra: their config directives) running before any of them: it starts
// them, calls setup with their addresses (for the examples to read, and
// whatever the masters need first), runs the tests, stops the servers and
// exits. Without redis-server it fails under CI=true; otherwise the
// examples, which cannot skip themselves, are skipped (-skip ^Example)
// and the tests, which skip themselves, run.
func MainWithServers(m *testing.M, n int, extra []string, setup func(addrs []string) error) {
	servers, stop, err := StartServers(n, extra...)
	switch {
	case errors.Is(err, ErrNoServer) && os.Getenv("CI") != "true":
		flag.Parse()
		if flag.Lookup("test.skip").Value.String() == "" {
			_ = flag.Set("test.skip", "^Example")
		}
		fmt.Fprintln(os.Stderr, "redis-server not installed: the examples are skipped")
		os.Exit(m.Run())
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := setup(Addrs(servers)); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}
