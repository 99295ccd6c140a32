// Command bench measures redlock-proxy on this machine against the
// baselines it replaces, in one run, and prints one markdown table of
// ratios of medians:
//
//  1. go-redsync v4 lock+unlock pairs/s and p99 acquire latency, 50 clients
//     each locking its own key: through the proxy (3 masters) vs go-redsync
//     against the same 3 masters vs go-redsync against one Redis;
//  2. the same through a proxy with 5 masters vs 3;
//  3. redis-benchmark SET … NX PX acquires/s: proxy vs one Redis; and the
//     proxy's fenced LOCK.ACQUIRE vs that SET NX through the proxy;
//  4. passthrough GET/SET with redis-benchmark: proxy vs twemproxy
//     (pipelined, -P 16, with Redis direct as the ceiling) and proxy vs
//     Redis direct (-P 1);
//  5. the proxy's RSS with 10,000 idle clients;
//  6. clients that multiplex a process's requests on one connection, from
//     Node: node-redlock 5 over ioredis through the proxy vs straight to the
//     same masters, and node-redis 4 through the proxy vs one Redis; with
//     the CPU of the whole machine per lock+release pair;
//  7. redis-benchmark SET … NX PX through the proxy from one connection,
//     pipelined, vs as many connections with one command in flight each;
//  8. the proxy's RSS with 10,000 idle subscribers;
//  9. data commands (GET, SET, INCR) with redis-benchmark through a proxy
//     in the configuration scripts/run.sh starts — a backend of its own
//     and lock_keys = ["*"], where every key may be a lock and data beside
//     locks passes through (mixed mode, proxy/mixed.go) — vs Redis direct
//     (-P 1) and vs twemproxy (-P 16), and beside a proxy with
//     lock_keys = ["lock:*"], where those keys are no lock keys at all;
//  10. Redis Clusters (cluster.go): SET … NX PX acquires/s and the proxy's
//     CPU per acquire with three voters that are plain masters or clusters
//     of 1, 2 and 3 shards each; and data commands through a proxy whose
//     backend is a 3-shard cluster vs straight to the cluster
//     (redis-benchmark --cluster, go-redis's ClusterClient).
//
// A second table (budget.go) sets each throughput target beside the CPU it
// leaves the proxy on this machine, which the load generator and the Redis
// servers share.
//
// It starts its own redis-server masters, proxy processes and twemproxy
// (Debian's nutcracker) on 127.0.0.1, and stops them when it ends. Machines
// are shared and noisy: it reports medians and ratios and never fails on a
// timing. Run it with `go run ./bench` from the repository root, or
// `bash scripts/bench.sh`, which installs what it needs first.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	duration time.Duration
	reps     int
	clients  int
	conns    int
	binary   string
	rows     map[string]bool
	timeout  time.Duration
	keep     bool
	procs    int
}

func main() {
	var o options
	var rows string
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of one timed run (go-redsync runs; redis-benchmark runs are sized to about this)")
	flag.IntVar(&o.reps, "reps", 3, "repetitions of each measurement; the table shows medians")
	flag.IntVar(&o.clients, "clients", 50, "concurrent clients (go-redsync goroutines and redis-benchmark -c)")
	flag.IntVar(&o.conns, "conns", 10000, "idle client connections for the memory measurement")
	flag.StringVar(&o.binary, "proxy-bin", "", "redlock-proxy binary to measure (default: build ./cmd/redlock-proxy)")
	flag.StringVar(&rows, "rows", "1,2,3,4,5,6,7,8,9,10", "rows to measure, comma-separated")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "stop everything and exit after this long")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (configs and logs of every process)")
	flag.IntVar(&o.procs, "procs", 1, "proxy.procs of every proxy started (threads running its Go code; 0: Go's default, one per CPU)")
	flag.Parse()
	o.rows = map[string]bool{}
	for _, r := range strings.Split(rows, ",") {
		o.rows[strings.TrimSpace(r)] = true
	}
	if o.reps < 1 || o.clients < 1 || o.duration <= 0 || o.procs < 0 {
		fmt.Fprintln(os.Stderr, "bench: -reps, -clients and -duration must be positive, -procs at least 0")
		os.Exit(2)
	}

	dir, err := os.MkdirTemp("", "redlock-proxy-bench")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	ps := &procs{dir: dir, proxyProcs: o.procs}
	cleanup := func() {
		ps.stopAll()
		if !o.keep {
			os.RemoveAll(dir)
		}
	}
	// Stop everything on a signal or when the run takes too long.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(os.Stderr, "bench: %v: stopping\n", s)
		case <-time.After(o.timeout):
			fmt.Fprintf(os.Stderr, "bench: no result within -timeout %v: stopping\n", o.timeout)
		}
		cleanup()
		os.Exit(3)
	}()

	err = run(o, ps, os.Stdout)
	cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// results keeps every repetition's values by name.
