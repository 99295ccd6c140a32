// Command redlock-proxy serves the Redis protocol in front of N independent
// Redis masters and turns lock commands into Redlock quorum operations.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/mattn/go-isatty"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "redlock-proxy:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.version {
		fmt.Println("redlock-proxy", proxy.Version)
		return nil
	}
	cfg, err := loadConfig(f.path, f.over)
	if err != nil {
		return err
	}
	if f.check {
		fmt.Fprintf(stderr, "configuration OK: %s (listen %s, %d masters)\n", f.path, cfg.Proxy.Listen, len(cfg.Redlock.Masters))
		return nil
	}
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return err
	}
	warnGuardsOff(log, cfg.GuardsOff)
	setProcs(cfg.Proxy.Procs)
	var gc *gcTuner
	if why := gcTunerOff(); why != "" {
		log.Info().Str("reason", why).Msg("proxy.gc_headroom is not applied")
	} else {
		gc = newGCTuner(int64(cfg.Proxy.GCHeadroom))
		stopGC := make(chan struct{})
		defer close(stopGC)
		go gc.run(stopGC)
	}
	redis.SetLogger(redisLogger{log.With().Str("component", "go-redis").Logger()})
	if f.initMasters {
		// The masters are new, hence young: their first sight would log
		// the restart guard's warnings, which mean nothing here.
		log = log.Level(zerolog.ErrorLevel)
	}
	srv, err := proxy.New(cfg, log)
	if err != nil {
		return err
	}
	if f.initMasters {
		return declareMasters(srv, cfg, stderr)
	}
	if _, err := srv.Listen(); err != nil {
		return err
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	return serve(srv, gc, f.path, f.over, log)
}

// flags are the command line's settings.
type flags struct {
	path        string // the configuration file
	check       bool   // validate the configuration and exit
	version     bool   // print the version and exit
	cpuProfile  string // the file of a CPU profile of the whole run, if any
	initMasters bool   // declare the masters a new deployment and exit
	over        overrides
}

// parseFlags reads the command line; its usage and errors go to stderr.
func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("redlock-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.path, "config", "config.toml", "configuration file (TOML)")
	fs.BoolVar(&f.check, "check-config", false, "validate the configuration and exit")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) of the whole run to this file, closed at shutdown")
	fs.BoolVar(&f.initMasters, "init-masters", false, "declare the masters a new deployment (each empty, never used for locks), so that the restart guard does not hold them back at the first start; then exit")
	f.over = overrides{}
	for _, o := range overrideTable {
		fs.Func(o.flag, o.help+" (env "+o.env+"; overrides the config file)", func(v string) error {
			f.over[o.flag] = v
			return nil
		})
	}
	err := fs.Parse(args)
	return f, err
}

// declareMasters declares the masters of srv a new deployment
// (-init-masters), within 10 s, and closes srv.
func declareMasters(srv *proxy.Server, cfg proxy.Config, stderr io.Writer) error {
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.InitMasters(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "masters declared a new deployment: %s\n", strings.Join(redacted(cfg.Redlock.Masters), ", "))
	return nil
}

// startCPUProfile starts a CPU profile written to path; stop ends it and
// closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// serve runs srv until its Serve returns or a signal ends the process:
// SIGHUP reloads the configuration from path (reload), SIGINT and SIGTERM
// close srv and wait up to shutdownWait for Serve to return.
func serve(srv *proxy.Server, gc *gcTuner, path string, over overrides, log zerolog.Logger) error {
	// Signals are taken before Serve logs that it serves: a SIGHUP sent
	// after that line must reload, not end the process.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	for {
		select {
		case err := <-done:
			return err
		case s := <-sig:
			if s == syscall.SIGHUP {
				reload(srv, gc, path, over, log)
				continue
			}
			log.Info().Str("signal", s.String()).Msg("shutting down")
			_ = srv.Close()
			select {
			case <-done:
			case <-time.After(shutdownWait):
			}
			return nil
		}
	}
}

