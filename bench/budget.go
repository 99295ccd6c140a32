package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The CPU budget of a target. Every process of a comparison (the load
// generator, the Redis servers, the proxy) shares this machine's CPUs, so a
// target rate leaves the proxy at most
//
//	CPUs / rate − (generator + servers), per operation,
//
// with the generator's and the servers' CPU per operation as measured in
// the proxy's own runs, and the CPUs never idle (an upper bound: they never
// are). Set beside what the proxy spends now and what the one Redis spends
// per operation when the clients talk to it directly, it shows how far a
// target is from this machine's reach, whatever the proxy's code.

// cpuSnap is the CPU time used so far by the machine (all CPUs, busy time),
// by the servers behind one target, and by the load generator, read at at.
type cpuSnap struct {
	machine, servers, gen, proxy time.Duration
	at                           time.Time
}

// snapCPU reads a cpuSnap; gen is the benchmark process itself (the
// Go-client runs), or 0 when the generator is a child measured on exit;
// proxy, if not nil, is the proxy in front of the servers.
func snapCPU(servers []*proc, proxy *proc, self bool) cpuSnap {
	s := cpuSnap{at: time.Now()}
	s.machine, _ = machineBusy()
	for _, p := range servers {
		d, _ := cpuTime(p.pid())
		s.servers += d
	}
	if proxy != nil {
		s.proxy, _ = cpuTime(proxy.pid())
	}
	if self {
		s.gen, _ = cpuTime(os.Getpid())
	}
	return s
}

// recordCPU adds the CPU per operation between a and b, in µs, under
// key.gen, key.servers and key.machine, and the machine's busy share
// between them under key.busy; gen, when not zero, replaces the
// generator's share (a child's, from its exit status).
func (r *results) recordCPU(key string, a, b cpuSnap, gen time.Duration, ops int) {
	if ops <= 0 {
		return
	}
	if gen == 0 {
		gen = b.gen - a.gen
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(ops) }
	r.add(key+".gen", per(gen))
	r.add(key+".servers", per(b.servers-a.servers))
	// Every process of the run: the clients, the servers and the proxy.
	r.add(key+".all", per(gen)+per(b.servers-a.servers)+per(b.proxy-a.proxy))
	if b.machine > 0 {
		r.add(key+".machine", per(b.machine-a.machine))
		if wall := b.at.Sub(a.at); wall > 0 {
			r.add(key+".busy", float64(b.machine-a.machine)/float64(wall)/float64(runtime.NumCPU()))
		}
	}
}

// machineBusy is the time all CPUs spent busy so far (user, nice, system,
// irq, softirq: not idle, iowait or steal), from /proc/stat.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat")
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/stat")
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// budget is one target's line of the budget table.
type budget struct {
	what, unit string
	need       float64 // the rate the target asks for, per second
	gen, srv   float64 // µs per operation, through the proxy
	busy       float64 // the machine's busy share in those runs
	proxy      float64 // µs per operation, the proxy now
	redis      float64 // µs per operation, the one Redis, direct
}

// budgets builds the table's lines from the results of this run.
func budgets(o options, r *results, cpus int) []budget {
	var bs []budget
	add := func(what, unit string, need float64, key string, got, proxy, redis float64) {
		if math.IsNaN(need) || !r.has(key+".gen") {
			return
		}
		b := budget{what: what, unit: unit, need: need, gen: r.med(key + ".gen"), srv: r.med(key + ".servers"),
			proxy: proxy, redis: redis, busy: math.NaN()}
		switch {
		case r.has(key + ".busy"):
			b.busy = r.med(key + ".busy")
		case r.has(key + ".machine"):
			// Without the share itself: from the machine's CPU per
			// operation at the rate the proxy reached (got). Medians of
			// different repetitions, so it may exceed 1.
			b.busy = r.med(key+".machine") * got / 1e6 / float64(cpus)
		}
		bs = append(bs, b)
	}
	if o.rows["1"] {
		got, proxy := orNaN(r, "rs.p3.rate"), 2*orNaN(r, "rs.p3.cpu")
		redis := orNaN(r, "rs.single.servers")
		add("1 a/b. go-redsync via proxy ≥ 2× go-redsync → 3 masters", "lock+unlock pair",
			2*orNaN(r, "rs.m3.rate"), "rs.p3", got, proxy, redis)
		add("1 a/c. go-redsync via proxy ≥ 0.8× go-redsync → 1 Redis", "lock+unlock pair",
			0.8*orNaN(r, "rs.single.rate"), "rs.p3", got, proxy, redis)
	}
	if o.rows["3"] {
		add("3. SET NX PX acquires via proxy ≥ 0.5× one Redis (redis-benchmark)", "acquire",
			0.5*orNaN(r, "acq.single.rps"), "acq.proxy", orNaN(r, "acq.proxy.rps"), orNaN(r, "acq.proxy.cpu"), orNaN(r, "acq.single.cpu"))
	}
	if o.rows["4"] {
		add("4. passthrough -P 16 ≥ 1.5× twemproxy (SET and GET)", "command",
			1.5*bothTests(r, "pt16.twemproxy"), "pt16.proxy", bothTests(r, "pt16.proxy"), orNaN(r, "pt16.proxy.cpu"), orNaN(r, "pt16.direct.cpu"))
		add("4. passthrough -P 1 ≥ 0.9× Redis direct (SET and GET)", "command",
			0.9*bothTests(r, "pt1.direct"), "pt1.proxy", bothTests(r, "pt1.proxy"), orNaN(r, "pt1.proxy.cpu"), orNaN(r, "pt1.direct.cpu"))
	}
	return bs
}

// bothTests is the rate of a redis-benchmark run of SET then GET, the same
// number of each: n commands of each over the time both took.
func bothTests(r *results, key string) float64 {
	s, g := orNaN(r, key+".SET"), orNaN(r, key+".GET")
	if math.IsNaN(s) || math.IsNaN(g) || s == 0 || g == 0 {
		return math.NaN()
	}
	return 2 / (1/s + 1/g)
}

func writeBudgets(out io.Writer, bs []budget, cpus int) {
	if len(bs) == 0 {
		return
	}
	fmt.Fprintf(out, "\n### CPU budget at each target\n\n")
	fmt.Fprintf(out, "All processes share this machine's %d CPUs. At the rate a target asks for, the CPUs give %d s / rate of CPU time per operation; "+
		"the load generator and the Redis servers behind the proxy take what they took per operation in the proxy's runs (medians); "+
		"what remains is the most the proxy could spend if the CPUs were never idle (the last column says how busy they were). "+
		"Beside it: what the proxy spends now, and what the one Redis spends per operation when the clients talk to it directly.\n\n", cpus, cpus)
	fmt.Fprintln(out, "| target | per | rate needed | CPU the machine has per op at that rate | load generator | Redis servers | left for the proxy, at most | proxy now | one Redis, direct | machine busy in the proxy runs |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	for _, b := range bs {
		have := float64(cpus) * 1e6 / b.need
		busy := "n/a"
		if !math.IsNaN(b.busy) {
			busy = fmt.Sprintf("%.0f%%", 100*b.busy)
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", b.what, b.unit, rate(b.need), micros(have),
			micros(b.gen), micros(b.srv), micros(have-b.gen-b.srv), micros(b.proxy), micros(b.redis), busy)
	}
}