type results struct {
	vals     map[string][]float64
	notes    []string // what was run, per measurement
	problems []string
}

func (r *results) add(key string, v float64) { r.vals[key] = append(r.vals[key], v) }
func (r *results) med(key string) float64    { return median(r.vals[key]) }
func (r *results) has(key string) bool       { return len(r.vals[key]) > 0 }

// addRates records every rate of a sized run as <key>.<target>.<test>,
// and with p99 its p99 latency as <key>.<target>.<test>.p99.
func (r *results) addRates(key string, got map[string]map[string][]rbResult, p99 bool) {
	for name, tests := range got {
		for test, vs := range tests {
			for _, v := range vs {
				r.add(key+"."+name+"."+test, v.rps)
				if p99 {
					r.add(key+"."+name+"."+test+".p99", v.p99ms)
				}
			}
		}
	}
}

func (r *results) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	progress("PROBLEM: %s", msg)
	r.problems = append(r.problems, msg)
}

func run(o options, ps *procs, out io.Writer) error {
	started := time.Now()
	info := machineInfo()
	if err := checkTools(o); err != nil {
		return err
	}
	binary, err := proxyBinary(o, ps)
	if err != nil {
		return err
	}
	b := &bench{o: o, ps: ps, r: &results{vals: map[string][]float64{}}, binary: binary,
		rbTimeout: max(90*time.Second, 12*o.duration), clients: fmt.Sprint(o.clients)}
	if err := b.start(); err != nil {
		return err
	}
	r := b.r
	if o.rows["1"] || o.rows["2"] {
		if err := b.redsyncRows(); err != nil {
			return err
		}
	}
	if o.rows["1"] || o.rows["6"] {
		r.notes = append(r.notes, "CPU per pair, mid-run window (window.go): user+system CPU of each process (the load generator, the Redis servers, the proxy) over the middle half of each timed run, over the lock+unlock pairs in that window, counted as the first server's SET calls (one per pair in every configuration); start-up, warm-up, shutdown and the rest of the machine are left out. The whole-machine figure beside it is /proc/stat over the whole run.")
	}
	if o.rows["3"] {
		b.acquireRow()
		if err := b.acquireGoRow(); err != nil {
			return err
		}
	}
	if o.rows["6"] {
		if err := b.nodeRow(); err != nil {
			return err
		}
	}
	if o.rows["7"] {
		if err := b.pipelinedRow(); err != nil {
			return err
		}
	}
	if o.rows["4"] {
		b.passthroughRow()
	}
	if o.rows["9"] {
		b.dataRow()
	}
	if o.rows["10"] { // Redis Clusters as voters and as the backend
		if err := runRow10(o, ps, r, binary, b.single, b.sized, b.serversOf); err != nil {
			return err
		}
	}
	b.checkProxiesAlive()
	if o.rows["5"] {
		b.rss(memoryRow)
	}
	if o.rows["8"] {
		b.rss(subscribersRow)
	}
	b.proxyWarnings()
	report(out, o, r, info, started)
	return nil
}

// bench is one run's processes, shared by the rows, and its results.
type bench struct {
	o      options
	ps     *procs
	r      *results
	binary string
	// The Redis servers: three masters, five (row 2), and a single one
	// (the baseline, and the backend of the passthrough proxies).
	m3p, m5p []*proc
	m3, m5   []string
	single   *proc
	// The proxies: on 3 masters, on 5, passthrough (lock_keys =
	// ["lock:*"]), mixed (lock_keys = ["*"], row 9); and twemproxy.
	p3, p5, pp, pm, twem *proc
	proxies              []*proc // every long-running proxy
	allRedis             []string
	// serversOf are the Redis servers each target's commands end on, for
	// the CPU budget.
	serversOf map[*proc][]*proc
	rbTimeout time.Duration
	clients   string // o.clients, as redis-benchmark's -c
}

