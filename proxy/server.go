package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/tidwall/match"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Version is the proxy's version, reported by INFO and HELLO.
const Version = "0.1.0"

// Server is a running proxy: a redcon server, the Redlock client for the
// masters, and the passthrough backend.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	rl      *redlock.Client
	be      *backend
	scripts *scriptCache
	srv     *redcon.Server
	started time.Time

	mu      sync.Mutex
	ln      net.Listener
	clients atomic.Int64
	nextID  atomic.Int64
	stats   stats
}

type stats struct {
	acquires, acquireGranted, acquireHeld, acquireNoQuorum, acquireOther atomic.Int64
	releases, extends, passthrough, connections                          atomic.Int64
}

// New validates cfg and returns a Server that has not started listening.
func New(cfg Config, log zerolog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := cfg.Redlock
	guard := r.GuardWindow.Duration
	if !r.RestartGuard {
		guard = 0
	}
	rl, err := redlock.New(r.Masters,
		redlock.WithQuorum(r.Quorum), redlock.WithDriftFactor(r.DriftFactor),
		redlock.WithNodeTimeout(r.NodeTimeout.Duration), redlock.WithRetry(r.RetryCount, r.RetryDelay.Duration),
		redlock.WithRestartGuard(guard), redlock.WithPoolSize(r.PoolSize),
		redlock.WithRedisOptions(func(_ int, o *redis.Options) { o.Password = r.Password }),
		redlock.WithLogf(func(format string, args ...any) { log.Warn().Msgf(format, args...) }),
	)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, log: log, rl: rl, scripts: newScriptCache(4096), started: time.Now(),
		be: newBackend(cfg.backendAddr(), r.Password, cfg.Proxy.PassthroughTimeout.Duration, 256),
	}
	s.srv = redcon.NewServerNetwork("tcp", cfg.Proxy.Listen, s.handle, s.accept, s.closed)
	s.srv.SetIdleClose(cfg.Proxy.IdleTimeout.Duration)
	return s, nil
}

// Listen opens the configured listen address. It is separate from Serve so
// a caller knows the address is bound before clients are started.
func (s *Server) Listen() (net.Addr, error) {
	ln, err := net.Listen("tcp", s.cfg.Proxy.Listen)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	return ln.Addr(), nil
}

// Serve accepts clients until Close. It calls Listen if that was not done.
func (s *Server) Serve() error {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		if _, err := s.Listen(); err != nil {
			return err
		}
		ln = s.ln
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Redlock.NodeTimeout.Duration*5)
	up := s.rl.Probe(ctx)
	cancel()
	s.log.Info().Str("listen", ln.Addr().String()).Int("masters", s.rl.Masters()).Int("reachable", up).
		Int("quorum", s.rl.Quorum()).Str("backend", s.be.addr).Msg("redlock-proxy serving")
	if up < s.rl.Quorum() {
		s.log.Warn().Int("reachable", up).Int("quorum", s.rl.Quorum()).Msg("fewer masters reachable than the quorum; lock commands will be refused until enough are up")
	}
	err := s.srv.Serve(ln)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close stops accepting clients, closes every client connection and the
// connections to the masters.
func (s *Server) Close() error {
	err := s.srv.Close()
	s.be.close()
	return errors.Join(err, s.rl.Close())
}

func (s *Server) accept(c redcon.Conn) bool {
	if s.clients.Load() >= int64(s.cfg.Proxy.MaxClients) {
		c.WriteError("ERR max number of clients reached")
		return false
	}
	s.clients.Add(1)
	s.stats.connections.Add(1)
	c.SetContext(&client{id: s.nextID.Add(1)})
	return true
}

// closed runs under redcon's server lock: it only releases this client's
// pinned backend connection.
func (s *Server) closed(c redcon.Conn, _ error) {
	s.clients.Add(-1)
	if st, ok := c.Context().(*client); ok && st.pinned != nil {
		st.pinned.close()
		st.pinned = nil
	}
}

// isLockKey reports whether key is served by the quorum (proxy.lock_keys).
func (s *Server) isLockKey(key []byte) bool {
	for _, p := range s.cfg.Proxy.LockKeys {
		if p == "*" || match.Match(string(key), p) {
			return true
		}
	}
	return false
}

// MasterStatus reports each master's state.
func (s *Server) MasterStatus() []redlock.MasterStatus { return s.rl.Status() }

func (s *Server) errorf(c redcon.Conn, format string, args ...any) {
	c.WriteError(fmt.Sprintf(format, args...))
}
