package admin

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The status page at "/" of the metrics listener, and the same data as
// JSON at /status.json. Rates come from the process's own counters, sampled
// once a second into a ring.
const (
	statusWindow  = 10 * time.Second // the rates shown are over this window
	statusHistory = 60               // one-second samples kept for the charts
)

// statusOp is one kind of quorum operation and the outcomes it counts.
type statusOp struct {
	name     string
	vec      func(*Metrics) *prometheus.CounterVec
	outcomes []string
}

var statusOps = []statusOp{
	{opAcquireLbl, func(m *Metrics) *prometheus.CounterVec { return m.acquires },
		[]string{outGranted, outHeld, outNoQuorum, outSpent, outSplit, outFailed}},
	{opReleaseLbl, func(m *Metrics) *prometheus.CounterVec { return m.releases },
		[]string{outDone, outNotOwned, outNoQuorum, outFailed}},
	{opExtendLbl, func(m *Metrics) *prometheus.CounterVec { return m.extends },
		[]string{outDone, outNotOwned, outNoQuorum, outFailed}},
}

// statusSample is the counters at one instant, by "op/outcome".
type statusSample struct {
	at     time.Time
	counts map[string]float64
}

// statusPage samples the counters and renders the page.
type statusPage struct {
	m    *Metrics
	mu   sync.Mutex
	ring []statusSample // oldest first, at most statusHistory+1
}

func newStatusPage(m *Metrics) *statusPage {
	return &statusPage{m: m, ring: []statusSample{{at: m.src.Started, counts: map[string]float64{}}}}
}

// run samples the counters once a second until done is closed.
func (p *statusPage) run(done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			p.add(p.read(now))
		}
	}
}

func (p *statusPage) add(smp statusSample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ring = append(p.ring, smp)
	if len(p.ring) > statusHistory+1 {
		p.ring = append(p.ring[:0], p.ring[1:]...)
	}
}

// read takes the counters now.
func (p *statusPage) read(now time.Time) statusSample {
	smp := statusSample{at: now, counts: map[string]float64{}}
	for _, op := range statusOps {
		for outcome, v := range labelValues(op.vec(p.m)) {
			smp.counts[op.name+"/"+outcome] = v
		}
	}
	return smp
}

// labelValues reads a counter vector by its only label, without creating
// series that were never counted.
func labelValues(vec *prometheus.CounterVec) map[string]float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { vec.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil || d.Counter == nil || len(d.Label) == 0 {
			continue
		}
		out[d.Label[0].GetValue()] = d.Counter.GetValue()
	}
	return out
}

// statusView is what the page and /status.json show.
type statusView struct {
	Version          string        `json:"version"`
	GoVersion        string        `json:"go_version"`
	PID              int           `json:"pid"`
	Now              time.Time     `json:"now"`
	StartedAt        time.Time     `json:"started_at"`
	UptimeSeconds    int64         `json:"uptime_seconds"`
	Listen           string        `json:"listen"`
	Backend          string        `json:"backend"`
	Ready            bool          `json:"ready"`
	Quorum           int           `json:"quorum"`
	Voters           int           `json:"voters"`
	Clients          int64         `json:"clients"`
	MaxClients       int64         `json:"max_clients"`
	ConnectionsTotal int64         `json:"connections_total"`
	PassthroughTotal int64         `json:"passthrough_total"`
	GuardWindowSecs  float64       `json:"restart_guard_window_seconds"`
	WindowSeconds    int           `json:"rate_window_seconds"`
	Masters          []masterView  `json:"masters"`
	Ops              []opRatesView `json:"operations"`
}

type masterView struct {
	Addr             string   `json:"addr"`
	State            string   `json:"state"` // up, guarded, failing or down
	Durable          bool     `json:"durable"`
	GuardLeftSeconds float64  `json:"guard_left_seconds"`
	Restarts         int      `json:"restarts"`
	ClockJumps       int      `json:"clock_jumps"`
	LatencyMS        float64  `json:"last_latency_ms"`
	LastError        string   `json:"last_error"`
	RunID            string   `json:"run_id"`
	Role             string   `json:"role"` // master, or slave: a replica, which does not vote
	Replicas         int      `json:"replicas"`
	MinReplicas      int      `json:"min_replicas_to_write"` // -1: not read (no replicas)
	Promotions       int      `json:"promotions"`
	EvictionPolicy   string   `json:"maxmemory_policy"`
	CanEvict         bool     `json:"can_evict"`
	EvictedKeys      int64    `json:"evicted_keys"`
	Warnings         []string `json:"warnings"`
	// Sentinel: a master given as a Sentinel group; absent otherwise.
	Sentinel *sentinelView `json:"sentinel,omitempty"`
}

