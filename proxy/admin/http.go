package admin

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics (Prometheus), /healthz (the process is alive),
// /readyz (a quorum of masters can vote), and the status page at / with its
// data at /status.json. Run samples the counters the page's rates come
// from, once a second, until done is closed.
func (m *Metrics) Handler() (h http.Handler, run func(done <-chan struct{})) {
	mux := http.NewServeMux()
	status := newStatusPage(m)
	mux.HandleFunc("/", status.serveHTML)
	mux.HandleFunc("/status.json", status.serveJSON)
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		v, q := m.src.Engine.VotersAvailable(), m.src.Engine.Quorum()
		if v < q {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %d of the masters can vote, %d needed\n", v, q)
		} else {
			fmt.Fprintf(w, "ready: %d of the masters can vote, %d needed\n", v, q)
		}
		for i, s := range m.src.Engine.Status() {
			for _, warn := range MasterWarnings(s) {
				fmt.Fprintf(w, "warning: master%d (%s) %s\n", i, s.Addr, warn)
			}
			// Readiness is the votes alone; a voter's sentinels out of reach
			// are told, not counted: its connections stay with the last
			// primary they named, which votes as long as it answers.
			if g := s.Sentinel; g != nil && !g.Reachable {
				fmt.Fprintf(w, "master%d (%s): no sentinel of group %s answers (for %s); its connections stay with the last primary named, %s\n",
					i, s.Addr, g.Name, sentinelsDown(g).Round(time.Second), orNone(g.Primary))
			}
		}
	})
	return mux, status.run
}

// orNone is s, or "none known" for "".
func orNone(s string) string {
	if s == "" {
		return "none known"
	}
	return s
}