// checkTools reports a program the chosen rows need that is not installed,
// and raises the open-files limit.
func checkTools(o options) error {
	need := []string{"redis-server"}
	if o.rows["3"] || o.rows["4"] || o.rows["7"] || o.rows["9"] || o.rows["10"] {
		need = append(need, "redis-benchmark")
	}
	if o.rows["4"] || o.rows["9"] {
		need = append(need, "nutcracker")
	}
	for _, n := range need {
		if _, err := exec.LookPath(n); err != nil {
			return fmt.Errorf("%s is not installed (bash scripts/bench.sh installs it: apt-get install redis-server redis-tools nutcracker)", n)
		}
	}
	nofile, err := raiseNoFile(65536)
	if err != nil {
		return fmt.Errorf("raise RLIMIT_NOFILE: %w", err)
	}
	if (o.rows["5"] || o.rows["8"]) && nofile < 2*uint64(o.conns)+1000 {
		progress("open-files limit is %d: fewer than %d connections may open", nofile, o.conns)
	}
	return nil
}

// proxyBinary is the redlock-proxy to measure: -proxy-bin, or one built
// from ./cmd/redlock-proxy.
func proxyBinary(o options, ps *procs) (string, error) {
	binary := o.binary
	if binary == "" {
		binary = filepath.Join(ps.dir, "redlock-proxy")
		progress("building ./cmd/redlock-proxy")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/redlock-proxy")
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build ./cmd/redlock-proxy (run from the repository root): %v\n%s", err, b)
		}
	}
	return binary, nil
}

// start starts the Redis servers, proxies and twemproxy the chosen rows
// measure. Masters without persistence; every proxy has the restart guard
// off, so a fresh master votes at once.
func (b *bench) start() error {
	o, ps, binary := b.o, b.ps, b.binary
	progress("starting redis-server ×9, proxies, twemproxy")
	startRedisN := func(prefix string, n int) ([]*proc, []string, error) {
		var ps1 []*proc
		var addrs []string
		for i := range n {
			p, err := ps.startRedis(fmt.Sprintf("%s-%d", prefix, i+1))
			if err != nil {
				return nil, nil, err
			}
			ps1 = append(ps1, p)
			addrs = append(addrs, p.addr)
		}
		return ps1, addrs, nil
	}
	var err error
	if b.m3p, b.m3, err = startRedisN("master3", 3); err != nil {
		return err
	}
	m3 := b.m3
	if o.rows["2"] {
		if b.m5p, b.m5, err = startRedisN("master5", 5); err != nil {
			return err
		}
	}
	if b.single, err = ps.startRedis("single"); err != nil {
		return err
	}
	single := b.single
	if o.rows["1"] || o.rows["2"] || o.rows["3"] || o.rows["6"] || o.rows["7"] {
		if b.p3, err = ps.startProxy("proxy-3masters", binary, proxyConfig{masters: m3, lockKeys: []string{"*"}}); err != nil {
			return err
		}
		b.proxies = append(b.proxies, b.p3)
	}
	if o.rows["2"] {
		if b.p5, err = ps.startProxy("proxy-5masters", binary, proxyConfig{masters: b.m5, lockKeys: []string{"*"}}); err != nil {
			return err
		}
		b.proxies = append(b.proxies, b.p5)
	}
	if o.rows["4"] || o.rows["9"] {
		if b.pp, err = ps.startProxy("proxy-passthrough", binary, proxyConfig{masters: m3, backend: single.addr, lockKeys: []string{"lock:*"}}); err != nil {
			return err
		}
		b.proxies = append(b.proxies, b.pp)
		if b.twem, err = ps.startTwemproxy("twemproxy", single.addr); err != nil {
			return err
		}
	}
	if o.rows["9"] {
		// What scripts/run.sh starts: a backend of the application's own,
		// every key a lock key (mixed mode).
		if b.pm, err = ps.startProxy("proxy-mixed", binary, proxyConfig{masters: m3, backend: single.addr, lockKeys: []string{"*"}}); err != nil {
			return err
		}
		b.proxies = append(b.proxies, b.pm)
	}
	b.allRedis = append(append(append([]string{}, m3...), b.m5...), single.addr)
	// The Redis servers each target's commands end on, for the CPU budget.
	b.serversOf = map[*proc][]*proc{single: {single}, b.p3: b.m3p, b.p5: b.m5p, b.pp: {single}, b.pm: {single}, b.twem: {single}}
	return nil
}