// sentinelView is a master's Sentinel group.
type sentinelView struct {
	Group              string     `json:"group"`
	Primary            string     `json:"primary"` // where its connections go: the primary the sentinels named last
	Sentinels          int        `json:"sentinels"`
	Answered           int        `json:"sentinels_answered"` // the last time they were asked
	Reachable          bool       `json:"sentinels_reachable"`
	UnreachableSince   *time.Time `json:"sentinels_unreachable_since,omitempty"`
	UnreachableSeconds float64    `json:"sentinels_unreachable_seconds"`
	Switches           int        `json:"primary_switches"`
	LastError          string     `json:"sentinels_last_error"`
}

func newSentinelView(g *engine.SentinelStatus) *sentinelView {
	if g == nil {
		return nil
	}
	v := &sentinelView{Group: g.Name, Primary: g.Primary, Sentinels: g.Sentinels, Answered: g.Answered, Reachable: g.Reachable,
		UnreachableSeconds: sentinelsDown(g).Seconds(), Switches: g.Switches, LastError: g.LastError}
	if !g.Reachable && !g.UnreachableSince.IsZero() {
		t := g.UnreachableSince
		v.UnreachableSince = &t
	}
	return v
}

type opRatesView struct {
	Op        string        `json:"op"`
	PerSecond float64       `json:"per_second"`
	Total     int64         `json:"total"`
	Outcomes  []outcomeView `json:"outcomes"`
	History   []float64     `json:"history"` // operations per second, oldest first
}

type outcomeView struct {
	Outcome   string  `json:"outcome"`
	PerSecond float64 `json:"per_second"`
	Total     int64   `json:"total"`
}

// masterState names a master's state for the page: down (marked down:
// calls skip it until a probe reaches it), failing (its last call failed;
// calls still go to it), guarded (its votes are withheld), or up.
func masterState(m engine.MasterStatus) string {
	switch {
	case m.Down:
		return "down"
	case !m.Up:
		return "failing"
	case m.Role == "slave":
		return "replica"
	case m.Guarded:
		return "guarded"
	}
	return "up"
}

// MasterWarnings says what in a master's configuration can cost a held
// lock: a replica among the voters, a policy that evicts keys, replicas
// without min-replicas-to-write.
func MasterWarnings(m engine.MasterStatus) []string {
	var out []string
	if m.Role == "slave" {
		out = append(out, "answers as a replica: it does not vote")
	}
	if canEvict(m) {
		out = append(out, "maxmemory-policy "+m.EvictionPolicy+" can evict a held lock (set noeviction)")
	}
	if m.Replicas > 0 && m.MinReplicasToWrite == 0 {
		out = append(out, "has replicas and min-replicas-to-write 0: cut off from them, it grants locks its promoted replica will not have")
	}
	return out
}

// view gathers the page's data now.
func (p *statusPage) view(now time.Time) statusView {
	s := p.m.src
	v := statusView{
		Version: s.Version, GoVersion: runtime.Version(), PID: os.Getpid(), Now: now, StartedAt: s.Started,
		UptimeSeconds: int64(now.Sub(s.Started).Seconds()), Listen: s.Listen, Backend: s.Backend,
		Quorum: s.Engine.Quorum(), Voters: s.Engine.VotersAvailable(), Clients: s.Clients(), MaxClients: s.MaxClients(),
		ConnectionsTotal: counterValue(p.m.Connections), PassthroughTotal: counterValue(p.m.Passthrough),
		GuardWindowSecs: s.GuardWindow().Seconds(), WindowSeconds: int(statusWindow / time.Second),
	}
	v.Ready = v.Voters >= v.Quorum
	for _, m := range s.Engine.Status() {
		v.Masters = append(v.Masters, masterView{
			Addr: m.Addr, State: masterState(m), Durable: m.Durable, GuardLeftSeconds: m.GuardLeft.Seconds(),
			Restarts: m.Restarts, ClockJumps: m.ClockJumps, LatencyMS: float64(m.LastLatency.Microseconds()) / 1000, LastError: m.LastError, RunID: m.RunID,
			Role: m.Role, Replicas: m.Replicas, MinReplicas: m.MinReplicasToWrite, Promotions: m.Promotions,
			EvictionPolicy: m.EvictionPolicy, CanEvict: canEvict(m), EvictedKeys: m.EvictedKeys, Warnings: MasterWarnings(m),
			Sentinel: newSentinelView(m.Sentinel),
		})
	}
	v.Ops = p.rates(p.read(now))
	return v
}

