// Package admin is the proxy's admin surfaces: its Prometheus metrics, the
// status page and its JSON, and the HTTP handler that serves them with the
// health and readiness checks. The proxy counts on Metrics and describes
// itself in a Source; nothing here reaches into the proxy.
package admin

import (
	"errors"
	"runtime"
	rtmetrics "runtime/metrics"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Source is what the metrics and the status page read of the proxy.
type Source struct {
	Engine      *engine.Client       // the quorum: its masters and votes
	Clients     func() int64         // client connections open
	MaxClients  func() int64         // proxy.max_clients in force
	GuardWindow func() time.Duration // the restart guard's window in force
	Listen      string               // the proxy's address
	Backend     string               // the passthrough backend's
	Version     string               // the proxy's version
	Started     time.Time
	// Logf reports an error rendering the status page.
	Logf func(err error, msg string)
}

// Metrics are the proxy's Prometheus metrics, in a registry of their own.
// INFO reads the same counters (Totals).
type Metrics struct {
	reg      *prometheus.Registry
	src      Source
	acquires *prometheus.CounterVec // by outcome
	releases *prometheus.CounterVec
	extends  *prometheus.CounterVec
	latency  *prometheus.HistogramVec // by op
	// Passthrough counts commands passed through to the backend.
	Passthrough prometheus.Counter
	// Connections counts client connections accepted.
	Connections prometheus.Counter
	// PipelinedOps counts lock operations that ran together with others
	// of the same connection.
	PipelinedOps prometheus.Counter
	// Subscribers is the clients subscribed or tracking now, each with a
	// backend connection of its own.
	Subscribers prometheus.Gauge

	// The series each operation counts on, looked up once: by label
	// values, a lookup hashed the labels on every operation.
	acquireBy [len(acquireOutcomes)]prometheus.Counter
	releaseBy [len(doneOutcomes)]prometheus.Counter
	extendBy  [len(doneOutcomes)]prometheus.Counter
	latencyOf [3]prometheus.Observer // by op: opAcquire, opRelease, opExtend
}

// The kinds of quorum operation, as latencyOf's index.
const (
	opAcquire = iota
	opRelease
	opExtend
)

// Outcomes of quorum operations, as metric labels.
const (
	outGranted   = "granted"
	outHeld      = "held_elsewhere"
	outNoQuorum  = "no_quorum"
	outSpent     = "validity_spent"
	outSplit     = "split_vote"
	outDone      = "done" // released or extended on a quorum
	outNotOwned  = "not_owned"
	outFailed    = "error"
	opAcquireLbl = "acquire"
	opReleaseLbl = "release"
	opExtendLbl  = "extend"
)

// The outcomes each kind of operation counts, in the order of its series.
var (
	acquireOutcomes = [...]string{outGranted, outHeld, outNoQuorum, outSpent, outSplit, outFailed}
	doneOutcomes    = [...]string{outDone, outNotOwned, outNoQuorum, outFailed}
	opLabels        = [...]string{opAcquire: opAcquireLbl, opRelease: opReleaseLbl, opExtend: opExtendLbl}
)

// Indexes into acquireOutcomes and doneOutcomes.
const (
	acqGranted = iota
	acqHeld
	acqNoQuorum
	acqSpent
	acqSplit
	acqFailed
)

const (
	doneDone = iota
	doneNotOwned
	doneNoQuorum
	doneFailed
)

// NewMetrics makes the metrics of the proxy src describes.
func NewMetrics(src Source) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		src: src,
		acquires: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redlock_proxy_acquires_total",
			Help: "Quorum acquires by outcome: granted, held_elsewhere, no_quorum, validity_spent, split_vote, error."}, []string{"outcome"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redlock_proxy_releases_total",
			Help: "Quorum releases by outcome: done, not_owned, no_quorum, error."}, []string{"outcome"}),
		extends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redlock_proxy_extends_total",
			Help: "Quorum extends by outcome: done, not_owned, no_quorum, error."}, []string{"outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "redlock_proxy_operation_duration_seconds",
			Help:    "Time to answer a quorum operation, by op: acquire, release, extend.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"op"}),
		Passthrough: prometheus.NewCounter(prometheus.CounterOpts{Name: "redlock_proxy_passthrough_commands_total",
			Help: "Commands passed through to the backend."}),
		Connections: prometheus.NewCounter(prometheus.CounterOpts{Name: "redlock_proxy_connections_total",
			Help: "Client connections accepted."}),
		PipelinedOps: prometheus.NewCounter(prometheus.CounterOpts{Name: "redlock_proxy_pipelined_lock_operations_total",
			Help: "Lock operations that ran together with others pipelined on the same connection."}),
		Subscribers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "redlock_proxy_subscribers",
			Help: "Clients subscribed (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE) or tracking (CLIENT TRACKING) now, each with a backend connection of its own."}),
	}
	m.reg.MustRegister(m.acquires, m.releases, m.extends, m.latency, m.Passthrough, m.Connections, m.PipelinedOps, m.Subscribers,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "redlock_proxy_clients", Help: "Client connections open."},
			func() float64 { return float64(src.Clients()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "redlock_proxy_voters", Help: "Masters that can vote now (up, not guarded)."},
			func() float64 { return float64(src.Engine.VotersAvailable()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "redlock_proxy_quorum", Help: "Masters that must agree."},
			func() float64 { return float64(src.Engine.Quorum()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "redlock_proxy_other_settings",
			Help: "Settings published on the masters by other proxies (or clients) that differ from this proxy's: their locks and this proxy's do not exclude each other. Anything but 0 needs attention."},
			func() float64 { return float64(len(src.Engine.OtherSettings())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "redlock_proxy_procs", Help: "Threads running Go code at once (GOMAXPROCS, set by proxy.procs)."},
			func() float64 { return float64(runtime.GOMAXPROCS(0)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "redlock_proxy_gc_percent", Help: "GOGC now: the heap growth, in percent of what the last collection found, that starts the next (set by proxy.gc_headroom)."},
			gogc),
		masterCollector{src.Engine},
	)
	for i, out := range acquireOutcomes {
		m.acquireBy[i] = m.acquires.WithLabelValues(out)
	}
	for i, out := range doneOutcomes {
		m.releaseBy[i] = m.releases.WithLabelValues(out)
		m.extendBy[i] = m.extends.WithLabelValues(out)
	}
	for i, op := range opLabels {
		m.latencyOf[i] = m.latency.WithLabelValues(op)
	}
	return m
}

// Acquire counts one acquire by the error it ended with, and its time.
func (m *Metrics) Acquire(err error, d time.Duration) {
	out := acqFailed
	switch {
	case err == nil:
		out = acqGranted
	case errors.Is(err, engine.ErrHeld):
		out = acqHeld
	case errors.Is(err, engine.ErrNoQuorum):
		out = acqNoQuorum
	case errors.Is(err, engine.ErrValiditySpent):
		out = acqSpent
	case errors.Is(err, engine.ErrNotAcquired):
		out = acqSplit
	}
	m.acquireBy[out].Inc()
	m.latencyOf[opAcquire].Observe(d.Seconds())
}

// Release counts one release: done (ok), not held, or failed (err).
func (m *Metrics) Release(ok bool, err error, d time.Duration) { m.done(opRelease, ok, err, d) }

// Extend counts one extend as Release counts a release.
func (m *Metrics) Extend(ok bool, err error, d time.Duration) { m.done(opExtend, ok, err, d) }

func (m *Metrics) done(op int, ok bool, err error, d time.Duration) {
	out := doneNotOwned
	switch {
	case errors.Is(err, engine.ErrNoQuorum):
		out = doneNoQuorum
	case err != nil:
		out = doneFailed
	case ok:
		out = doneDone
	}
	by := &m.releaseBy
	if op == opExtend {
		by = &m.extendBy
	}
	by[out].Inc()
	m.latencyOf[op].Observe(d.Seconds())
}

// Totals are the counters INFO shows.
type Totals struct {
	Acquires, Granted, Held, NoQuorum, OtherFailures int64
	Releases, Extends, Passthrough, Connections      int64
	Pipelined                                        int64 // lock operations run together with others of their connection
}

// Totals reads the counters now.
func (m *Metrics) Totals() Totals {
	return Totals{
		Acquires: count(m.acquires, ""), Granted: count(m.acquires, outGranted), Held: count(m.acquires, outHeld),
		NoQuorum:      count(m.acquires, outNoQuorum),
		OtherFailures: count(m.acquires, outSpent) + count(m.acquires, outSplit) + count(m.acquires, outFailed),
		Releases:      count(m.releases, ""), Extends: count(m.extends, ""),
		Passthrough: counterValue(m.Passthrough), Connections: counterValue(m.Connections),
		Pipelined: counterValue(m.PipelinedOps),
	}
}

// count reads a counter's value; vec's labels summed when outcome is "".
func count(vec *prometheus.CounterVec, outcome string) int64 {
	if outcome != "" {
		return counterValue(vec.WithLabelValues(outcome))
	}
	ch := make(chan prometheus.Metric, 16)
	go func() { vec.Collect(ch); close(ch) }()
	var sum int64
	for m := range ch {
		sum += counterValue(m)
	}
	return sum
}

func counterValue(m prometheus.Metric) int64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil || d.Counter == nil {
		return 0
	}
	return int64(d.Counter.GetValue())
}

// masterCollector reports each master's state at scrape time.
type masterCollector struct{ rl *engine.Client }

var (
	masterUp        = prometheus.NewDesc("redlock_proxy_master_up", "1 when the master answered its last call and is not marked down.", []string{"master"}, nil)
	masterGuarded   = prometheus.NewDesc("redlock_proxy_master_restart_guarded", "1 while the restart guard withholds the master's votes.", []string{"master"}, nil)
	masterGuard     = prometheus.NewDesc("redlock_proxy_master_guard_remaining_seconds", "Time left in the master's restart guard.", []string{"master"}, nil)
	masterRestart   = prometheus.NewDesc("redlock_proxy_master_restarts_total", "Restarts of the master noticed (run_id changed).", []string{"master"}, nil)
	masterClockJump = prometheus.NewDesc("redlock_proxy_master_clock_jumps_total", "Jumps of the master's clock noticed (TIME against the proxy's monotonic clock).", []string{"master"}, nil)
	masterLatency   = prometheus.NewDesc("redlock_proxy_master_latency_seconds", "Latency of the master's last successful call.", []string{"master"}, nil)
	masterPipelines = prometheus.NewDesc("redlock_proxy_master_pipelines_total", "Pipelines (one write, replies read back in order) sent to the master for quorum operations.", []string{"master"}, nil)
	masterCommands  = prometheus.NewDesc("redlock_proxy_master_commands_total", "Commands those pipelines carried; divided by redlock_proxy_master_pipelines_total, how many operations share one.", []string{"master"}, nil)
	masterDowns     = prometheus.NewDesc("redlock_proxy_master_marked_down_total", "Times the master was marked down (calls skip it until a background probe reaches it).", []string{"master"}, nil)
	masterHandoffs  = prometheus.NewDesc("redlock_proxy_master_handoffs_total", "Pipelines to the master handed to a new connection because a reply carried a long string, so that the commands queued behind it did not wait for it.", []string{"master"}, nil)
	masterAlone     = prometheus.NewDesc("redlock_proxy_master_alone_commands_total", "Commands sent to the master on a connection of their own, off the shared pipeline: long commands, and reads of long values.", []string{"master"}, nil)
	masterReplica   = prometheus.NewDesc("redlock_proxy_master_replica", "1 while the master answers as a replica: it does not vote.", []string{"master"}, nil)
	masterReplicas  = prometheus.NewDesc("redlock_proxy_master_replicas", "Replicas connected to the master.", []string{"master"}, nil)
	masterMinRepl   = prometheus.NewDesc("redlock_proxy_master_min_replicas_to_write", "The master's min-replicas-to-write (-1: not read; it is read while it has replicas). 0 with replicas: cut off from them, it keeps granting locks its promoted replica will not have.", []string{"master"}, nil)
	masterPromoted  = prometheus.NewDesc("redlock_proxy_master_promotions_total", "Promotions of the master from replica noticed; each withholds its votes as a restart that lost its data does.", []string{"master"}, nil)
	masterEvicting  = prometheus.NewDesc("redlock_proxy_master_can_evict", "1 when the master's maxmemory-policy can evict keys under a memory limit, held locks among them.", []string{"master", "policy"}, nil)
	masterEvicted   = prometheus.NewDesc("redlock_proxy_master_evicted_keys", "The master's evicted_keys (INFO stats) at the last check.", []string{"master"}, nil)
	masterEvictions = prometheus.NewDesc("redlock_proxy_master_eviction_guards_total", "Times the master's votes were withheld because it evicted keys.", []string{"master"}, nil)
	masterUndoFails = prometheus.NewDesc("redlock_proxy_master_rollback_failures_total", "Tries to undo a refused acquire's part on the master that failed (timeout, lost connection); each is tried again until it lands or the lock would have expired.", []string{"master"}, nil)

	// Masters given as a Sentinel group only.
	masterPrimary     = prometheus.NewDesc("redlock_proxy_master_sentinel_primary", "1 for the primary the sentinels of a master given as a Sentinel group named last, where its connections go.", []string{"master", "group", "primary"}, nil)
	masterSentinels   = prometheus.NewDesc("redlock_proxy_master_sentinels_answered", "Sentinels of a master given as a Sentinel group that answered the last time they were asked.", []string{"master"}, nil)
	masterSentUnreach = prometheus.NewDesc("redlock_proxy_master_sentinels_unreachable_seconds", "How long no sentinel of a master given as a Sentinel group has answered (0 while one does); the master's connections stay with the last primary named.", []string{"master"}, nil)
	masterSwitches    = prometheus.NewDesc("redlock_proxy_master_primary_switches_total", "Changes of primary seen for a master given as a Sentinel group; each closes the connections to the old primary.", []string{"master"}, nil)
)

func (masterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{masterUp, masterGuarded, masterGuard, masterRestart, masterClockJump, masterLatency, masterPipelines, masterCommands, masterUndoFails, masterDowns, masterHandoffs, masterAlone,
		masterReplica, masterReplicas, masterMinRepl, masterPromoted, masterEvicting, masterEvicted, masterEvictions,
		masterPrimary, masterSentinels, masterSentUnreach, masterSwitches} {
		ch <- d
	}
}

func (c masterCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.rl.Status() {
		ch <- prometheus.MustNewConstMetric(masterUp, prometheus.GaugeValue, float64(b2i(m.Up)), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterGuarded, prometheus.GaugeValue, float64(b2i(m.Guarded)), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterGuard, prometheus.GaugeValue, m.GuardLeft.Seconds(), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterRestart, prometheus.CounterValue, float64(m.Restarts), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterClockJump, prometheus.CounterValue, float64(m.ClockJumps), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterLatency, prometheus.GaugeValue, m.LastLatency.Seconds(), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterPipelines, prometheus.CounterValue, float64(m.Pipelines), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterCommands, prometheus.CounterValue, float64(m.Commands), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterUndoFails, prometheus.CounterValue, float64(m.RollbackFailures), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterDowns, prometheus.CounterValue, float64(m.MarkedDown), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterHandoffs, prometheus.CounterValue, float64(m.Handoffs), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterAlone, prometheus.CounterValue, float64(m.AloneCommands), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterReplica, prometheus.GaugeValue, float64(b2i(m.Role == "slave")), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterReplicas, prometheus.GaugeValue, float64(m.Replicas), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterMinRepl, prometheus.GaugeValue, float64(m.MinReplicasToWrite), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterPromoted, prometheus.CounterValue, float64(m.Promotions), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterEvicting, prometheus.GaugeValue, float64(b2i(canEvict(m))), m.Addr, m.EvictionPolicy)
		ch <- prometheus.MustNewConstMetric(masterEvicted, prometheus.GaugeValue, float64(m.EvictedKeys), m.Addr)
		ch <- prometheus.MustNewConstMetric(masterEvictions, prometheus.CounterValue, float64(m.Evictions), m.Addr)
		if g := m.Sentinel; g != nil {
			ch <- prometheus.MustNewConstMetric(masterPrimary, prometheus.GaugeValue, 1, m.Addr, g.Name, g.Primary)
			ch <- prometheus.MustNewConstMetric(masterSentinels, prometheus.GaugeValue, float64(g.Answered), m.Addr)
			ch <- prometheus.MustNewConstMetric(masterSentUnreach, prometheus.GaugeValue, sentinelsDown(g).Seconds(), m.Addr)
			ch <- prometheus.MustNewConstMetric(masterSwitches, prometheus.CounterValue, float64(g.Switches), m.Addr)
		}
	}
}

// sentinelsDown is how long no sentinel of the group has answered; 0
// while one does.
func sentinelsDown(g *engine.SentinelStatus) time.Duration {
	if g.Reachable || g.UnreachableSince.IsZero() {
		return 0
	}
	return time.Since(g.UnreachableSince)
}

// gogc reads the GOGC in force.
func gogc() float64 {
	s := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return float64(s[0].Value.Uint64())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// canEvict reports whether the master's policy can evict keys: any policy
// but noeviction, under a memory limit.
func canEvict(m engine.MasterStatus) bool {
	return m.Maxmemory > 0 && m.EvictionPolicy != "" && m.EvictionPolicy != "noeviction"
}
