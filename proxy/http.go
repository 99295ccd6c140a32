package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpHandler serves /metrics (Prometheus), /healthz (the process is alive),
// /readyz (a quorum of masters can vote), and the status page at / with its
// data at /status.json.
func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	s.status = newStatusPage(s)
	mux.HandleFunc("/", s.status.serveHTML)
	mux.HandleFunc("/status.json", s.status.serveJSON)
	mux.Handle("/metrics", promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		v, q := s.rl.VotersAvailable(), s.rl.Quorum()
		if v < q {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %d of the masters can vote, %d needed\n", v, q)
			return
		}
		fmt.Fprintf(w, "ready: %d of the masters can vote, %d needed\n", v, q)
	})
	return mux
}

// listenHTTP binds [metrics] listen, if set.
func (s *Server) listenHTTP() error {
	if s.cfg.Metrics.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Metrics.Listen)
	if err != nil {
		return fmt.Errorf("metrics.listen: %w", err)
	}
	s.httpLn = ln
	return nil
}

// serveHTTP serves the metrics listener until Close.
func (s *Server) serveHTTP() {
	if s.httpLn == nil {
		return
	}
	done := make(chan struct{})
	defer close(done)
	go s.status.run(done)
	if err := s.http.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error().Err(err).Msg("metrics server stopped")
	}
}

// MetricsAddr is the address /metrics is served on, or nil.
func (s *Server) MetricsAddr() net.Addr {
	if s.httpLn == nil {
		return nil
	}
	return s.httpLn.Addr()
}
