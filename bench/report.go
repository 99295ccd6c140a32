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
	var rows []row
	add := func(w row) { rows = append(rows, w) }
	rsRate := func(what, a, b, target string, min float64) {
		if !r.has("rs."+a+".rate") && !r.has("rs."+b+".rate") {
			return
		}
		add(row{what: what + ": lock+unlock pairs/s", proxy: rate(orNaN(r, "rs."+a+".rate")), baseline: rate(orNaN(r, "rs."+b+".rate")),
			ratio: ratioOf(r, "rs."+a+".rate", "rs."+b+".rate"), target: target, min: min})
		add(row{what: what + ": p99 acquire latency (ratio < 1: proxy faster)", proxy: millis(orNaN(r, "rs."+a+".p99")), baseline: millis(orNaN(r, "rs."+b+".p99")),
			ratio: ratioOf(r, "rs."+a+".p99", "rs."+b+".p99"), target: "—"})
	}
	machineCPU := func(what, a, b, target string, maxRatio float64) {
		if r.has(a+".machine") || r.has(b+".machine") {
			add(row{what: what + ": CPU of the whole machine per lock+unlock pair, whole run (warm-up, start-up and anything else the machine ran included), µs",
				proxy: micros(orNaN(r, a+".machine")), baseline: micros(orNaN(r, b+".machine")),
				ratio: ratioOf(r, a+".machine", b+".machine"), target: target, maxRatio: maxRatio})
		}
	}
	// processCPU: the CPU of the processes themselves over a window in the
	// middle of each run (window.go), the target's measure; and what each
	// of them took.
	processCPU := func(what, a, b, target string, maxRatio float64) {
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
		add(row{what: what + ": … bound: clients + Redis servers + the proxy's system time, as if the proxy's own code cost nothing, vs the direct total, µs",
			proxy: micros(orNaN(r, a+".win.floor")), baseline: micros(orNaN(r, b+".win.sum")),
			ratio: ratioOf(r, a+".win.floor", b+".win.sum"), target: "—"})
	}
	if o.rows["1"] {
		rsRate(fmt.Sprintf("1 a/b. go-redsync, %d clients: via proxy (3 masters) vs go-redsync → same 3 masters", o.clients), "p3", "m3", "≥ 2×", 2)
		processCPU(fmt.Sprintf("1 a/b. go-redsync, %d clients: via proxy (3 masters) vs go-redsync → same 3 masters", o.clients), "rs.p3", "rs.m3", "≤ 0.4×", 0.4)
		machineCPU(fmt.Sprintf("1 a/b. go-redsync, %d clients: via proxy (3 masters) vs go-redsync → same 3 masters", o.clients), "rs.p3", "rs.m3", "—", 0)
		rsRate(fmt.Sprintf("1 a/c. go-redsync, %d clients: via proxy (3 masters) vs go-redsync → 1 Redis", o.clients), "p3", "single", "≥ 0.8×", 0.8)
		if r.has("rs.p3.win.proxy.sys") && r.has("rs.single.win.servers.sys") {
			add(row{what: fmt.Sprintf("1 a/c. go-redsync, %d clients: system time per lock+unlock pair, mid-run window: the proxy vs the one Redis serving the same clients directly (a read and a write per command, no quorum), µs", o.clients),
				proxy: micros(r.med("rs.p3.win.proxy.sys")), baseline: micros(r.med("rs.single.win.servers.sys")),
				ratio: ratioOf(r, "rs.p3.win.proxy.sys", "rs.single.win.servers.sys"), target: "—"})
		}
	}
	if o.rows["2"] {
		rsRate(fmt.Sprintf("2. go-redsync, %d clients: via proxy, 5 masters vs 3 masters", o.clients), "p5", "p3", "≥ 0.6×", 0.6)
		processCPU(fmt.Sprintf("2. go-redsync, %d clients: via proxy, 5 masters vs 3 masters", o.clients), "rs.p5", "rs.p3", "—", 0)
	}
	if r.has("rs.p3.cpu") && r.has("rs.p5.cpu") {
		add(row{what: "1/2. proxy CPU (user+system) per lock operation during the go-redsync runs, µs: 5 masters vs 3 masters",
			proxy: micros(orNaN(r, "rs.p5.cpu")), baseline: micros(orNaN(r, "rs.p3.cpu")),
			ratio: ratioOf(r, "rs.p5.cpu", "rs.p3.cpu"), target: "—"})
	}
	if o.rows["3"] {
		add(row{what: "3. redis-benchmark SET key:__rand_int__ val NX PX 10000, acquires/s: proxy (3 masters) vs 1 Redis",
			proxy: rate(orNaN(r, "acq.proxy.rps")), baseline: rate(orNaN(r, "acq.single.rps")),
			ratio: ratioOf(r, "acq.proxy.rps", "acq.single.rps"), target: "≥ 0.5×", min: 0.5})
		add(row{what: "3. … distinct keys held after a run (DBSIZE; proxy: middle master); ratio ≈ 1: same grants as one Redis",
			proxy: count(orNaN(r, "acq.proxy.keys")), baseline: count(orNaN(r, "acq.single.keys")),
			ratio: ratioOf(r, "acq.proxy.keys", "acq.single.keys"), target: "—"})
		add(row{what: "3. … same command from a Go client that counts errors: OK-or-nil replies/s",
			proxy: rate(orNaN(r, "acqgo.proxy.rps")), baseline: rate(orNaN(r, "acqgo.single.rps")),
			ratio: ratioOf(r, "acqgo.proxy.rps", "acqgo.single.rps"), target: "≥ 0.5×", min: 0.5})
		add(row{what: "3. … Go client: error replies per run (e.g. NOQUORUM)",
			proxy: count(orNaN(r, "acqgo.proxy.errors")), baseline: count(orNaN(r, "acqgo.single.errors")), ratio: math.NaN(), target: "—"})
		add(row{what: "3. … CPU of redis-benchmark, the Redis servers and the proxy per acquire, whole run, µs: proxy (3 masters) vs 1 Redis",
			proxy: micros(orNaN(r, "acq.proxy.all")), baseline: micros(orNaN(r, "acq.single.all")),
			ratio: ratioOf(r, "acq.proxy.all", "acq.single.all"), target: "—"})
		add(row{what: "3. … p99 latency (redis-benchmark)", proxy: millis(orNaN(r, "acq.proxy.p99")), baseline: millis(orNaN(r, "acq.single.p99")),
			ratio: ratioOf(r, "acq.proxy.p99", "acq.single.p99"), target: "—"})
		add(row{what: "3. … CPU (user+system) per acquire, µs: proxy process vs the one Redis process (redis-benchmark runs)",
			proxy: micros(orNaN(r, "acq.proxy.cpu")), baseline: micros(orNaN(r, "acq.single.cpu")),
			ratio: ratioOf(r, "acq.proxy.cpu", "acq.single.cpu"), target: "—"})
		add(row{what: "3. … LOCK.ACQUIRE key:__rand_int__ 10000 (fenced) vs that SET NX, both through the proxy: acquires/s",
			proxy: rate(orNaN(r, "fenced.proxy.rps")), baseline: rate(orNaN(r, "acq.proxy.rps")),
			ratio: ratioOf(r, "fenced.proxy.rps", "acq.proxy.rps"), target: "—"})
		add(row{what: "3. … CPU (user+system) per acquire, µs: proxy process, LOCK.ACQUIRE vs that SET NX",
			proxy: micros(orNaN(r, "fenced.proxy.cpu")), baseline: micros(orNaN(r, "acq.proxy.cpu")),
			ratio: ratioOf(r, "fenced.proxy.cpu", "acq.proxy.cpu"), target: "—"})
	}
	if o.rows["4"] {
		for _, t := range []string{"SET", "GET"} {
			add(row{what: "4. passthrough " + t + " -P 16, ops/s: proxy vs twemproxy (same Redis)",
				proxy: rate(orNaN(r, "pt16.proxy."+t)), baseline: rate(orNaN(r, "pt16.twemproxy."+t)),
				ratio: ratioOf(r, "pt16.proxy."+t, "pt16.twemproxy."+t), target: "≥ 1.5×", min: 1.5})
		}
		for _, t := range []string{"SET", "GET"} {
			add(row{what: "4. passthrough " + t + " -P 16, ops/s: twemproxy (in the proxy column) vs Redis direct: what a proxy in front of this one Redis can reach",
				proxy: rate(orNaN(r, "pt16.twemproxy."+t)), baseline: rate(orNaN(r, "pt16.direct."+t)),
				ratio: ratioOf(r, "pt16.twemproxy."+t, "pt16.direct."+t), target: "—"})
		}
		add(row{what: "4. passthrough -P 16, CPU (user+system) per command, µs: proxy vs twemproxy process",
			proxy: micros(orNaN(r, "pt16.proxy.cpu")), baseline: micros(orNaN(r, "pt16.twemproxy.cpu")),
			ratio: ratioOf(r, "pt16.proxy.cpu", "pt16.twemproxy.cpu"), target: "—"})
		for _, t := range []string{"SET", "GET"} {
			add(row{what: "4. passthrough " + t + " -P 1, ops/s: proxy vs Redis direct",
				proxy: rate(orNaN(r, "pt1.proxy."+t)), baseline: rate(orNaN(r, "pt1.direct."+t)),
				ratio: ratioOf(r, "pt1.proxy."+t, "pt1.direct."+t), target: "≥ 0.9×", min: 0.9})
		}
		for _, t := range []string{"SET", "GET"} {
			add(row{what: "4. passthrough " + t + " -P 1, ops/s: proxy vs twemproxy",
				proxy: rate(orNaN(r, "pt1.proxy."+t)), baseline: rate(orNaN(r, "pt1.twemproxy."+t)),
				ratio: ratioOf(r, "pt1.proxy."+t, "pt1.twemproxy."+t), target: "—"})
		}
		add(row{what: "4. passthrough -P 1, CPU (user+system) per command, µs: proxy vs twemproxy process",
			proxy: micros(orNaN(r, "pt1.proxy.cpu")), baseline: micros(orNaN(r, "pt1.twemproxy.cpu")),
			ratio: ratioOf(r, "pt1.proxy.cpu", "pt1.twemproxy.cpu"), target: "—"})
	}
	if o.rows["6"] {
		what := fmt.Sprintf("6 a. node-redlock 5 + ioredis, %d lock/release loops on one connection: via proxy (3 masters) vs node-redlock → same 3 masters", o.clients)
		add(row{what: what + ": lock+release pairs/s", proxy: rate(orNaN(r, "node.redlock.proxy.rate")), baseline: rate(orNaN(r, "node.redlock.direct.rate")),
			ratio: ratioOf(r, "node.redlock.proxy.rate", "node.redlock.direct.rate"), target: "≥ 1.5×", min: 1.5})
		add(row{what: what + ": p99 lock+release latency (ratio < 1: proxy faster)", proxy: millis(orNaN(r, "node.redlock.proxy.p99")), baseline: millis(orNaN(r, "node.redlock.direct.p99")),
			ratio: ratioOf(r, "node.redlock.proxy.p99", "node.redlock.direct.p99"), target: "—"})
		processCPU(what, "node.redlock.proxy", "node.redlock.direct", "≤ 0.4×", 0.4)
		machineCPU(what, "node.redlock.proxy", "node.redlock.direct", "—", 0)
		what = fmt.Sprintf("6 b. node-redis 4, %d lock/release loops (SET NX PX, unlock script) on one connection: via proxy (3 masters) vs node-redis → 1 Redis", o.clients)
		add(row{what: what + ": lock+release pairs/s", proxy: rate(orNaN(r, "node.noderedis.proxy.rate")), baseline: rate(orNaN(r, "node.noderedis.single.rate")),
			ratio: ratioOf(r, "node.noderedis.proxy.rate", "node.noderedis.single.rate"), target: "—"})
		processCPU(what, "node.noderedis.proxy", "node.noderedis.single", "—", 0)
		machineCPU(what, "node.noderedis.proxy", "node.noderedis.single", "—", 0)
	}
	if o.rows["7"] {
		add(row{what: fmt.Sprintf("7. redis-benchmark SET key:__rand_int__ val NX PX 10000 through the proxy, acquires/s: one connection, -c 1 -P %d, vs %d connections, -c %d -P 1", o.clients, o.clients, o.clients),
			proxy: rate(orNaN(r, "mux.one.rps")), baseline: rate(orNaN(r, "mux.many.rps")),
			ratio: ratioOf(r, "mux.one.rps", "mux.many.rps"), target: "≥ 1.0×", min: 1.0})
		add(row{what: "7. … CPU of redis-benchmark, the masters and the proxy per acquire, whole run, µs: -c 1 -P vs -c -P 1",
			proxy: micros(orNaN(r, "mux.one.all")), baseline: micros(orNaN(r, "mux.many.all")),
			ratio: ratioOf(r, "mux.one.all", "mux.many.all"), target: "—"})
		add(row{what: "7. … CPU of the whole machine per acquire, µs: -c 1 -P vs -c -P 1",
			proxy: micros(orNaN(r, "mux.one.machine")), baseline: micros(orNaN(r, "mux.many.machine")),
			ratio: ratioOf(r, "mux.one.machine", "mux.many.machine"), target: "—"})
	}
	if o.rows["9"] {
		for _, d := range []struct {
			key, pl, base, baseName, target string
			min                             float64
		}{
			{"data16", "16", "twemproxy", "twemproxy", "≥ 1.5×", 1.5},
			{"data1", "1", "direct", "Redis direct", "≥ 0.9×", 0.9},
		} {
			k := func(name, test string) string { return d.key + "." + name + "." + test }
			for _, t := range dataTests {
				add(row{what: "9. data " + t + " -P " + d.pl + ", ops/s: mixed proxy (own backend, lock_keys [\"*\"]) vs " + d.baseName,
					proxy: rate(orNaN(r, k("mixed", t))), baseline: rate(orNaN(r, k(d.base, t))),
					ratio: ratioOf(r, k("mixed", t), k(d.base, t)), target: d.target, min: d.min})
			}
			mixed, prefix, base := allTests(r, d.key+".mixed"), allTests(r, d.key+".prefix"), allTests(r, d.key+"."+d.base)
			add(row{what: "9. data SET+GET+INCR -P " + d.pl + ", ops/s, as many of each: mixed proxy vs " + d.baseName,
				proxy: rate(mixed), baseline: rate(base), ratio: mixed / base, target: d.target, min: d.min})
			add(row{what: "9. data SET+GET+INCR -P " + d.pl + ", ops/s: prefix proxy (own backend, lock_keys [\"lock:*\"]) vs " + d.baseName,
				proxy: rate(prefix), baseline: rate(base), ratio: prefix / base, target: "—"})
			add(row{what: "9. data SET+GET+INCR -P " + d.pl + ", ops/s: mixed proxy vs prefix proxy",
				proxy: rate(mixed), baseline: rate(prefix), ratio: mixed / prefix, target: "—"})
			add(row{what: "9. data -P " + d.pl + ", CPU (user+system) per command, µs: mixed proxy vs prefix proxy process",
				proxy: micros(orNaN(r, d.key+".mixed.cpu")), baseline: micros(orNaN(r, d.key+".prefix.cpu")),
				ratio: ratioOf(r, d.key+".mixed.cpu", d.key+".prefix.cpu"), target: "—"})
		}
	}
	if o.rows["10"] || o.rows["10b"] {
		for _, sh := range row10Shards[1:] {
			if !o.rows["10"] {
				break // 10 b alone
			}
			name := row10Name(sh)
			k := func(m string) string { return "cl." + name + "." + m }
			what := fmt.Sprintf("10 a. 3 voters of %d shard(s) each (clusters) vs 3 plain masters", sh)
			add(row{what: what + ": redis-benchmark SET key:__rand_int__ val NX PX 10000, acquires/s",
				proxy: rate(orNaN(r, k("rps"))), baseline: rate(orNaN(r, "cl.plain.rps")),
				ratio: ratioOf(r, k("rps"), "cl.plain.rps"), target: "—"})
			add(row{what: what + ": CPU (user+system) of the proxy process per acquire, µs",
				proxy: micros(orNaN(r, k("cpu"))), baseline: micros(orNaN(r, "cl.plain.cpu")),
				ratio: ratioOf(r, k("cpu"), "cl.plain.cpu"), target: "—"})
			add(row{what: what + ": CPU of all the voters' Redis nodes per acquire, µs",
				proxy: micros(orNaN(r, k("servers"))), baseline: micros(orNaN(r, "cl.plain.servers")),
				ratio: ratioOf(r, k("servers"), "cl.plain.servers"), target: "—"})
			add(row{what: what + ": p99 latency (redis-benchmark)",
				proxy: millis(orNaN(r, k("p99"))), baseline: millis(orNaN(r, "cl.plain.p99")),
				ratio: ratioOf(r, k("p99"), "cl.plain.p99"), target: "—"})
			add(row{what: what + ": keys on the middle voter after a run (all its shards); ratio ≈ 1: the same grants",
				proxy: count(orNaN(r, k("keys"))), baseline: count(orNaN(r, "cl.plain.keys")),
				ratio: ratioOf(r, k("keys"), "cl.plain.keys"), target: "—"})
			if r.has(k("spread")) {
				add(row{what: what + ": … keys on the middle voter's emptiest shard / its fullest (1: spread evenly)",
					proxy: fmt.Sprintf("%.2f", r.med(k("spread"))), baseline: "—", ratio: math.NaN(), target: "—"})
			}
		}
		if o.rows["10"] {
			add(row{what: "10 a. proxy CPU per acquire, µs: voters of 3 shards vs of 1 shard (flat: ≈ 1)",
				proxy: micros(orNaN(r, "cl.c3.cpu")), baseline: micros(orNaN(r, "cl.c1.cpu")),
				ratio: ratioOf(r, "cl.c3.cpu", "cl.c1.cpu"), target: "—"})
		}
		for _, pl := range []string{"16", "1"} {
			key := "cb" + pl
			for _, t := range []string{"SET", "GET"} {
				add(row{what: "10 b. data " + t + " -P " + pl + ", ops/s: proxy (backend a 3-shard cluster) vs redis-benchmark --cluster straight to the cluster",
					proxy: rate(orNaN(r, key+".proxy."+t)), baseline: rate(orNaN(r, key+".direct."+t)),
					ratio: ratioOf(r, key+".proxy."+t, key+".direct."+t), target: "—"})
			}
			add(row{what: "10 b. data -P " + pl + ": CPU of redis-benchmark, the cluster's nodes and the proxy per command, µs: through the proxy vs straight to the cluster",
				proxy: micros(orNaN(r, key+".proxy.all")), baseline: micros(orNaN(r, key+".direct.all")),
				ratio: ratioOf(r, key+".proxy.all", key+".direct.all"), target: "—"})
			add(row{what: "10 b. data -P " + pl + ": CPU of the proxy process per command (proxy column), µs",
				proxy: micros(orNaN(r, key+".proxy.cpu")), baseline: "—", ratio: math.NaN(), target: "—"})
		}
		add(row{what: fmt.Sprintf("10 b. go-redis, %d goroutines, SET and GET in turn, ops/s: Client → proxy (backend a 3-shard cluster) vs ClusterClient → the cluster", o.clients),
			proxy: rate(orNaN(r, "cbgo.proxy.rate")), baseline: rate(orNaN(r, "cbgo.direct.rate")),
			ratio: ratioOf(r, "cbgo.proxy.rate", "cbgo.direct.rate"), target: "—"})
		add(row{what: "10 b. … CPU of the clients, the cluster's nodes and the proxy per command, µs",
			proxy: micros(orNaN(r, "cbgo.proxy.all")), baseline: micros(orNaN(r, "cbgo.direct.all")),
			ratio: ratioOf(r, "cbgo.proxy.all", "cbgo.direct.all"), target: "—"})
		add(row{what: "10 b. … CPU of the proxy process per command (proxy column), µs; error replies per run",
			proxy: micros(orNaN(r, "cbgo.proxy.cpu")) + "; " + count(orNaN(r, "cbgo.proxy.errors")), baseline: count(orNaN(r, "cbgo.direct.errors")), ratio: math.NaN(), target: "—"})
	}
	if o.rows["8"] {
		add(row{what: fmt.Sprintf("8. proxy RSS: with %d idle subscribers (proxy) vs before they connect (baseline)", o.conns),
			proxy: fmtMB(orNaN(r, "subs.with")), baseline: fmtMB(orNaN(r, "subs.before")), ratio: ratioOf(r, "subs.with", "subs.before"), target: "—"})
	}
	if o.rows["5"] {
		with := orNaN(r, "rss.with")
		add(row{what: fmt.Sprintf("5. proxy RSS: with %d idle clients (proxy) vs before they connect (baseline)", o.conns),
			proxy: fmtMB(with), baseline: fmtMB(orNaN(r, "rss.before")), ratio: ratioOf(r, "rss.with", "rss.before"),
			target: "≤ 100 MB with clients", maxAbsolute: 100, absolute: with})
	}

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