// shutdownWait bounds how long SIGTERM waits for clients to be closed; the
// deploy files give the process longer than this to stop.
const shutdownWait = 10 * time.Second

// reload re-reads the configuration on SIGHUP and applies what is safe to
// change live; anything else is refused, with the reason in the log.
func reload(srv *proxy.Server, gc *gcTuner, path string, over overrides, log zerolog.Logger) {
	cfg, err := loadConfig(path, over)
	if err == nil {
		var changed []string
		if changed, err = srv.Reload(cfg); err == nil {
			lvl, _ := zerolog.ParseLevel(cfg.Log.Level)
			zerolog.SetGlobalLevel(lvl)
			setProcs(cfg.Proxy.Procs)
			if gc != nil {
				gc.headroom.Store(int64(cfg.Proxy.GCHeadroom)) // from its next tune
			}
			log.Info().Strs("changed", changed).Msg("configuration reloaded")
			return
		}
	}
	log.Error().Err(err).Msg("configuration reload refused; the running configuration is unchanged")
}

// setProcs applies proxy.procs: n threads run Go code at once, or, for 0,
// what Go chooses by itself (the GOMAXPROCS environment variable, else one
// per CPU the process may use).
func setProcs(n int) {
	if n == 0 {
		if v, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && v > 0 {
			n = v
		}
	}
	if n > 0 {
		runtime.GOMAXPROCS(n)
	} else {
		runtime.SetDefaultGOMAXPROCS()
	}
}

// redisLogger sends go-redis's own messages (pool dial failures and the
// like) to the proxy's log instead of plain lines on stderr.
type redisLogger struct{ log zerolog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug().Msgf(format, v...)
}

// loadConfig reads a TOML file over the defaults; an unknown key is an error
// that names it.
func loadConfig(path string, over overrides) (proxy.Config, error) {
	cfg := proxy.DefaultConfig()
	md, err := toml.DecodeFile(path, &cfg)
	if err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return cfg, fmt.Errorf("config %s: unknown key %s", path, strings.Join(keys, ", "))
	}
	for i := range cfg.Scripts {
		f := cfg.Scripts[i].File
		if f == "" {
			return cfg, fmt.Errorf("config %s: scripts[%d]: file is missing", path, i)
		}
		f = relTo(filepath.Dir(path), f)
		src, err := os.ReadFile(f)
		if err != nil {
			return cfg, fmt.Errorf("config %s: scripts[%d]: %w", path, i, err)
		}
		cfg.Scripts[i].Source = string(src)
	}
	over.apply(&cfg, os.Getenv)
	cfg.GuardsOff = guardsOffFromEnv() // only in a binary built for tests (guardsoff.go)
	if err := loadTLS(&cfg.Proxy, filepath.Dir(path)); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if err := loadMasterTLS(&cfg.Redlock, filepath.Dir(path)); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// newLogger logs JSON, or readable console output when format is "console",
// or "auto" and stderr is a terminal.
func newLogger(c proxy.LogConfig, w io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(c.Level)
	if err != nil || c.Level == "" {
		return zerolog.Logger{}, errors.New("log.level: " + c.Level + " is not one of trace, debug, info, warn, error")
	}
	if f, ok := w.(*os.File); c.Format == "console" || (c.Format == "auto" && ok && isatty.IsTerminal(f.Fd())) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	// The level is global so that SIGHUP can change it.
	zerolog.SetGlobalLevel(lvl)
	return zerolog.New(w).With().Timestamp().Logger(), nil
}

// overrides holds the values given by flags, by flag name.
type overrides map[string]string