// redsyncRows measures rows 1 and 2: go-redsync. The configurations take
// turns in each repetition so that a noisy neighbour hits all of them alike.
func (b *bench) redsyncRows() error {
	o, r, p3, p5, single := b.o, b.r, b.p3, b.p5, b.single
	type rsConf struct {
		key, what string
		servers   []string
		proxy     *proc   // its CPU time is measured
		redis     []*proc // the Redis servers behind it
	}
	var confs []rsConf
	confs = append(confs, rsConf{"p3", "proxy (3 masters)", []string{p3.addr}, p3, b.m3p})
	if o.rows["1"] {
		confs = append(confs, rsConf{"m3", "go-redsync → 3 masters", b.m3, nil, b.m3p}, rsConf{"single", "go-redsync → 1 Redis", []string{single.addr}, nil, []*proc{single}})
	}
	if o.rows["2"] {
		confs = append(confs, rsConf{"p5", "proxy (5 masters)", []string{p5.addr}, p5, b.m5p})
	}
	for rep := range o.reps {
		for _, c := range confs {
			if err := flushAll(b.allRedis...); err != nil {
				return err
			}
			var cpu0 time.Duration
			if c.proxy != nil {
				cpu0, _ = cpuTime(c.proxy.pid())
			}
			snap0 := snapCPU(c.redis, c.proxy, true)
			win := make(chan windowResult, 1)
			res, err := runRedsync(c.servers, o.clients, o.duration, func(start time.Time) {
				go func() {
					from, to := middle(start, o.duration)
					w, err := measureWindow(os.Getpid(), c.proxy, c.redis, from, to)
					win <- windowResult{w, err}
				}()
			})
			if err == nil {
				r.recordCPU("rs."+c.key, snap0, snapCPU(c.redis, c.proxy, true), 0, res.pairs)
				r.takeWindow("rs."+c.key, win, c.what, rep)
			}
			if c.proxy != nil && err == nil && res.pairs > 0 {
				// The whole run, warm-up included, over the pairs that
				// succeeded: an upper bound per operation.
				if cpu1, cerr := cpuTime(c.proxy.pid()); cerr == nil {
					r.add("rs."+c.key+".cpu", float64((cpu1-cpu0).Microseconds())/float64(2*res.pairs))
				}
			}
			if err != nil {
				r.problem("go-redsync %s, repetition %d: %v", c.what, rep+1, err)
				continue
			}
			progress("go-redsync %-24s rep %d: %8.0f pairs/s  p50 %6.2f ms  p99 %6.2f ms  lock errors %d  unlock errors %d",
				c.what, rep+1, res.rate(), ms(res.p50), ms(res.p99), res.lockErrs, res.unlockErrs)
			r.add("rs."+c.key+".rate", res.rate())
			r.add("rs."+c.key+".p99", ms(res.p99))
			r.add("rs."+c.key+".p50", ms(res.p50))
			if res.lockErrs+res.unlockErrs > 0 {
				r.problem("go-redsync %s, repetition %d: %d failed locks and %d failed unlocks out of %d pairs; e.g. %s",
					c.what, rep+1, res.lockErrs, res.unlockErrs, res.pairs, strings.Join(res.errSamples, "; "))
			}
		}
	}
	r.notes = append(r.notes, fmt.Sprintf("go-redsync v4.18.1 (goredis/v9 pool, go-redis v9 RESP2, no retries): %d goroutines, each its own redsync over its own go-redis client per server, locking its own key; WithExpiry(8s), WithTries(1); %v per run after one warm-up pair per client. Pairs/s counts lock+unlock pairs that both succeeded.", o.clients, o.duration))
	return nil
}

