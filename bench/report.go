package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// row is one line of the table.
type row struct {
	what            string
	proxy, baseline string
	ratio           float64 // proxy / baseline; NaN when not measured
	target          string
	min             float64 // target: ratio ≥ min
	maxRatio        float64 // target: ratio ≤ maxRatio
	maxAbsolute     float64 // target: absolute ≤ maxAbsolute
	absolute        float64
}

func (w row) verdict() string {
	switch {
	case w.target == "" || w.target == "—":
		return "—"
	case w.min > 0 && !math.IsNaN(w.ratio):
		return w.target + yesNo(w.ratio >= w.min)
	case w.maxRatio > 0 && !math.IsNaN(w.ratio):
		return w.target + yesNo(w.ratio <= w.maxRatio)
	case w.maxAbsolute > 0 && !math.IsNaN(w.absolute):
		return w.target + yesNo(w.absolute <= w.maxAbsolute)
	}
	return w.target + " (not measured)"
}

func yesNo(ok bool) string {
	if ok {
		return " (met)"
	}
	return " (not met)"
}

func micros(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	if v < 10 {
		return fmt.Sprintf("%.2f µs", v)
	}
	return fmt.Sprintf("%.1f µs", v)
}

func rate(v float64) string {
	if v == 0 || math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%s/s", thousands(v))
}

func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	return b.String()
}

func count(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return thousands(v)
}

func millis(v float64) string {
	if v == 0 || math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f ms", v)
}

func ratioOf(r *results, a, b string) float64 {
	if !r.has(a) || !r.has(b) || r.med(b) == 0 {
		return math.NaN()
	}
	return r.med(a) / r.med(b)
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", v)
}

func orNaN(r *results, k string) float64 {
	if !r.has(k) {
		return math.NaN()
	}
	return r.med(k)
}

func report(out io.Writer, o options, r *results, m machine, started time.Time) {
	t := &table{o: o, r: r}
	if o.rows["1"] {
		t.goRedsyncRows()
	}
	if o.rows["2"] {
		t.fiveMastersRows()
	}
	if r.has("rs.p3.cpu") && r.has("rs.p5.cpu") {
		t.proxyCPURow()
	}
	if o.rows["3"] {
		t.acquireRows()
	}
	if o.rows["4"] {
		t.passthroughRows()
	}
	if o.rows["6"] {
		t.nodeRows()
	}
	if o.rows["7"] {
		t.pipelinedRows()
	}
	if o.rows["9"] {
		t.dataRows()
	}
	if o.rows["10"] {
		t.clusterRows()
	}
	if o.rows["8"] {
		t.subscribersRow()
	}
	if o.rows["5"] {
		t.memoryRow()
	}
	writeReport(out, o, r, m, started, t.rows)
}

// table collects the rows of the report's table.
type table struct {
	o    options
	r    *results
	rows []row
}

func (t *table) add(w row) { t.rows = append(t.rows, w) }

// compare adds a row of the medians of keys a (the proxy column) and b
// (the baseline), shown by show, their ratio and the target, met by a ratio
// of at least min (0: no such bound).
func (t *table) compare(what string, show func(float64) string, a, b, target string, min float64) {
	t.add(row{what: what, proxy: show(orNaN(t.r, a)), baseline: show(orNaN(t.r, b)), ratio: ratioOf(t.r, a, b), target: target, min: min})
}

// rsRate adds the go-redsync rows of pairs/s and p99 latency of runs a
// against runs b.
func (t *table) rsRate(what, a, b, target string, min float64) {
	r, add := t.r, t.add
	if !r.has("rs."+a+".rate") && !r.has("rs."+b+".rate") {
		return
	}
	add(row{what: what + ": lock+unlock pairs/s", proxy: rate(orNaN(r, "rs."+a+".rate")), baseline: rate(orNaN(r, "rs."+b+".rate")),
		ratio: ratioOf(r, "rs."+a+".rate", "rs."+b+".rate"), target: target, min: min})
	t.compare(what+": p99 acquire latency (ratio < 1: proxy faster)", millis, "rs."+a+".p99", "rs."+b+".p99", "—", 0)
}

