package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/tidwall/match"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/admin"
	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Version is the proxy's version, reported by INFO and HELLO.
const Version = "0.1.0"

// Server is a running proxy: a redcon server, the Redlock client for the
// masters, and the passthrough backend.
type Server struct {
	cfg Config
	log zerolog.Logger
	rl  *engine.Client
	be  *backend.Pool
	mux *backend.Mux // the shared connection for plain passthrough
	// The same for clients that speak RESP3: their replies come from the
	// backend in RESP3, type for type.
	be3     *backend.Pool
	mux3    *backend.Mux
	scripts *lockscripts.Cache
	waits   waitQueues // LOCK.ACQUIRE … WAIT
	ops     *opRunners // run pipelined lock operations (pipeline.go)
	// leasesActive counts LOCK.ACQUIRE … LEASE locks being renewed.
	leasesActive atomic.Int64
	started      time.Time

	mu       sync.Mutex
	ln       net.Listener
	sessions map[*session]struct{} // clients being served
	drained  chan struct{}         // closed when the last session ends, while closing
	closing  atomic.Bool
	httpLn   net.Listener
	http     *http.Server
	clients  atomic.Int64
	nextID   atomic.Int64
	// Settings a reload may change while the proxy runs.
	maxClients   atomic.Int64
	passthrough  atomic.Int64 // passthrough timeout, ns
	idleTimeout  atomic.Int64 // ns
	writeTimeout atomic.Int64 // ns
	m            *admin.Metrics
	// statusRun samples the counters of the status page's rates.
	statusRun    func(done <-chan struct{})
	creds        *masterCreds // for the masters and the backend; a reload swaps them
	auth         atomic.Pointer[clientAuth]
	noLeaseRetry bool   // tests only: a lease's release on close is tried once
	settings     string // what the proxies in front of the same masters must agree on (settingsSummary)
	// What may reach the backend (boundary.go), and where commands' keys
	// are (keyspecs.go).
	bnd    boundary
	keyTab keyTable
	// The databases a client can SELECT (databases.go): db0 is the one
	// above, the others are opened on first use.
	db0  *database
	dbMu sync.Mutex
	dbs  map[int]*database
	// cl routes passthrough to a Redis Cluster (backend.Cluster,
	// clusterroute.go); nil for one
	// Redis.
	cl *backend.Cluster
}

// New validates cfg and returns a Server that has not started listening.
func New(cfg Config, log zerolog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	creds := newMasterCreds(cfg.Redlock)
	rl, err := newEngine(&cfg, log, creds, 0)
	if err != nil {
		return nil, err
	}
	custom, err := lockscripts.Specs(cfg.Scripts)
	if err != nil {
		return nil, err
	}
	beAddr := cfg.backendAddr()
	var seeds []string
	if backend.IsClusterAddr(beAddr) {
		// The backend's own uses of one node (subscriptions, COMMAND,
		// SELECT's check) go to the first seed; commands are routed.
		seeds, _ = backend.ParseClusterAddr(beAddr)
		beAddr = seeds[0]
	}
	s := &Server{
		cfg: cfg, log: log, rl: rl, scripts: lockscripts.NewCache(4096, custom), started: time.Now(), settings: cfg.settingsSummary(),
	}
	s.creds = creds
	// A Sentinel group's connections go to its primary (backend.Sentinel).
	s.be, err = backend.New(backend.Options{
		Addr: beAddr, Identity: creds.provider(cfg.backendAddr()), Timeout: cfg.Proxy.PassthroughTimeout.Duration,
		PoolSize: 256, TLS: cfg.Redlock.TLS, SentinelEvery: cfg.Redlock.ClockCheck.Duration,
		Logf: func(format string, args ...any) { log.Warn().Msgf(format, args...) },
	})
	if err != nil {
		_ = rl.Close()
		return nil, err
	}
	s.ops = newOpRunners(s)
	s.mux = backend.NewMux(s.be, s.passthroughTimeout)
	s.be3 = s.be.RESP3()
	s.mux3 = backend.NewMux(s.be3, s.passthroughTimeout)
	s.db0 = &database{rl: rl, be: s.be, be3: s.be3, mux: s.mux, mux3: s.mux3}
	s.auth.Store(newClientAuth(cfg.Proxy))
	s.maxClients.Store(int64(cfg.Proxy.MaxClients))
	s.bnd = newBoundary(cfg)
	s.passthrough.Store(int64(cfg.Proxy.PassthroughTimeout.Duration))
	s.idleTimeout.Store(int64(cfg.Proxy.IdleTimeout.Duration))
	s.writeTimeout.Store(int64(cfg.Proxy.WriteTimeout.Duration))
	if seeds != nil {
		s.cl = backend.NewCluster(backend.ClusterOptions{Seeds: seeds, Identity: creds.provider(cfg.backendAddr()), Timeout: s.passthroughTimeout, TLS: cfg.Redlock.TLS})
	}
	s.m = admin.NewMetrics(admin.Source{
		Engine: rl, Clients: s.clients.Load, MaxClients: s.maxClients.Load, GuardWindow: s.guardWindow,
		Listen: cfg.Proxy.Listen, Backend: s.be.Addr(), Version: Version, Started: s.started,
		Logf: func(err error, msg string) { s.log.Error().Err(err).Msg(msg) },
	})
	h, run := s.m.Handler()
	s.statusRun = run
	s.http = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	return s, nil
}