// sized runs redis-benchmark once per target as a pilot (also a warm
// up), then gives every target the same -n, chosen so that the slowest
// target runs about o.duration, and alternates targets in each
// repetition.
// sized also records each target process's CPU time per command as
// <cpuKey>.<name>.cpu, in µs.
func (b *bench) sized(label, cpuKey string, targets []*proc, names []string, tests int, flush []string, after func(name string), args ...string) (map[string]map[string][]rbResult, bool) {
	o, r, rbTimeout, serversOf := b.o, b.r, b.rbTimeout, b.serversOf
	slowest := 0.0
	for _, t := range targets {
		pilot, _, _, err := runRedisBenchmark(t.addr, 20000, rbTimeout, args...)
		if err != nil {
			// Size the runs from the other targets; the timed runs
			// try this one again.
			r.problem("%s pilot on %s: %v", label, t.name, err)
			continue
		}
		for _, v := range pilot {
			if slowest == 0 || v.rps < slowest {
				slowest = v.rps
			}
		}
	}
	if slowest == 0 {
		slowest = 10000
	}
	n := int(slowest * o.duration.Seconds() / float64(tests))
	n = max(20000, min(n, 5_000_000))
	got := map[string]map[string][]rbResult{}
	var line string
	for rep := range o.reps {
		for i, t := range targets {
			if err := flushAll(flush...); err != nil {
				r.problem("%v", err)
				return nil, false
			}
			cpu0, cerr := cpuTime(t.pid())
			var front *proc // a proxy in front of the servers
			if !slices.Contains(serversOf[t], t) {
				front = t
			}
			snap0 := snapCPU(serversOf[t], front, false)
			res, l, gen, err := runRedisBenchmark(t.addr, n, rbTimeout, args...)
			line = l
			if cpu1, cerr1 := cpuTime(t.pid()); err == nil && cerr == nil && cerr1 == nil && len(res) > 0 {
				// Every test of the run sends n commands.
				r.add(cpuKey+"."+names[i]+".cpu", float64((cpu1-cpu0).Microseconds())/float64(n*len(res)))
				r.recordCPU(cpuKey+"."+names[i], snap0, snapCPU(serversOf[t], front, false), gen, n*len(res))
			}
			if err != nil {
				r.problem("%s on %s, repetition %d: %v", label, names[i], rep+1, err)
				continue
			}
			if got[names[i]] == nil {
				got[names[i]] = map[string][]rbResult{}
			}
			var parts []string
			for test, v := range res {
				got[names[i]][test] = append(got[names[i]][test], v)
				parts = append(parts, fmt.Sprintf("%s %.0f/s p99 %.2f ms", test, v.rps, v.p99ms))
			}
			progress("%s %-10s rep %d: %s", label, names[i], rep+1, strings.Join(parts, ", "))
			if after != nil {
				after(names[i])
			}
		}
	}
	r.notes = append(r.notes, fmt.Sprintf("%s: `%s` against each target (same -n for all)", label, portRE.ReplaceAllString(line, "-h 127.0.0.1 -p <port>")))
	return got, true
}

// acquireRow measures row 3: acquires through the proxy vs one Redis, and
// the proxy's fenced LOCK.ACQUIRE.
func (b *bench) acquireRow() {
	r, c, single, p3 := b.r, b.clients, b.single, b.p3
	// Keys held after each run: through the proxy a granted lock is on
	// a majority of the masters, so the middle master's DBSIZE counts
	// the grants; a lock refused for anything but "already held" would
	// show as fewer keys than on the single Redis.
	keysHeld := func(name string) {
		addrs := []string{single.addr}
		if name == "proxy" {
			addrs = b.m3
		}
		var sizes []float64
		for _, a := range addrs {
			n, err := dbsize(a)
			if err != nil {
				r.problem("DBSIZE %s: %v", a, err)
				return
			}
			sizes = append(sizes, float64(n))
		}
		progress("acquire %-10s keys held after the run (DBSIZE per server): %v", name, sizes)
		r.add("acq."+name+".keys", median(sizes))
	}
	got, ok := b.sized("acquire", "acq", []*proc{p3, single}, []string{"proxy", "single"}, 1, b.allRedis, keysHeld,
		"-c", c, "-r", "100000", "SET", "key:__rand_int__", "val", "NX", "PX", "10000")
	if ok {
		for name, tests := range got {
			for _, vs := range tests {
				for _, v := range vs {
					r.add("acq."+name+".rps", v.rps)
					r.add("acq."+name+".p99", v.p99ms)
				}
			}
		}
	}
	// The proxy's own fenced acquire, for what its fencing number
	// costs: a second quorum step, and the first waits for every
	// master.
	got, ok = b.sized("LOCK.ACQUIRE", "fenced", []*proc{p3}, []string{"proxy"}, 1, b.allRedis, nil,
		"-c", c, "-r", "100000", "LOCK.ACQUIRE", "key:__rand_int__", "10000")
	if ok {
		for _, vs := range got["proxy"] {
			for _, v := range vs {
				r.add("fenced.proxy.rps", v.rps)
			}
		}
	}
}