// machineCPU adds the row of the whole machine's CPU per pair, when
// measured.
func (t *table) machineCPU(what, a, b, target string, maxRatio float64) {
	r, add := t.r, t.add
	if r.has(a+".machine") || r.has(b+".machine") {
		add(row{what: what + ": CPU of the whole machine per lock+unlock pair, whole run (warm-up, start-up and anything else the machine ran included), µs",
			proxy: micros(orNaN(r, a+".machine")), baseline: micros(orNaN(r, b+".machine")),
			ratio: ratioOf(r, a+".machine", b+".machine"), target: target, maxRatio: maxRatio})
	}
}

// processCPU adds the rows of the CPU of the processes themselves over a
// window in the middle of each run (window.go), the target's measure; and
// what each of them took.
func (t *table) processCPU(what, a, b, target string, maxRatio float64) {
	r, add := t.r, t.add
	if !r.has(a+".win.sum") && !r.has(b+".win.sum") {
		return
	}
	add(row{what: what + ": CPU of the clients, masters and proxy processes per lock+unlock pair, mid-run window, µs",
		proxy: micros(orNaN(r, a+".win.sum")), baseline: micros(orNaN(r, b+".win.sum")),
		ratio: ratioOf(r, a+".win.sum", b+".win.sum"), target: target, maxRatio: maxRatio})
	// viaProxy: k's runs went through a proxy (a direct run records 0).
	viaProxy := func(k string) bool { return r.has(k+".win.proxy") && r.med(k+".win.proxy") > 0 }
	parts := func(k string) string {
		p := "—"
		if viaProxy(k) {
			p = micros(r.med(k + ".win.proxy"))
		}
		return micros(orNaN(r, k+".win.gen")) + " / " + micros(orNaN(r, k+".win.servers")) + " / " + p
	}
	add(row{what: what + ": … of which clients / Redis servers / proxy, µs", proxy: parts(a), baseline: parts(b), ratio: math.NaN(), target: "—"})
	if !r.has(a + ".win.proxy.sys") {
		return
	}
	kernel := func(k string) string {
		p := "—"
		if viaProxy(k) {
			p = micros(orNaN(r, k+".win.proxy.sys"))
		}
		return micros(orNaN(r, k+".win.servers.sys")) + " / " + p
	}
	add(row{what: what + ": … of which in the kernel (system time: reads, writes and, on loopback, their delivery to the other end): Redis servers / proxy, µs",
		proxy: kernel(a), baseline: kernel(b), ratio: math.NaN(), target: "—"})
	if viaProxy(b) {
		return // the baseline goes through a proxy too: no bound against it
	}
	t.compare(what+": … bound: clients + Redis servers + the proxy's system time, as if the proxy's own code cost nothing, vs the direct total, µs", micros, a+".win.floor", b+".win.sum", "—", 0)
}

// goRedsyncRows adds rows 1 a/b and 1 a/c.
func (t *table) goRedsyncRows() {
	o, r, add := t.o, t.r, t.add
	t.rsRate(fmt.Sprintf("1 a/b. go-redsync, %d clients: via proxy (3 masters) vs go-redsync → same 3 masters", o.clients), "p3", "m3", "≥ 2×", 2)
	t.processCPU(fmt.Sprintf("1 a/b. go-redsync, %d clients: via proxy (3 masters) vs go-redsync → same 3 masters", o.clients), "rs.p3", "rs.m3", "≤ 0.4×", 0.4)
	t.machineCPU(fmt.Sprintf("1 a/b. go-redsync, %d clients: via proxy (3 masters) vs go-redsync → same 3 masters", o.clients), "rs.p3", "rs.m3", "—", 0)
	t.rsRate(fmt.Sprintf("1 a/c. go-redsync, %d clients: via proxy (3 masters) vs go-redsync → 1 Redis", o.clients), "p3", "single", "≥ 0.8×", 0.8)
	if r.has("rs.p3.win.proxy.sys") && r.has("rs.single.win.servers.sys") {
		add(row{what: fmt.Sprintf("1 a/c. go-redsync, %d clients: system time per lock+unlock pair, mid-run window: the proxy vs the one Redis serving the same clients directly (a read and a write per command, no quorum), µs", o.clients),
			proxy: micros(r.med("rs.p3.win.proxy.sys")), baseline: micros(r.med("rs.single.win.servers.sys")),
			ratio: ratioOf(r, "rs.p3.win.proxy.sys", "rs.single.win.servers.sys"), target: "—"})
	}
}

