package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
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