// acquireGoRow measures row 3 again from a Go client that does not stop at
// the first error reply (redis-benchmark does), so that errors are counted.
func (b *bench) acquireGoRow() error {
	o, r, p3, single := b.o, b.r, b.p3, b.single
	for rep := range o.reps {
		for _, t := range []struct {
			name string
			p    *proc
		}{{"proxy", p3}, {"single", single}} {
			if err := flushAll(b.allRedis...); err != nil {
				return err
			}
			res, err := runRawAcquire(t.p.addr, o.clients, 100000, o.duration)
			if err != nil {
				r.problem("acquire (Go client) on %s, repetition %d: %v", t.name, rep+1, err)
				continue
			}
			progress("acquire (Go client) %-7s rep %d: %.0f OK-or-nil/s (%d OK, %d nil, %d errors) p99 %.2f ms",
				t.name, rep+1, res.answered(), res.ok, res.nils, res.errs, ms(res.p99))
			r.add("acqgo."+t.name+".rps", res.answered())
			r.add("acqgo."+t.name+".ok", float64(res.ok))
			r.add("acqgo."+t.name+".errors", float64(res.errs))
			if res.errs > 0 {
				r.problem("acquire (Go client) on %s, repetition %d: %d error replies out of %d (%d OK, %d nil); e.g. %s",
					t.name, rep+1, res.errs, res.ok+res.nils+res.errs, res.ok, res.nils, strings.Join(res.errSamples, " / "))
			}
		}
	}
	r.notes = append(r.notes, fmt.Sprintf("acquire (Go client): the same SET key:<12 digits below 100000> val NX PX 10000 from %d connections, one command in flight each, %v per run; counts error replies and goes on (redis-benchmark stops at the first error reply); rate = OK or nil replies per second", o.clients, o.duration))
	return nil
}

// nodeRow measures row 6: clients that multiplex every request of a
// process on one connection, from Node.
func (b *bench) nodeRow() error {
	o, r, p3, single := b.o, b.r, b.p3, b.single
	if why := nodeReady(); why != "" {
		r.problem("row 6 not measured: %s", why)
	} else {
		type nodeConf struct {
			key, mode, what string
			addrs           []string
			proxy           *proc // nil: straight to the servers
			redis           []*proc
		}
		confs := []nodeConf{
			{"redlock.proxy", "redlock5", "node-redlock → proxy", []string{p3.addr}, p3, b.m3p},
			{"redlock.direct", "redlock5", "node-redlock → 3 masters", b.m3, nil, b.m3p},
			{"noderedis.proxy", "noderedis", "node-redis → proxy", []string{p3.addr}, p3, b.m3p},
			{"noderedis.single", "noderedis", "node-redis → 1 Redis", []string{single.addr}, nil, []*proc{single}},
		}
		var line string
		for rep := range o.reps {
			for _, nc := range confs {
				if err := flushAll(b.allRedis...); err != nil {
					return err
				}
				snap0 := snapCPU(nc.redis, nc.proxy, false)
				win := make(chan windowResult, 1)
				res, err := runNode(nc.mode, nc.addrs, o.clients, o.duration, func(pid int, at time.Time) {
					go func() {
						// The timed part starts once node is up and every
						// loop has had its warm-up pair (loadgen.mjs: 0.5 s).
						from, to := middle(at.Add(nodeWarmUp), o.duration)
						w, err := measureWindow(pid, nc.proxy, nc.redis, from, to)
						win <- windowResult{w, err}
					}()
				})
				line = res.line
				if err != nil {
					r.problem("%s, repetition %d: %v", nc.what, rep+1, err)
					continue
				}
				r.recordCPU("node."+nc.key, snap0, snapCPU(nc.redis, nc.proxy, false), res.cpu, res.Pairs)
				r.takeWindow("node."+nc.key, win, nc.what, rep)
				progress("%-26s rep %d: %8.0f pairs/s  p50 %6.2f ms  p99 %6.2f ms  lock errors %d  release errors %d",
					nc.what, rep+1, res.rate(), res.P50, res.P99, res.LockErrors, res.UnlockErrors)
				r.add("node."+nc.key+".rate", res.rate())
				r.add("node."+nc.key+".p99", res.P99)
				if res.LockErrors+res.UnlockErrors > 0 {
					r.problem("%s, repetition %d: %d failed locks, %d failed releases; e.g. %s", nc.what, rep+1, res.LockErrors, res.UnlockErrors, res.FirstError)
				}
			}
		}
		r.notes = append(r.notes, fmt.Sprintf("Node: `%s` (compat/node/loadgen.mjs) per target: %d concurrent lock/release loops, each on its own key, all on one client per address (one connection each); node-redlock 5.0.0-beta.2 over ioredis 5.9.3 (retryCount 0, TTL 8 s), node-redis 4.7.0 (RESP2); %v per run after a warm-up pair per loop. CPU of the whole machine: /proc/stat over the whole run, over the pairs that succeeded.", portRE.ReplaceAllString(line, "<port>"), o.clients, o.duration))
	}
	return nil
}