// fiveMastersRows adds row 2: 5 masters vs 3.
func (t *table) fiveMastersRows() {
	o := t.o
	t.rsRate(fmt.Sprintf("2. go-redsync, %d clients: via proxy, 5 masters vs 3 masters", o.clients), "p5", "p3", "≥ 0.6×", 0.6)
	t.processCPU(fmt.Sprintf("2. go-redsync, %d clients: via proxy, 5 masters vs 3 masters", o.clients), "rs.p5", "rs.p3", "—", 0)
}

// proxyCPURow adds row 1/2: the proxy's CPU per lock operation, 5 masters
// vs 3.
func (t *table) proxyCPURow() {
	t.compare("1/2. proxy CPU (user+system) per lock operation during the go-redsync runs, µs: 5 masters vs 3 masters", micros, "rs.p5.cpu", "rs.p3.cpu", "—", 0)
}

// acquireRows adds row 3: acquires through the proxy vs one Redis.
func (t *table) acquireRows() {
	r, add := t.r, t.add
	t.compare("3. redis-benchmark SET key:__rand_int__ val NX PX 10000, acquires/s: proxy (3 masters) vs 1 Redis", rate, "acq.proxy.rps", "acq.single.rps", "≥ 0.5×", 0.5)
	t.compare("3. … distinct keys held after a run (DBSIZE; proxy: middle master); ratio ≈ 1: same grants as one Redis", count, "acq.proxy.keys", "acq.single.keys", "—", 0)
	t.compare("3. … same command from a Go client that counts errors: OK-or-nil replies/s", rate, "acqgo.proxy.rps", "acqgo.single.rps", "≥ 0.5×", 0.5)
	add(row{what: "3. … Go client: error replies per run (e.g. NOQUORUM)",
		proxy: count(orNaN(r, "acqgo.proxy.errors")), baseline: count(orNaN(r, "acqgo.single.errors")), ratio: math.NaN(), target: "—"})
	t.compare("3. … CPU of redis-benchmark, the Redis servers and the proxy per acquire, whole run, µs: proxy (3 masters) vs 1 Redis", micros, "acq.proxy.all", "acq.single.all", "—", 0)
	t.compare("3. … p99 latency (redis-benchmark)", millis, "acq.proxy.p99", "acq.single.p99", "—", 0)
	t.compare("3. … CPU (user+system) per acquire, µs: proxy process vs the one Redis process (redis-benchmark runs)", micros, "acq.proxy.cpu", "acq.single.cpu", "—", 0)
	t.compare("3. … LOCK.ACQUIRE key:__rand_int__ 10000 (fenced) vs that SET NX, both through the proxy: acquires/s", rate, "fenced.proxy.rps", "acq.proxy.rps", "—", 0)
	t.compare("3. … CPU (user+system) per acquire, µs: proxy process, LOCK.ACQUIRE vs that SET NX", micros, "fenced.proxy.cpu", "acq.proxy.cpu", "—", 0)
}

// passthroughRows adds row 4: passthrough vs twemproxy and Redis direct.
func (t *table) passthroughRows() {
	for _, c := range []string{"SET", "GET"} {
		t.compare("4. passthrough "+c+" -P 16, ops/s: proxy vs twemproxy (same Redis)", rate, "pt16.proxy."+c, "pt16.twemproxy."+c, "≥ 1.5×", 1.5)
	}
	for _, c := range []string{"SET", "GET"} {
		t.compare("4. passthrough "+c+" -P 16, ops/s: twemproxy (in the proxy column) vs Redis direct: what a proxy in front of this one Redis can reach", rate, "pt16.twemproxy."+c, "pt16.direct."+c, "—", 0)
	}
	t.compare("4. passthrough -P 16, CPU (user+system) per command, µs: proxy vs twemproxy process", micros, "pt16.proxy.cpu", "pt16.twemproxy.cpu", "—", 0)
	for _, c := range []string{"SET", "GET"} {
		t.compare("4. passthrough "+c+" -P 1, ops/s: proxy vs Redis direct", rate, "pt1.proxy."+c, "pt1.direct."+c, "≥ 0.9×", 0.9)
	}
	for _, c := range []string{"SET", "GET"} {
		t.compare("4. passthrough "+c+" -P 1, ops/s: proxy vs twemproxy", rate, "pt1.proxy."+c, "pt1.twemproxy."+c, "—", 0)
	}
	t.compare("4. passthrough -P 1, CPU (user+system) per command, µs: proxy vs twemproxy process", micros, "pt1.proxy.cpu", "pt1.twemproxy.cpu", "—", 0)
}