// rates compares the counters now with the sample nearest to one window
// ago (or the oldest one, early in the process's life).
func (p *statusPage) rates(cur statusSample) []opRatesView {
	p.mu.Lock()
	ring := append([]statusSample(nil), p.ring...)
	p.mu.Unlock()
	base := ring[0]
	for _, smp := range ring {
		if cur.at.Sub(smp.at) >= statusWindow {
			base = smp
		}
	}
	el := max(cur.at.Sub(base.at), time.Second).Seconds()
	var out []opRatesView
	for _, op := range statusOps {
		r := opRatesView{Op: op.name}
		for _, o := range op.outcomes {
			k := op.name + "/" + o
			ov := outcomeView{Outcome: o, PerSecond: (cur.counts[k] - base.counts[k]) / el, Total: int64(cur.counts[k])}
			r.PerSecond += ov.PerSecond
			r.Total += ov.Total
			r.Outcomes = append(r.Outcomes, ov)
		}
		r.History = history(ring, op)
		out = append(out, r)
	}
	return out
}

// history is an operation's rate between consecutive samples, oldest first.
func history(ring []statusSample, op statusOp) []float64 {
	sum := func(smp statusSample) (n float64) {
		for _, o := range op.outcomes {
			n += smp.counts[op.name+"/"+o]
		}
		return n
	}
	var out []float64
	for i := 1; i < len(ring); i++ {
		d := ring[i].at.Sub(ring[i-1].at).Seconds()
		if d <= 0 {
			continue
		}
		out = append(out, (sum(ring[i])-sum(ring[i-1]))/d)
	}
	return out
}

//go:embed status.html
var statusHTML string

var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"rate":     func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"ms":       func(f float64) string { return fmt.Sprintf("%.2f ms", f) },
	"duration": func(sec float64) string { return (time.Duration(math.Ceil(sec)) * time.Second).String() },
	"uptime":   func(sec int64) string { return (time.Duration(sec) * time.Second).String() },
	"spark":    sparkline,
	"stamp":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
}).Parse(statusHTML))

// sparkBar is one bar of an inline SVG chart.
type sparkBar struct {
	X, Y, H float64
	Title   string
}

// sparkline scales an operation's history into bars of a 240×40 chart.
func sparkline(h []float64) []sparkBar {
	peak := 0.0
	for _, v := range h {
		peak = max(peak, v)
	}
	out := make([]sparkBar, 0, len(h))
	for i, v := range h {
		bh := 0.0
		if peak > 0 {
			bh = v / peak * 38
		}
		x := 240 - float64(len(h)-i)*4
		out = append(out, sparkBar{X: x, Y: 40 - bh, H: bh, Title: fmt.Sprintf("%.1f/s, %ds ago", v, len(h)-i)})
	}
	return out
}

// serveHTML renders the page.
func (p *statusPage) serveHTML(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	securePage(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := statusTmpl.Execute(w, p.view(time.Now())); err != nil {
		if p.m.src.Logf != nil {
			p.m.src.Logf(err, "status page")
		}
	}
}

// serveJSON answers /status.json.
func (p *statusPage) serveJSON(w http.ResponseWriter, _ *http.Request) {
	securePage(w)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(p.view(time.Now()))
}

// securePage sets headers that keep the page self-contained: nothing is
// loaded from elsewhere and nothing is cached.
func securePage(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'")
}
