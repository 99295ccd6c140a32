package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The CPU of each process per lock+unlock pair, read over a window in the
// middle of a timed run: the steady state. The runs' other CPU figures
// (recordCPU) cover the whole run, with the load generator's start-up,
// warm-up and shutdown, and the machine's figure counts whatever else ran
// on it meanwhile (on a shared machine, other people's builds and tests).
// Here each process is read alone: the clients (the load generator), the
// masters, the proxy. The pairs are counted on the first master, which runs
// one SET per lock+unlock pair in every configuration measured: the
// proxy's SET NX, go-redsync's, and the SET of node-redlock's acquire
// script.

// window is the CPU per pair, in µs, of each process over one window.
type window struct {
	gen, servers, proxy, machine float64
	// The proxy's and the servers' time in the kernel, of proxy and
	// servers above.
	proxySys, serversSys float64
	pairs                int64
}

// sum is the CPU per pair of every process of the comparison.
func (w window) sum() float64 { return w.gen + w.servers + w.proxy }

// winSnap is what a window's ends read.
type winSnap struct {
	gen, proxy, servers, machine time.Duration
	proxySys, serversSys         time.Duration
	sets                         int64 // SET calls on the first server
}

// snapWindow reads the CPU time of the generator (genPid), the proxy (nil:
// none), the servers and the machine, and the first server's SET calls.
func snapWindow(genPid int, proxy *proc, servers []*proc) (winSnap, error) {
	var s winSnap
	var err error
	if s.sets, err = setCalls(servers[0].addr); err != nil {
		return s, err
	}
	if s.gen, err = cpuTime(genPid); err != nil {
		return s, err
	}
	if proxy != nil {
		user, sys, err := cpuTimes(proxy.pid())
		if err != nil {
			return s, err
		}
		s.proxy, s.proxySys = user+sys, sys
	}
	for _, p := range servers {
		user, sys, err := cpuTimes(p.pid())
		if err != nil {
			return s, err
		}
		s.servers += user + sys
		s.serversSys += sys
	}
	s.machine, err = machineBusy()
	return s, err
}

// measureWindow reads the processes at from and at to.
func measureWindow(genPid int, proxy *proc, servers []*proc, from, to time.Time) (window, error) {
	time.Sleep(time.Until(from))
	a, err := snapWindow(genPid, proxy, servers)
	if err != nil {
		return window{}, err
	}
	time.Sleep(time.Until(to))
	b, err := snapWindow(genPid, proxy, servers)
	if err != nil {
		return window{}, err
	}
	w := window{pairs: b.sets - a.sets}
	if w.pairs <= 0 {
		return w, fmt.Errorf("no SET on %s between %s and %s", servers[0].addr, from.Format("15:04:05.000"), to.Format("15:04:05.000"))
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(w.pairs) }
	w.gen, w.servers, w.proxy, w.machine = per(b.gen-a.gen), per(b.servers-a.servers), per(b.proxy-a.proxy), per(b.machine-a.machine)
	w.proxySys, w.serversSys = per(b.proxySys-a.proxySys), per(b.serversSys-a.serversSys)
	return w, nil
}

// middle is the window of a timed run of length d that starts at start:
// its middle half.
func middle(start time.Time, d time.Duration) (time.Time, time.Time) {
	return start.Add(d / 4), start.Add(3 * d / 4)
}

// recordWindow adds a window's figures under key.win.*.
func (r *results) recordWindow(key string, w window) {
	r.add(key+".win.gen", w.gen)
	r.add(key+".win.servers", w.servers)
	r.add(key+".win.proxy", w.proxy)
	r.add(key+".win.proxy.sys", w.proxySys)
	r.add(key+".win.servers.sys", w.serversSys)
	// What the processes would take if the proxy's own code cost nothing
	// and its system calls stayed as they are: a bound on what any work
	// on the proxy's code can reach.
	r.add(key+".win.floor", w.gen+w.servers+w.proxySys)
	r.add(key+".win.sum", w.sum())
	r.add(key+".win.machine", w.machine)
}

// setCalls is the number of SET commands a Redis server has run
// (INFO commandstats, cmdstat_set calls), scripts' included.
func setCalls(addr string) (int64, error) {
	info, err := infoSection(addr, "commandstats")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "cmdstat_set:calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		return strconv.ParseInt(n, 10, 64)
	}
	return 0, nil // none yet
}

// infoSection returns a Redis server's INFO section.
func infoSection(addr, section string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(respCommand("INFO", section)); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if err != nil || !strings.HasPrefix(line, "$") {
		return "", fmt.Errorf("INFO %s on %s answered %q", section, addr, strings.TrimSpace(line))
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// windowResult is a window measured beside a run.
type windowResult struct {
	w   window
	err error
}

// nodeWarmUp is how long after its start a Node load generator is surely
// timing: node's own start-up and loadgen.mjs's 0.5 s of warm-up pairs.
const nodeWarmUp = time.Second

// takeWindow records the window measured beside a run that ended (what,
// repetition rep), if it was measured.
func (r *results) takeWindow(key string, win <-chan windowResult, what string, rep int) {
	select {
	case res := <-win:
		if res.err != nil {
			r.problem("%s, repetition %d: CPU window: %v", what, rep+1, res.err)
			return
		}
		r.recordWindow(key, res.w)
	case <-time.After(5 * time.Second):
		r.problem("%s, repetition %d: CPU window not measured", what, rep+1)
	}
}