// nodeRows adds row 6: Node clients on one connection.
func (t *table) nodeRows() {
	o := t.o
	what := fmt.Sprintf("6 a. node-redlock 5 + ioredis, %d lock/release loops on one connection: via proxy (3 masters) vs node-redlock → same 3 masters", o.clients)
	t.compare(what+": lock+release pairs/s", rate, "node.redlock.proxy.rate", "node.redlock.direct.rate", "≥ 1.5×", 1.5)
	t.compare(what+": p99 lock+release latency (ratio < 1: proxy faster)", millis, "node.redlock.proxy.p99", "node.redlock.direct.p99", "—", 0)
	t.processCPU(what, "node.redlock.proxy", "node.redlock.direct", "≤ 0.4×", 0.4)
	t.machineCPU(what, "node.redlock.proxy", "node.redlock.direct", "—", 0)
	what = fmt.Sprintf("6 b. node-redis 4, %d lock/release loops (SET NX PX, unlock script) on one connection: via proxy (3 masters) vs node-redis → 1 Redis", o.clients)
	t.compare(what+": lock+release pairs/s", rate, "node.noderedis.proxy.rate", "node.noderedis.single.rate", "—", 0)
	t.processCPU(what, "node.noderedis.proxy", "node.noderedis.single", "—", 0)
	t.machineCPU(what, "node.noderedis.proxy", "node.noderedis.single", "—", 0)
}

// pipelinedRows adds row 7: acquires pipelined on one connection vs one each on many.
func (t *table) pipelinedRows() {
	o := t.o
	t.compare(fmt.Sprintf("7. redis-benchmark SET key:__rand_int__ val NX PX 10000 through the proxy, acquires/s: one connection, -c 1 -P %d, vs %d connections, -c %d -P 1", o.clients, o.clients, o.clients), rate, "mux.one.rps", "mux.many.rps", "≥ 1.0×", 1.0)
	t.compare("7. … CPU of redis-benchmark, the masters and the proxy per acquire, whole run, µs: -c 1 -P vs -c -P 1", micros, "mux.one.all", "mux.many.all", "—", 0)
	t.compare("7. … CPU of the whole machine per acquire, µs: -c 1 -P vs -c -P 1", micros, "mux.one.machine", "mux.many.machine", "—", 0)
}

// dataRows adds row 9: data commands in mixed mode.
func (t *table) dataRows() {
	r, add := t.r, t.add
	for _, d := range []struct {
		key, pl, base, baseName, target string
		min                             float64
	}{
		{"data16", "16", "twemproxy", "twemproxy", "≥ 1.5×", 1.5},
		{"data1", "1", "direct", "Redis direct", "≥ 0.9×", 0.9},
	} {
		k := func(name, test string) string { return d.key + "." + name + "." + test }
		for _, c := range dataTests {
			add(row{what: "9. data " + c + " -P " + d.pl + ", ops/s: mixed proxy (own backend, lock_keys [\"*\"]) vs " + d.baseName,
				proxy: rate(orNaN(r, k("mixed", c))), baseline: rate(orNaN(r, k(d.base, c))),
				ratio: ratioOf(r, k("mixed", c), k(d.base, c)), target: d.target, min: d.min})
		}
		mixed, prefix, base := allTests(r, d.key+".mixed"), allTests(r, d.key+".prefix"), allTests(r, d.key+"."+d.base)
		add(row{what: "9. data SET+GET+INCR -P " + d.pl + ", ops/s, as many of each: mixed proxy vs " + d.baseName,
			proxy: rate(mixed), baseline: rate(base), ratio: mixed / base, target: d.target, min: d.min})
		add(row{what: "9. data SET+GET+INCR -P " + d.pl + ", ops/s: prefix proxy (own backend, lock_keys [\"lock:*\"]) vs " + d.baseName,
			proxy: rate(prefix), baseline: rate(base), ratio: prefix / base, target: "—"})
		add(row{what: "9. data SET+GET+INCR -P " + d.pl + ", ops/s: mixed proxy vs prefix proxy",
			proxy: rate(mixed), baseline: rate(prefix), ratio: mixed / prefix, target: "—"})
		t.compare("9. data -P "+d.pl+", CPU (user+system) per command, µs: mixed proxy vs prefix proxy process", micros, d.key+".mixed.cpu", d.key+".prefix.cpu", "—", 0)
	}
}