// pipelinedRow measures row 7: one connection, many acquires pipelined,
// against as many connections with one each.
func (b *bench) pipelinedRow() error {
	o, r, c, p3 := b.o, b.r, b.clients, b.p3
	pilot, _, _, err := runRedisBenchmark(p3.addr, 20000, b.rbTimeout, "-c", c, "-P", "1", "-r", "100000", "SET", "key:__rand_int__", "val", "NX", "PX", "10000")
	slowest := 10000.0
	for _, v := range pilot {
		slowest = v.rps
	}
	if err != nil {
		r.problem("row 7 pilot: %v", err)
	}
	n := max(20000, min(int(slowest*o.duration.Seconds()), 5_000_000))
	var lines []string
	for rep := range o.reps {
		for _, conf := range []struct {
			key  string
			args []string
		}{{"one", []string{"-c", "1", "-P", c}}, {"many", []string{"-c", c, "-P", "1"}}} {
			if err := flushAll(b.allRedis...); err != nil {
				return err
			}
			snap0 := snapCPU(b.m3p, p3, false)
			args := append(conf.args, "-r", "100000", "SET", "key:__rand_int__", "val", "NX", "PX", "10000")
			res, line, gen, err := runRedisBenchmark(p3.addr, n, b.rbTimeout, args...)
			if rep == 0 {
				lines = append(lines, portRE.ReplaceAllString(line, "-h 127.0.0.1 -p <port>"))
			}
			if err != nil {
				r.problem("row 7 (%s), repetition %d: %v", conf.key, rep+1, err)
				continue
			}
			r.recordCPU("mux."+conf.key, snap0, snapCPU(b.m3p, p3, false), gen, n)
			for _, v := range res {
				r.add("mux."+conf.key+".rps", v.rps)
				progress("acquire through the proxy, %-4s rep %d: %.0f/s p99 %.2f ms", conf.key, rep+1, v.rps, v.p99ms)
			}
		}
	}
	if len(lines) == 2 {
		r.notes = append(r.notes, fmt.Sprintf("row 7: `%s` and `%s` against the proxy (3 masters), same -n", lines[0], lines[1]))
	}
	return nil
}

// passthroughRow measures row 4: passthrough.
func (b *bench) passthroughRow() {
	r, c, pp, twem, single := b.r, b.clients, b.pp, b.twem, b.single
	// Redis direct too: every command passed through still runs on that
	// one Redis, so what it serves alone bounds any proxy in front of it.
	got, ok := b.sized("passthrough -P 16", "pt16", []*proc{pp, twem, single}, []string{"proxy", "twemproxy", "direct"}, 2, []string{single.addr}, nil,
		"-c", c, "-P", "16", "-t", "get,set")
	if ok {
		r.addRates("pt16", got, false)
	}
	got, ok = b.sized("passthrough -P 1", "pt1", []*proc{pp, single, twem}, []string{"proxy", "direct", "twemproxy"}, 2, []string{single.addr}, nil,
		"-c", c, "-P", "1", "-t", "get,set")
	if ok {
		r.addRates("pt1", got, true)
	}
	r.notes = append(r.notes, "passthrough proxy: lock_keys = [\"lock:*\"], backend = the single Redis, so redis-benchmark's key:… keys pass through; twemproxy: nutcracker with one server, server_connections 1 (its default), preconnect")
}

// dataRow measures row 9: data commands in mixed mode.
func (b *bench) dataRow() {
	r, c, pm, pp, twem, single := b.r, b.clients, b.pm, b.pp, b.twem, b.single
	// -r 1000: the SET test writes every one of 1,000 keys many times
	// over before the GET test reads them (n ≥ 20,000), so every GET
	// finds its key on the backend, as a cache's or a counter's reads
	// mostly do; the keys differ, so a connection's pipelined commands
	// rarely share one.
	for _, pl := range []string{"16", "1"} {
		key := "data" + pl
		got, ok := b.sized("data -P "+pl, key, []*proc{pm, pp, twem, single}, []string{"mixed", "prefix", "twemproxy", "direct"}, 3, []string{single.addr}, nil,
			"-c", c, "-P", pl, "-r", "1000", "-t", "set,get,incr")
		if ok {
			r.addRates(key, got, true)
		}
	}
	r.notes = append(r.notes, "row 9: mixed proxy: backend = the single Redis, lock_keys = [\"*\"] (as scripts/run.sh starts it: every key may be a lock; GET asks the backend first, SET without NX and INCR pass through); prefix proxy: the same backend with lock_keys = [\"lock:*\"], so redis-benchmark's key:… and counter:… keys are no lock keys; twemproxy and Redis direct as in row 4")
}

