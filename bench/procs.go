package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// proc is one child process started by the benchmark: a redis-server, the
// proxy or twemproxy. Its output goes to a log file in the work directory.
type proc struct {
	name    string
	addr    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	exitErr error
	stopped bool
}

// procs starts child processes and stops every one of them, by pid, at the end.
type procs struct {
	dir        string
	proxyProcs int // proxy.procs of the proxies it starts
	mu         sync.Mutex
	all        []*proc
}

func (ps *procs) start(name, addr string, argv ...string) (*proc, error) {
	logPath := filepath.Join(ps.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, addr: addr, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	ps.mu.Lock()
	ps.all = append(ps.all, p)
	ps.mu.Unlock()
	return p, nil
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) stop() {
	if p.alive() {
		p.stopped = true
		_ = p.cmd.Process.Kill()
	}
	<-p.exited
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// logTail returns the last lines of the process's log.
func (p *proc) logTail(n int) string {
	lines := readLines(p.logPath)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func readLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func (ps *procs) stopAll() {
	ps.mu.Lock()
	all := append([]*proc(nil), ps.all...)
	ps.mu.Unlock()
	for i := len(all) - 1; i >= 0; i-- {
		all[i].stop()
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// roundTrip sends one command in RESP and reads the first line of the reply.
func roundTrip(addr string, timeout time.Duration, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(respCommand(args...)); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

func respCommand(args ...string) []byte {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	return []byte(b.String())
}

// waitReady waits until addr answers PING with PONG, or the process exits.
func waitReady(p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if !p.alive() {
			return fmt.Errorf("%s exited: %v\n%s", p.name, p.exitErr, p.logTail(20))
		}
		reply, err := roundTrip(p.addr, time.Second, "PING")
		if err == nil && reply == "+PONG" {
			return nil
		}
		if err == nil {
			err = errors.New("reply " + reply)
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s on %s did not answer PING within %v: %v\n%s", p.name, p.addr, timeout, last, p.logTail(20))
}

// startRedis runs a redis-server with no persistence on a free loopback
// port; extra arguments go to redis-server.
func (ps *procs) startRedis(name string, extra ...string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(ps.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	argv := append([]string{"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "no",
		"--maxclients", "20000"}, extra...)
	p, err := ps.start(name, addr, argv...)
	if err != nil {
		return nil, err
	}
	return p, waitReady(p, 10*time.Second)
}

// proxyConfig is what the benchmark puts in the proxy's config file.
type proxyConfig struct {
	masters    []string
	backend    string
	lockKeys   []string
	maxClients int
	// lockKeyCommands, if set, is proxy.lock_key_commands.
	lockKeyCommands string
}

// startProxy writes a config file and runs the proxy binary with a raised
// open-files limit.
func (ps *procs) startProxy(name, binary string, pc proxyConfig) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	quote := func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[proxy]\nlisten = %q\n", addr)
	if pc.backend != "" {
		fmt.Fprintf(&b, "backend = %q\n", pc.backend)
	}
	fmt.Fprintf(&b, "lock_keys = %s\n", quote(pc.lockKeys))
	if pc.lockKeyCommands != "" {
		fmt.Fprintf(&b, "lock_key_commands = %q\n", pc.lockKeyCommands)
	}
	if pc.maxClients > 0 {
		fmt.Fprintf(&b, "max_clients = %d\n", pc.maxClients)
	}
	fmt.Fprintf(&b, "procs = %d\n", ps.proxyProcs)
	fmt.Fprintf(&b, "\n[redlock]\nmasters = %s\nrestart_guard = false\n", quote(pc.masters))
	fmt.Fprintf(&b, "\n[log]\nlevel = \"warn\"\nformat = \"json\"\n")
	cfg := filepath.Join(ps.dir, name+".toml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	// The hard limit may be below 65536 (it is 20000 on some CI machines):
	// then take the hard limit.
	script := `ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$0" -config "$1"`
	p, err := ps.start(name, addr, "bash", "-c", script, binary, cfg)
	if err != nil {
		return nil, err
	}
	return p, waitReady(p, 15*time.Second)
}

// startTwemproxy runs Debian's nutcracker in front of one Redis.
func (ps *procs) startTwemproxy(name, server string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	statsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cfg := filepath.Join(ps.dir, name+".yml")
	body := fmt.Sprintf(`bench:
  listen: %s
  hash: fnv1a_64
  distribution: ketama
  redis: true
  preconnect: true
  auto_eject_hosts: false
  timeout: 5000
  servers:
   - %s:1
`, addr, server)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return nil, err
	}
	p, err := ps.start(name, addr, "nutcracker", "-c", cfg, "-o", filepath.Join(ps.dir, name+".nutcracker.log"),
		"-s", strconv.Itoa(statsPort), "-a", "127.0.0.1", "-v", "4")
	if err != nil {
		return nil, err
	}
	return p, waitReady(p, 10*time.Second)
}

// flushAll empties the given Redis servers.
func flushAll(addrs ...string) error {
	for _, a := range addrs {
		reply, err := roundTrip(a, 5*time.Second, "FLUSHALL")
		if err != nil {
			return fmt.Errorf("FLUSHALL %s: %w", a, err)
		}
		if reply != "+OK" {
			return fmt.Errorf("FLUSHALL %s: %s", a, reply)
		}
	}
	return nil
}

// dbsize returns the number of keys in a Redis server's database 0.
func dbsize(addr string) (int64, error) {
	reply, err := roundTrip(addr, 5*time.Second, "DBSIZE")
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(reply, ":") {
		return 0, fmt.Errorf("DBSIZE answered %q", reply)
	}
	return strconv.ParseInt(reply[1:], 10, 64)
}

// rssKB reads VmRSS and VmHWM of a process, in kB.
func rssKB(pid int) (rss, hwm int64, err error) {
	lines := readLines(fmt.Sprintf("/proc/%d/status", pid))
	if lines == nil {
		return 0, 0, fmt.Errorf("cannot read /proc/%d/status", pid)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return rss, hwm, nil
}

// cpuTime is the user+system CPU time a process has used, from
// /proc/PID/stat (clock ticks of 1/100 s).
func cpuTime(pid int) (time.Duration, error) {
	user, sys, err := cpuTimes(pid)
	return user + sys, err
}

// cpuTimes is a process's CPU time so far, in user space and in the kernel
// (its system calls, and what the kernel does on their behalf: on loopback,
// a write carries the segment to the other end's socket and wakes it).
func cpuTimes(pid int) (user, sys time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return time.Duration(utime) * 10 * time.Millisecond, time.Duration(stime) * 10 * time.Millisecond, nil
}