// overrideTable lists the settings that flags and environment variables
// can override: a flag wins over its variable, which wins over the file.
var overrideTable = []struct {
	flag, env, help string
	set             func(c *proxy.Config, v string)
}{
	{"listen", "REDLOCK_PROXY_LISTEN", "proxy.listen", func(c *proxy.Config, v string) { c.Proxy.Listen = v }},
	{"backend", "REDLOCK_PROXY_BACKEND", "proxy.backend", func(c *proxy.Config, v string) { c.Proxy.Backend = v }},
	{"masters", "REDLOCK_PROXY_MASTERS", "redlock.masters, comma-separated (host:port, or sentinel://host:port,host:port/name for a Sentinel group)", func(c *proxy.Config, v string) {
		c.Redlock.Masters = proxy.SplitMasters(v)
	}},
	{"password", "REDLOCK_PROXY_PASSWORD", "redlock.password", func(c *proxy.Config, v string) { c.Redlock.Password = v }},
	{"metrics-listen", "REDLOCK_PROXY_METRICS_LISTEN", "metrics.listen", func(c *proxy.Config, v string) { c.Metrics.Listen = v }},
	{"log-level", "REDLOCK_PROXY_LOG_LEVEL", "log.level", func(c *proxy.Config, v string) { c.Log.Level = v }},
}

func (o overrides) apply(c *proxy.Config, getenv func(string) string) {
	for _, t := range overrideTable {
		if v, ok := o[t.flag]; ok {
			t.set(c, v)
		} else if v := getenv(t.env); v != "" {
			t.set(c, v)
		}
	}
}

// loadTLS builds the client-facing TLS configuration from proxy.tls_cert,
// tls_key and tls_client_ca (paths relative to the config file).
func loadTLS(p *proxy.ProxyConfig, dir string) error {
	if p.TLSCert == "" && p.TLSKey == "" && p.TLSClientCA == "" {
		return nil
	}
	rel := func(f string) string { return relTo(dir, f) }
	if p.TLSCert == "" || p.TLSKey == "" {
		return errors.New("proxy.tls_cert and proxy.tls_key go together")
	}
	cert, err := tls.LoadX509KeyPair(rel(p.TLSCert), rel(p.TLSKey))
	if err != nil {
		return fmt.Errorf("proxy.tls_cert/tls_key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if p.TLSClientCA != "" {
		pool, err := readCAPool(rel(p.TLSClientCA), "proxy.tls_client_ca")
		if err != nil {
			return err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	p.TLS = cfg
	return nil
}

// loadMasterTLS builds the TLS configuration for connections to the masters
// (and the backend) from redlock.tls_ca, tls_cert, tls_key and
// tls_server_name.
func loadMasterTLS(r *proxy.RedlockConfig, dir string) error {
	if r.TLSCA == "" && r.TLSCert == "" && r.TLSKey == "" {
		return nil
	}
	rel := func(f string) string { return relTo(dir, f) }
	cfg := &tls.Config{ServerName: r.TLSServerName, MinVersion: tls.VersionTLS12}
	if r.TLSCA != "" {
		pool, err := readCAPool(rel(r.TLSCA), "redlock.tls_ca")
		if err != nil {
			return err
		}
		cfg.RootCAs = pool
	}
	if (r.TLSCert == "") != (r.TLSKey == "") {
		return errors.New("redlock.tls_cert and redlock.tls_key go together")
	}
	if r.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(rel(r.TLSCert), rel(r.TLSKey))
		if err != nil {
			return fmt.Errorf("redlock.tls_cert/tls_key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	r.TLS = cfg
	return nil
}

// relTo resolves a path from the config file against the file's directory.
func relTo(dir, f string) string {
	if f == "" || filepath.IsAbs(f) {
		return f
	}
	return filepath.Join(dir, f)
}

// readCAPool reads a PEM CA file named by the config key key.
func readCAPool(path, key string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in the file", key)
	}
	return pool, nil
}

// redacted is the masters as logs show them: no sentinel's password.
func redacted(masters []string) []string {
	out := make([]string, len(masters))
	for i, m := range masters {
		out[i] = engine.Redact(m)
	}
	return out
}