// clusterRows adds row 10: Redis Clusters as voters and as the backend.
func (t *table) clusterRows() {
	o, r, add := t.o, t.r, t.add
	for _, sh := range row10Shards[1:] {
		name := row10Name(sh)
		k := func(m string) string { return "cl." + name + "." + m }
		what := fmt.Sprintf("10 a. 3 voters of %d shard(s) each (clusters) vs 3 plain masters", sh)
		t.compare(what+": redis-benchmark SET key:__rand_int__ val NX PX 10000, acquires/s", rate, k("rps"), "cl.plain.rps", "—", 0)
		t.compare(what+": CPU (user+system) of the proxy process per acquire, µs", micros, k("cpu"), "cl.plain.cpu", "—", 0)
		t.compare(what+": CPU of all the voters' Redis nodes per acquire, µs", micros, k("servers"), "cl.plain.servers", "—", 0)
		t.compare(what+": p99 latency (redis-benchmark)", millis, k("p99"), "cl.plain.p99", "—", 0)
		t.compare(what+": keys on the middle voter after a run (all its shards); ratio ≈ 1: the same grants", count, k("keys"), "cl.plain.keys", "—", 0)
		if r.has(k("spread")) {
			add(row{what: what + ": … keys on the middle voter's emptiest shard / its fullest (1: spread evenly)",
				proxy: fmt.Sprintf("%.2f", r.med(k("spread"))), baseline: "—", ratio: math.NaN(), target: "—"})
		}
	}
	t.compare("10 a. proxy CPU per acquire, µs: voters of 3 shards vs of 1 shard (flat: ≈ 1)", micros, "cl.c3.cpu", "cl.c1.cpu", "—", 0)
	for _, pl := range []string{"16", "1"} {
		key := "cb" + pl
		for _, c := range []string{"SET", "GET"} {
			t.compare("10 b. data "+c+" -P "+pl+", ops/s: proxy (backend a 3-shard cluster) vs redis-benchmark --cluster straight to the cluster", rate, key+".proxy."+c, key+".direct."+c, "—", 0)
		}
		t.compare("10 b. data -P "+pl+": CPU of redis-benchmark, the cluster's nodes and the proxy per command, µs: through the proxy vs straight to the cluster", micros, key+".proxy.all", key+".direct.all", "—", 0)
		add(row{what: "10 b. data -P " + pl + ": CPU of the proxy process per command (proxy column), µs",
			proxy: micros(orNaN(r, key+".proxy.cpu")), baseline: "—", ratio: math.NaN(), target: "—"})
	}
	t.compare(fmt.Sprintf("10 b. go-redis, %d goroutines, SET and GET in turn, ops/s: Client → proxy (backend a 3-shard cluster) vs ClusterClient → the cluster", o.clients), rate, "cbgo.proxy.rate", "cbgo.direct.rate", "—", 0)
	t.compare("10 b. … CPU of the clients, the cluster's nodes and the proxy per command, µs", micros, "cbgo.proxy.all", "cbgo.direct.all", "—", 0)
	add(row{what: "10 b. … CPU of the proxy process per command (proxy column), µs; error replies per run",
		proxy: micros(orNaN(r, "cbgo.proxy.cpu")) + "; " + count(orNaN(r, "cbgo.proxy.errors")), baseline: count(orNaN(r, "cbgo.direct.errors")), ratio: math.NaN(), target: "—"})
}