// checkProxiesAlive reports every long-running proxy that is no longer up.
func (b *bench) checkProxiesAlive() {
	for _, p := range b.proxies {
		if !p.alive() {
			b.r.problem("%s exited during the run: %v\n%s", p.name, p.exitErr, p.logTail(20))
		}
	}
}

// rssRow is row 5 (idle clients) or row 8 (idle subscribers).
type rssRow struct {
	subscribers bool
	proc, label string // the proxy's name, the row's in messages
	idle, conns string // what the clients are, and those that failed
	key         string // of the results
	note        string // the row's note, of o.conns
}

var (
	memoryRow = rssRow{false, "proxy-rss", "RSS", "clients", "connections", "rss",
		"RSS: VmRSS of a fresh proxy (3 masters) from /proc/PID/status, 1 s after start, then 2 s after %d clients connected, each sent one PING and went idle"}
	subscribersRow = rssRow{true, "proxy-subs", "subscribers' RSS", "subscribers", "", "subs",
		"row 8: as RSS, but each of the %d clients sent SUBSCRIBE idle and stayed subscribed (each has a backend connection of its own)"}
)

// rss measures the proxy's memory with o.conns idle clients of the row, a
// fresh proxy per repetition.
func (b *bench) rss(row rssRow) {
	o, r := b.o, b.r
	failed, failedOf := "failed", row.idle+" failed"
	if row.conns != "" {
		failed, failedOf = row.conns+" failed", row.conns+" failed"
	}
	for rep := range o.reps {
		res, err := measureRSS(b.ps, fmt.Sprintf("%s-%d", row.proc, rep+1), b.binary, b.m3, o.conns, row.subscribers)
		if err != nil {
			r.problem("%s, repetition %d: %v", row.label, rep+1, err)
			continue
		}
		progress("%s rep %d: %.1f MB before, %.1f MB with %d idle %s (VmHWM %.1f MB), %d %s",
			row.label, rep+1, mb(res.beforeKB), mb(res.withKB), res.opened, row.idle, mb(res.hwmKB), res.failures, failed)
		if res.failures > 0 {
			r.problem("%s, repetition %d: %d of %d %s; first: %s", row.label, rep+1, res.failures, o.conns, failedOf, res.firstErr)
		}
		r.add(row.key+".before", mb(res.beforeKB))
		r.add(row.key+".with", mb(res.withKB))
		if !row.subscribers {
			r.add(row.key+".opened", float64(res.opened))
		}
	}
	r.notes = append(r.notes, fmt.Sprintf(row.note, o.conns))
}

// proxyWarnings reports what the proxies logged at warn and above.
func (b *bench) proxyWarnings() {
	for _, p := range b.ps.all {
		if !strings.HasPrefix(p.name, "proxy") {
			continue
		}
		// The passthrough proxy (lock_keys = ["lock:*"]) shares its masters
		// with proxies that treat every key as a lock key, on purpose: each
		// rightly warns of the other's settings, which is no problem here.
		var lines []string
		for _, l := range readLines(p.logPath) {
			if !strings.Contains(l, "also serves a client with other settings") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			show := lines
			if len(show) > 5 {
				show = show[:5]
			}
			b.r.problem("%s logged %d lines at warn or above; first: %s", p.name, len(lines), strings.Join(show, " | "))
		}
	}
}

var portRE = regexp.MustCompile(`-h 127\.0\.0\.1 -p [0-9]+`)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mb(kb int64) float64        { return float64(kb) * 1024 / 1e6 }

type machine struct {
	cpus       int
	model      string
	goVersion  string
	kernel     string
	redis      string
	nutcracker string
	loadStart  string
}

func machineInfo() machine {
	m := machine{cpus: runtime.NumCPU(), goVersion: runtime.Version()}
	for _, l := range readLines("/proc/cpuinfo") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			m.model = strings.TrimSpace(v)
			break
		}
	}
	if b, err := exec.Command("go", "version").Output(); err == nil {
		m.goVersion = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("redis-server", "--version").Output(); err == nil {
		m.redis = strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("nutcracker", "--version").CombinedOutput(); err == nil {
		m.nutcracker = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	}
	m.loadStart = loadavg()
	return m
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// command is how this run was started: BENCH_COMMAND when a script sets
// it, else the go run line.
func command() string {
	if c := os.Getenv("BENCH_COMMAND"); c != "" {
		return c
	}
	return strings.TrimSpace("go run ./bench " + shellJoin(os.Args[1:]))
}