// Listen opens the configured listen address. It is separate from Serve so
// a caller knows the address is bound before clients are started. Every
// client connection is wrapped in a wire.Conn, which enforces the input
// and output limits (package wire).
func (s *Server) Listen() (net.Addr, error) {
	nl, err := net.Listen("tcp", s.cfg.Proxy.Listen)
	if err != nil {
		return nil, err
	}
	if s.cfg.Proxy.TLS != nil {
		nl = tls.NewListener(nl, s.cfg.Proxy.TLS) // the checks below see plain text
	}
	ln := &wire.Listener{Listener: nl, Limits: limitsOf(&s.cfg.Proxy), WriteTimeout: &s.writeTimeout}
	if err := s.listenHTTP(); err != nil {
		nl.Close()
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
	s.checkBackendIdentity()
	go func() { _, _ = s.keyTab.load(s) }() // where commands' keys are, before the first command asks
	s.log.Info().Str("listen", ln.Addr().String()).Int("masters", s.rl.Masters()).Int("reachable", up).
		Int("quorum", s.rl.Quorum()).Str("backend", s.be.Addr()).Msg("redlock-proxy serving")
	if up < s.rl.Quorum() {
		s.log.Warn().Int("reachable", up).Int("quorum", s.rl.Quorum()).Msg("fewer masters reachable than the quorum; lock commands will be refused until enough are up")
	}
	go s.serveHTTP()
	return s.serveClients(ln)
}

// newEngine is the Redlock client of the masters' database db (databases.go).
func newEngine(cfg *Config, log zerolog.Logger, creds *masterCreds, db int) (*engine.Client, error) {
	r := &cfg.Redlock // not a copy: Reload may be writing the credentials (the engine has them from creds)
	guard := r.GuardWindow.Duration
	if !r.RestartGuard {
		guard = 0
	}
	return engine.New(r.Masters,
		engine.WithQuorum(r.Quorum), engine.WithDriftFactor(r.DriftFactor),
		engine.WithNodeTimeout(r.NodeTimeout.Duration), engine.WithRetry(r.RetryCount, r.RetryDelay.Duration),
		engine.WithRestartGuard(guard), engine.WithMaxLockTTL(r.MaxLockTTL.Duration), engine.WithPoolSize(r.PoolSize), engine.WithWaitReplicas(r.WaitReplicas),
		engine.WithMaxValue(int(cfg.Proxy.MaxLockValue)),
		engine.WithClockCheck(r.ClockCheck.Duration, r.ClockJump.Duration),
		engine.WithRedisOptions(func(i int, o *redis.Options) {
			o.CredentialsProvider = creds.provider(r.Masters[i])
			if r.TLS != nil {
				o.TLSConfig = r.TLS.Clone()
			}
			o.DB = db
		}),
		engine.WithLogf(func(format string, args ...any) {
			if db != 0 {
				log.Warn().Int("db", db).Msgf(format, args...)
			} else {
				log.Warn().Msgf(format, args...)
			}
		}),
		guardsOff(cfg.GuardsOff),
		engine.WithSettings(cfg.settingsSummary()),
	)
}

// InitMasters declares the masters a new deployment (engine.Client's
// InitMasters), in every database they have (databases.go): call it before
// Serve, on masters just created empty.
func (s *Server) InitMasters(ctx context.Context) error {
	if err := s.rl.InitMasters(ctx); err != nil {
		return err
	}
	for _, m := range s.cfg.Redlock.Masters {
		if engine.IsClusterAddr(m) {
			return nil // a Redis Cluster has database 0 only
		}
	}
	for n := 1; ; n++ {
		rl, err := newEngine(&s.cfg, s.log, s.creds, n)
		if err != nil {
			return err
		}
		err = rl.InitMasters(ctx)
		_ = rl.Close()
		switch {
		case err != nil && strings.Contains(err.Error(), "DB index is out of range"):
			return nil // the masters' last database was n-1
		case err != nil:
			return fmt.Errorf("database %d: %w", n, err)
		}
	}
}

// closeWait bounds how long Close lets clients finish the commands they
// sent before it closes their connections.
const closeWait = 5 * time.Second

// Close stops accepting clients, lets each finish the commands it has sent
// (at most closeWait), closes every client connection (releasing their
// leases), then the connections to the masters and the backend.
func (s *Server) Close() error {
	s.closeSessions(closeWait)
	var err error
	// Closed clients release their leases on their own goroutines: give
	// them a moment before the masters' connections go.
	for deadline := time.Now().Add(time.Second); s.leasesActive.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if s.httpLn != nil {
		_ = s.http.Close()
	}
	s.mux.Close()
	s.be.Close()
	s.mux3.Close()
	s.be3.Close()
	if sb := s.be.Sentinel(); sb != nil {
		sb.Close()
	}
	if s.cl != nil {
		s.cl.Close()
	}
	return errors.Join(err, s.rl.Close(), s.closeDatabases())
}

func (s *Server) accept(c redcon.Conn) bool {
	if s.clients.Load() >= s.maxClients.Load() {
		c.WriteError("ERR max number of clients reached")
		return false
	}
	s.clients.Add(1)
	s.m.Connections.Inc()
	// With no password set, a client is the default user, authenticated from
	// the start, and stays so if a reload sets one (as on Redis).
	st := &client{id: s.nextID.Add(1), authed: !s.authRequired()}
	c.SetContext(st)
	if ss, ok := c.(*session); ok {
		ss.publishView(st) // listed from now on (CLIENT LIST)
	}
	return true
}

// closed runs in the client's goroutine when it has ended: it logs why a client was cut off
// (bad input, or a write or idle deadline), and releases the client's pinned
// backend connection.
//
// Its leases are released when the client closed the connection itself (a
// close, a reset, QUIT: byClient); when the proxy closed it (a lease
// lapsed, shutdown, a timeout, bad input), the client may still act on a
// lease for up to a third of lease_ttl after its last reply, so the lock
// is left to expire, no longer renewed.
func (s *Server) closed(c redcon.Conn, err error, byClient bool) {
	s.clients.Add(-1)
	var pe *wire.ProtoError
	if errors.As(err, &pe) {
		s.log.Info().Str("client", c.RemoteAddr()).Err(err).Msg("client closed: bad input")
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		s.log.Info().Str("client", c.RemoteAddr()).Msg("client closed: it did not read its replies within proxy.write_timeout, or was idle for proxy.idle_timeout")
	}
	if st, ok := c.Context().(*client); ok && st.pinned != nil {
		st.pinned.Close()
		st.pinned = nil
	}
	if st, ok := c.Context().(*client); ok {
		st.closeSubscription()
		if ls := st.leases.Load(); ls != nil {
			ls.closeAll(byClient) // the leases release their locks on their own goroutines
		}
	}
}

// dispatch serves one command of a client, around handle:
//
//   - a client whose connection was closed (QUIT, a panic) or failed a
//     write is gone: the rest of its pipeline is dropped, not run (a lock
//     nobody will hear of is not taken), as Redis stops after QUIT;
//   - the reply is handed to the wire.Conn at once, so that a batch of
//     commands cannot pile up replies in redcon's buffer (small ones are
//     still sent in one write at the end of the batch);
//   - a panic in a handler closes that client with an error and is logged;
//     the proxy and its other clients go on.
func (s *Server) dispatch(c redcon.Conn, cmd redcon.Command) {
	cc, _ := c.NetConn().(*wire.Conn)
	if cc != nil && cc.Gone() {
		return
	}
	if st, _ := c.Context().(*client); st != nil {
		if ls := st.leases.Load(); ls != nil && ls.lapsed(time.Now()) && !s.off(guardLeaseLapse) {
			// A lease of this connection was not renewed in time: its
			// client learns it by the close, never by a reply.
			_ = c.Close()
			return
		}
	}
	defer func() {
		if r := recover(); r != nil {
			name := ""
			if len(cmd.Args) > 0 {
				name = string(cmd.Args[0][:min(len(cmd.Args[0]), 32)])
			}
			s.log.Error().Str("client", c.RemoteAddr()).Str("command", name).Interface("panic", r).
				Str("stack", string(debug.Stack())).Msg("command handler panicked; closing the client")
			c.WriteError("ERR redlock-proxy: internal error; closing the connection")
			_ = c.Close()
		}
	}()
	ss, _ := c.(*session)
	if ss != nil && len(cmd.Args) > 0 {
		ss.noteCommand(cmd.Args)
	}
	s.handle(c, cmd)
	if st, _ := c.Context().(*client); ss != nil && st != nil {
		ss.publishView(st)
	}
	handOver(c)
}

// handOver moves the replies written so far from redcon's buffer to the
// wire.Conn, which sends them once a batch is done or 64 KB have piled up.
func handOver(c redcon.Conn) {
	ss, ok := c.(*session)
	if !ok {
		return
	}
	if ss.fly.slots != nil || ss.subbed { // another goroutine may write to cc
		ss.outMu.Lock()
		defer ss.outMu.Unlock()
		if ss.fly.queued() {
			ss.queueWrittenLocked()
			return
		}
	}
	ss.cc.Hold(true)
	_ = ss.flush()
	ss.cc.Hold(false)
}

// isLockKey reports whether key is served by the quorum (proxy.lock_keys).
func (s *Server) isLockKey(key []byte) bool {
	// Read in place: a copy of a key longer than 32 bytes was an
	// allocation per command. match.Match keeps nothing.
	k := unsafe.String(unsafe.SliceData(key), len(key))
	for _, p := range s.cfg.Proxy.LockKeys {
		if p == "*" || match.Match(k, p) {
			return true
		}
	}
	return false
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

// serveHTTP serves the metrics listener (package admin) until Close.
func (s *Server) serveHTTP() {
	if s.httpLn == nil {
		return
	}
	done := make(chan struct{})
	defer close(done)
	go s.statusRun(done)
	if err := s.http.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error().Err(err).Msg("metrics server stopped")
	}
}

// limitsOf is the input limits of a client under c.
func limitsOf(c *ProxyConfig) wire.Limits {
	return wire.NewLimits(int64(c.MaxBulkLen), int64(c.MaxQueryBuffer))
}

// MetricsAddr is the address /metrics is served on, or nil.
func (s *Server) MetricsAddr() net.Addr {
	if s.httpLn == nil {
		return nil
	}
	return s.httpLn.Addr()
}