// subscribersRow adds row 8: memory with idle subscribers.
func (t *table) subscribersRow() {
	o := t.o
	t.compare(fmt.Sprintf("8. proxy RSS: with %d idle subscribers (proxy) vs before they connect (baseline)", o.conns), fmtMB, "subs.with", "subs.before", "—", 0)
}

// memoryRow adds row 5: memory with idle clients.
func (t *table) memoryRow() {
	o, r, add := t.o, t.r, t.add
	with := orNaN(r, "rss.with")
	add(row{what: fmt.Sprintf("5. proxy RSS: with %d idle clients (proxy) vs before they connect (baseline)", o.conns),
		proxy: fmtMB(with), baseline: fmtMB(orNaN(r, "rss.before")), ratio: ratioOf(r, "rss.with", "rss.before"),
		target: "≤ 100 MB with clients", maxAbsolute: 100, absolute: with})
}

// writeReport prints the table of rows, the CPU budgets, how each row was
// measured, every repetition's values and the problems seen.
func writeReport(out io.Writer, o options, r *results, m machine, started time.Time, rows []row) {
	fmt.Fprintf(out, "## redlock-proxy benchmark\n\n")
	fmt.Fprintf(out, "- machine: %d CPUs (nproc), %s; %s\n", m.cpus, m.model, m.kernel)
	fmt.Fprintf(out, "- %s; %s; %s\n", m.goVersion, m.redis, m.nutcracker)
	fmt.Fprintf(out, "- command: `%s`\n", command())
	procs := fmt.Sprint(o.procs)
	if o.procs == 0 {
		procs = "0 (Go's default: one per CPU)"
	}
	fmt.Fprintf(out, "- every proxy ran with `proxy.procs = %s` (threads running its Go code at once)\n", procs)
	fmt.Fprintf(out, "- load average (1/5/15 min) at start: %s, at end: %s; wall time %v\n", m.loadStart, loadavg(), time.Since(started).Round(time.Second))
	fmt.Fprintf(out, "- values are medians of %d repetitions (targets alternate within each repetition); ratio = median(proxy) / median(baseline). Shared machines are noisy: read ratios, not absolute numbers; nothing here fails on a timing.\n\n", o.reps)
	fmt.Fprintln(out, "| measurement | proxy | baseline | ratio | target |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	for _, w := range rows {
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s |\n", w.what, w.proxy, w.baseline, fmtRatio(w.ratio), w.verdict())
	}

	writeBudgets(out, budgets(o, r, m.cpus), m.cpus)
	fmt.Fprintf(out, "\nHow each was measured:\n\n")
	for _, n := range r.notes {
		fmt.Fprintf(out, "- %s\n", n)
	}
	fmt.Fprintf(out, "\nEvery repetition:\n\n")
	for _, k := range sortedKeys(r.vals) {
		vs := make([]string, len(r.vals[k]))
		for i, v := range r.vals[k] {
			vs[i] = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(out, "- %s: %s\n", k, strings.Join(vs, ", "))
	}
	fmt.Fprintf(out, "\nProblems seen:\n\n")
	if len(r.problems) == 0 {
		fmt.Fprintln(out, "- none (no client errors, no proxy log lines at warn or above, every proxy stayed up)")
	}
	for _, p := range r.problems {
		fmt.Fprintf(out, "- %s\n", strings.ReplaceAll(p, "\n", " ⏎ "))
	}
}

// dataTests are row 9's redis-benchmark tests.
var dataTests = []string{"SET", "GET", "INCR"}

// allTests is the rate of a row 9 run of SET, GET and INCR, the same
// number of each: 3n commands over the time the three took (medians of
// each test's rate); NaN unless all three were measured.
func allTests(r *results, key string) float64 {
	sum := 0.0
	for _, t := range dataTests {
		v := orNaN(r, key+"."+t)
		if math.IsNaN(v) || v == 0 {
			return math.NaN()
		}
		sum += 1 / v
	}
	return float64(len(dataTests)) / sum
}

func fmtMB(v float64) string {
	if v == 0 || math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MB", v)
}

func sortedKeys(m map[string][]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
