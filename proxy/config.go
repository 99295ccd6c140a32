package proxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Duration is a time.Duration that reads from TOML strings such as "100ms".
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"100ms\", \"30s\")", b)
	}
	d.Duration = v
	return nil
}

// MarshalText prints the duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Size is a number of bytes. In TOML it is an integer, or a string with one
// of Redis's units, in either case: "k" (1000), "kb" (1024), "m" (1000²),
// "mb" (1024²), "g" (1000³), "gb" (1024³); for example "512mb".
type Size int64

// UnmarshalText parses a byte count such as 1048576, "64kb" or "1gb".
func (s *Size) UnmarshalText(b []byte) error {
	t := strings.ToLower(strings.TrimSpace(string(b)))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > maxSize/mult {
		return fmt.Errorf("invalid size %q (want bytes, or e.g. \"64kb\", \"512mb\", \"1gb\")", b)
	}
	*s = Size(n * mult)
	return nil
}

// MarshalText prints the size in bytes.
func (s Size) MarshalText() ([]byte, error) { return []byte(strconv.FormatInt(int64(s), 10)), nil }

// maxSize bounds every Size setting (1 TiB), far above any sane limit.
const maxSize = 1 << 40

// minLockValue is the least proxy.max_lock_value: room for a lock key, a
// token and a script's other arguments of every client library.
const minLockValue = 1 << 10

// Config is the proxy's configuration; config.toml at the repository root
// documents every field.
type Config struct {
	Proxy   ProxyConfig    `toml:"proxy"`
	Redlock RedlockConfig  `toml:"redlock"`
	Log     LogConfig      `toml:"log"`
	Scripts []ScriptConfig `toml:"scripts"`
	Metrics MetricsConfig  `toml:"metrics"`
	// GuardsOff switches safety mechanisms off, by name (Guards lists
	// them). Only tests that show what each guard prevents set it; a proxy
	// with a guard off can grant a lock to two holders at once.
	GuardsOff []string `toml:"-"`
}

// MetricsConfig is the HTTP side: Prometheus metrics and health checks.
type MetricsConfig struct {
	Listen string `toml:"listen"` // host:port for /metrics, /healthz, /readyz; empty: off
}

// ScriptConfig teaches the proxy a lock script of the operator's own: one
// [[scripts]] entry (lockscripts.Config describes its keys).
type ScriptConfig = lockscripts.Config

// refusesLockKeyCommands reports whether commands the quorum does not serve
// are refused on lock keys (proxy.lock_key_commands, and its default):
// always while the backend is a voting master; with a backend of its own,
// unless every key is a lock key (the application's data among them).
func (c *Config) refusesLockKeyCommands() bool {
	switch c.Proxy.LockKeyCommands {
	case "refuse":
		return true
	case "backend":
		return false
	}
	return c.backendVotes() || !slices.Contains(c.Proxy.LockKeys, "*")
}

// unknownScripts is proxy.unknown_scripts, and its default: "passthrough"
// where a backend of the proxy's own holds data beside the locks (every key
// a lock key, and commands on lock keys go there: mixed.go), whose scripts
// the proxy does not know, "refuse" otherwise.
func (c *Config) unknownScripts() string {
	switch {
	case c.Proxy.UnknownScripts != "":
		return c.Proxy.UnknownScripts
	case !c.backendVotes() && !c.refusesLockKeyCommands():
		return "passthrough"
	}
	return "refuse"
}

// backendVotes reports whether the passthrough backend is one of the
// masters: proxy.backend empty (the first master) or one of them.
func (c *Config) backendVotes() bool {
	return slices.Contains(c.Redlock.Masters, c.backendAddr())
}

// ProxyConfig is the client-facing side.
type ProxyConfig struct {
	Listen             string   `toml:"listen"`
	Backend            string   `toml:"backend"`
	LockKeys           []string `toml:"lock_keys"`
	PassthroughTimeout Duration `toml:"passthrough_timeout"`
	Password           string   `toml:"password"`      // clients must AUTH with it (the "default" user); empty: no AUTH
	TLSCert            string   `toml:"tls_cert"`      // PEM certificate: clients connect with TLS
	TLSKey             string   `toml:"tls_key"`       // PEM key of tls_cert
	TLSClientCA        string   `toml:"tls_client_ca"` // PEM CA: clients must present a certificate it signed
	// TLS is built from the files above by the caller (only cmd reads files).
	TLS         *tls.Config  `toml:"-"`
	Users       []UserConfig `toml:"users"` // further users for AUTH user pass
	MaxClients  int          `toml:"max_clients"`
	IdleTimeout Duration     `toml:"idle_timeout"`

	// MaxBulkLen is the longest argument a client may send (Redis's
	// proto-max-bulk-len); a longer declared length closes the client
	// with "Protocol error: invalid bulk length".
	MaxBulkLen Size `toml:"max_bulk_len"`
	// MaxQueryBuffer bounds the bytes of one command a client may have sent
	// but not finished (Redis's client-query-buffer-limit).
	MaxQueryBuffer Size `toml:"max_query_buffer"`
	// MaxLockValue bounds what one lock operation carries to every master:
	// its keys and arguments together (a token, a key name, a script's
	// ARGV), and the value of a lock key a quorum operation brings back.
	// Beyond it the operation is refused before anything is sent
	// (payload.go).
	MaxLockValue Size `toml:"max_lock_value"`
	// WriteTimeout closes a client that does not read its replies: a write
	// to it that makes no progress for this long fails. 0 waits forever.
	WriteTimeout Duration `toml:"write_timeout"`
	// LockWaitPoll is how often a LOCK.ACQUIRE … WAIT at the head of its
	// key's queue tries again when nothing woke it earlier; it bounds how
	// late a release through another proxy is noticed.
	LockWaitPoll Duration `toml:"lock_wait_poll"`
	// LeaseTTL is the TTL of a LOCK.ACQUIRE … LEASE lock, renewed every
	// third of it while the client's connection is open.
	LeaseTTL Duration `toml:"lease_ttl"`
	// UnknownScripts is what becomes of a script the proxy does not
	// recognise (EVAL, EVALSHA, their _RO forms, FCALL) whose keys include
	// a lock key, with a backend of the proxy's own: "refuse" answers an
	// error that says how to declare it ([[scripts]]); "passthrough" runs
	// it on the backend, on its keys, not the locks. Empty (the default):
	// "passthrough" where the backend holds data beside the locks
	// (mixed.go), "refuse" otherwise. On a voting backend every such
	// script is refused, and "passthrough" is an error.
	UnknownScripts string `toml:"unknown_scripts"`
	// LockKeyCommands is what becomes of a command the quorum does not
	// serve (INCR, HSET, RENAME, ZADD, WATCH, a blocking pop…) that names
	// a lock key: "refuse" answers an error, "backend" runs it on the
	// backend alone, where it reads or changes one master's copy. Empty
	// (the default): "backend" while proxy.lock_keys holds "*" (every key
	// is a lock key, an application's data included), "refuse" otherwise.
	LockKeyCommands string `toml:"lock_key_commands"`
	// MaxInflight is how many lock operations one client may have running
	// at once: pipelined after one another, up to this many run together
	// (pipeline.go), and the client's next input is read once they are
	// done.
	MaxInflight int `toml:"max_inflight"`
	// Procs is how many threads run the proxy's Go code at once
	// (GOMAXPROCS), set by the program that runs the Server. 0 leaves Go's
	// choice: the GOMAXPROCS environment variable, else one per CPU the
	// process may use.
	Procs int `toml:"procs"`
	// GCHeadroom is how much the heap may grow between two garbage
	// collections at least, set by the program that runs the Server: where
	// the heap is small, as it is when the proxy serves locks, Go's default
	// (GOGC=100, and a 4 MB heap at least) collects many times a second.
	// 0 leaves Go's default, or the GOGC environment variable.
	GCHeadroom Size `toml:"gc_headroom"`
}

// UserConfig is a client user for "AUTH user password".
type UserConfig struct {
	Name     string `toml:"name"`
	Password string `toml:"password"`
	// Keys are the keys the user may name, as Redis ACL writes them:
	// "~pattern" (glob patterns, as KEYS reads them), or "allkeys". A
	// command that names another key is refused with Redis's NOPERM
	// error. Absent: every key; empty: none.
	Keys []string `toml:"keys"`
	// Locks says whether the user may take locks at all: false refuses
	// its lock operations (SET NX and SETNX of lock keys, the quorum's
	// other writes of them, recognised lock scripts, LOCK.ACQUIRE,
	// RELEASE and EXTEND) with NOPERM; it may still read them. Absent:
	// true.
	Locks *bool `toml:"locks"`
}

// RedlockConfig is the quorum side.
type RedlockConfig struct {
	Masters       []string `toml:"masters"`
	Password      string   `toml:"password"`
	TLSCA         string   `toml:"tls_ca"`          // PEM CA that signed the masters' certificates: connect with TLS
	TLSCert       string   `toml:"tls_cert"`        // PEM client certificate for masters that ask for one
	TLSKey        string   `toml:"tls_key"`         // its key
	TLSServerName string   `toml:"tls_server_name"` // name to verify in the masters' certificates; default: the host
	// TLS is built from the files above by the caller (only cmd reads files).
	TLS          *tls.Config `toml:"-"`
	Quorum       int         `toml:"quorum"`
	NodeTimeout  Duration    `toml:"node_timeout"`
	DriftFactor  float64     `toml:"drift_factor"`
	RetryCount   int         `toml:"retry_count"`
	RetryDelay   Duration    `toml:"retry_delay"`
	GuardWindow  Duration    `toml:"restart_guard_window"`
	RestartGuard bool        `toml:"restart_guard"`
	// MaxLockTTL is the longest TTL a lock operation may write; one that
	// asks for more is refused before anything is sent. It bounds how
	// long a master that lost its data is kept from voting on one key
	// (engine.WithMaxLockTTL).
	MaxLockTTL Duration `toml:"max_lock_ttl"`
	PoolSize   int      `toml:"pool_size"`
	// WaitReplicas, when above 0, makes lock writes count on a master only
	// once that many of its replicas acknowledged them (WAIT;
	// engine.WithWaitReplicas).
	WaitReplicas int `toml:"wait_replicas"`
	// ClockCheck is how often each master's TIME is compared with the
	// proxy's monotonic clock (0: never); ClockJump is the difference beyond
	// which the master is guarded as if it had restarted.
	ClockCheck Duration `toml:"clock_check"`
	ClockJump  Duration `toml:"clock_jump"`
	// Username is the ACL user that goes with Password (AUTH user pass);
	// empty: the default user.
	Username string `toml:"username"`
	// MasterAuth gives single masters (or the backend) credentials of their
	// own, in place of Username and Password.
	MasterAuth []MasterAuthConfig `toml:"master_auth"`
}

// LogConfig sets logging.
type LogConfig struct {
	Level  string `toml:"level"`
	Format string `toml:"format"` // "json", "console" or "auto"
}

// DefaultConfig returns the defaults that config.toml documents.
func DefaultConfig() Config {
	return Config{
		Proxy: ProxyConfig{
			Listen: "127.0.0.1:6380", LockKeys: []string{"*"},
			PassthroughTimeout: Duration{5 * time.Second}, MaxClients: 10000,
			MaxBulkLen: 512 << 20, MaxQueryBuffer: 1 << 30, MaxLockValue: 64 << 10, WriteTimeout: Duration{30 * time.Second},
			LockWaitPoll: Duration{time.Second}, LeaseTTL: Duration{10 * time.Second}, MaxInflight: 512,
			GCHeadroom: 16 << 20,
		},
		Redlock: RedlockConfig{
			NodeTimeout: Duration{100 * time.Millisecond}, DriftFactor: 0.01,
			RetryCount: 3, RetryDelay: Duration{50 * time.Millisecond},
			GuardWindow: Duration{60 * time.Second}, RestartGuard: true, MaxLockTTL: Duration{engine.DefaultMaxLockTTL}, PoolSize: 64,
			ClockCheck: Duration{time.Second}, ClockJump: Duration{time.Second},
		},
		Log: LogConfig{Level: "info", Format: "auto"},
	}
}

// Validate reports the first bad value, naming its key.
func (c *Config) Validate() error {
	if err := checkAddr("proxy.listen", c.Proxy.Listen); err != nil {
		return err
	}
	if err := checkMasters(c.Redlock.Masters); err != nil {
		return err
	}
	if backend.IsClusterAddr(c.Proxy.Backend) {
		if err := checkClusterBackend(c); err != nil { // cluster.go
			return err
		}
	} else if c.Proxy.Backend != "" {
		if engine.IsSentinelAddr(c.Proxy.Backend) {
			// Its connections follow the group's primary (backend.Sentinel).
			if _, err := engine.ParseSentinelAddr(c.Proxy.Backend); err != nil {
				return fmt.Errorf("proxy.backend: %w", err)
			}
		} else if err := checkAddr("proxy.backend", c.Proxy.Backend); err != nil {
			return err
		}
	} else if engine.IsClusterAddr(c.Redlock.Masters[0]) {
		// The backend would be the first master, one server: a cluster
		// voter is many.
		return fmt.Errorf("proxy.backend: empty, so the backend would be the first master, %s, a Redis Cluster: give the proxy a backend of its own (proxy.backend) when the first voter is a cluster", c.Redlock.Masters[0])
	}
	if err := validateMasterAuth(c); err != nil {
		return err
	}
	if err := validateUsers(c.Proxy.Users); err != nil {
		return err
	}
	if err := c.checkRedlock(); err != nil {
		return err
	}
	if err := c.checkProxyLimits(); err != nil {
		return err
	}
	if c.Metrics.Listen != "" {
		if err := checkAddr("metrics.listen", c.Metrics.Listen); err != nil {
			return err
		}
	}
	if _, err := lockscripts.Specs(c.Scripts); err != nil {
		return err
	}
	return c.checkLogAndGuards()
}

// checkMasters checks redlock.masters: at least one, each well formed,
// none twice.
func checkMasters(masters []string) error {
	if len(masters) == 0 {
		return errors.New("redlock.masters: at least one master is needed (3 or 5 recommended)")
	}
	seen := map[string]bool{}
	for _, m := range masters {
		if err := checkMaster(m); err != nil {
			return err
		}
		if seen[m] {
			return fmt.Errorf("redlock.masters: %q is listed twice", engine.Redact(m))
		}
		seen[m] = true
	}
	return nil
}

// checkRedlock checks the settings of the lock algorithm (redlock.*), and
// proxy.lease_ttl against redlock.max_lock_ttl.
func (c *Config) checkRedlock() error {
	r, n := c.Redlock, len(c.Redlock.Masters)
	switch {
	case r.Quorum != 0 && (r.Quorum <= n/2 || r.Quorum > n):
		return fmt.Errorf("redlock.quorum: %d is not a majority of %d masters (want %d..%d, or 0 for %d)", r.Quorum, n, n/2+1, n, n/2+1)
	case r.NodeTimeout.Duration <= 0:
		return errors.New("redlock.node_timeout: must be positive")
	case r.DriftFactor < 0 || r.DriftFactor >= 0.5:
		return fmt.Errorf("redlock.drift_factor: %v is outside [0, 0.5)", r.DriftFactor)
	case r.RetryCount < 0:
		return errors.New("redlock.retry_count: must not be negative")
	case r.RetryDelay.Duration < 0:
		return errors.New("redlock.retry_delay: must not be negative")
	case r.RestartGuard && r.GuardWindow.Duration <= 0:
		return errors.New("redlock.restart_guard_window: must be positive while restart_guard is on")
	case r.GuardWindow.Duration < 0 || r.GuardWindow.Duration > engine.LongestMaxLockTTL:
		return fmt.Errorf("redlock.restart_guard_window: %s is outside 0s..%s", r.GuardWindow.Duration, engine.LongestMaxLockTTL)
	case r.WaitReplicas < 0:
		return fmt.Errorf("redlock.wait_replicas: %d is negative", r.WaitReplicas)
	case r.MaxLockTTL.Duration < time.Millisecond || r.MaxLockTTL.Duration > engine.LongestMaxLockTTL:
		return fmt.Errorf("redlock.max_lock_ttl: %s is outside 1ms..%s", r.MaxLockTTL.Duration, engine.LongestMaxLockTTL)
	case c.Proxy.LeaseTTL.Duration > r.MaxLockTTL.Duration:
		return fmt.Errorf("proxy.lease_ttl: %s is above redlock.max_lock_ttl (%s): every lease would be refused", c.Proxy.LeaseTTL.Duration, r.MaxLockTTL.Duration)
	case r.PoolSize <= 0:
		return errors.New("redlock.pool_size: must be positive")
	case r.ClockCheck.Duration < 0:
		return errors.New("redlock.clock_check: must not be negative")
	case r.ClockJump.Duration < 0:
		return errors.New("redlock.clock_jump: must not be negative")
	}
	return nil
}

// checkProxyLimits checks the proxy's timeouts, limits and modes (proxy.*).
func (c *Config) checkProxyLimits() error {
	switch {
	case c.Proxy.PassthroughTimeout.Duration <= 0:
		return errors.New("proxy.passthrough_timeout: must be positive")
	case c.Proxy.MaxClients <= 0:
		return errors.New("proxy.max_clients: must be positive")
	case c.Proxy.Procs < 0 || c.Proxy.Procs > 1024:
		return errors.New("proxy.procs: must be between 0 (Go's default) and 1024")
	case c.Proxy.GCHeadroom < 0 || c.Proxy.GCHeadroom > maxSize:
		return fmt.Errorf("proxy.gc_headroom: %d is outside 0..%d bytes", c.Proxy.GCHeadroom, int64(maxSize))
	case c.Proxy.IdleTimeout.Duration < 0:
		return errors.New("proxy.idle_timeout: must not be negative")
	case c.Proxy.MaxBulkLen <= 0 || c.Proxy.MaxBulkLen > maxSize:
		return fmt.Errorf("proxy.max_bulk_len: %d is outside 1..%d bytes", c.Proxy.MaxBulkLen, int64(maxSize))
	case c.Proxy.MaxQueryBuffer < c.Proxy.MaxBulkLen || c.Proxy.MaxQueryBuffer > maxSize:
		return fmt.Errorf("proxy.max_query_buffer: %d is outside %d (proxy.max_bulk_len)..%d bytes", c.Proxy.MaxQueryBuffer, c.Proxy.MaxBulkLen, int64(maxSize))
	case c.Proxy.MaxLockValue < minLockValue || c.Proxy.MaxLockValue > maxSize:
		return fmt.Errorf("proxy.max_lock_value: %d is outside %d..%d bytes", c.Proxy.MaxLockValue, minLockValue, int64(maxSize))
	case c.Proxy.WriteTimeout.Duration < 0:
		return errors.New("proxy.write_timeout: must not be negative")
	case c.Proxy.LockWaitPoll.Duration <= 0:
		return errors.New("proxy.lock_wait_poll: must be positive")
	case c.Proxy.LeaseTTL.Duration < 30*time.Millisecond:
		return errors.New("proxy.lease_ttl: must be at least 30ms")
	case c.Proxy.MaxInflight < 1:
		return errors.New("proxy.max_inflight: must be at least 1")
	case c.Proxy.UnknownScripts != "" && c.Proxy.UnknownScripts != "refuse" && c.Proxy.UnknownScripts != "passthrough":
		return fmt.Errorf("proxy.unknown_scripts: %q is not refuse or passthrough", c.Proxy.UnknownScripts)
	case c.Proxy.LockKeyCommands != "" && c.Proxy.LockKeyCommands != "refuse" && c.Proxy.LockKeyCommands != "backend":
		return fmt.Errorf("proxy.lock_key_commands: %q is not refuse or backend", c.Proxy.LockKeyCommands)
	case c.Proxy.UnknownScripts == "passthrough" && c.backendVotes():
		return errors.New("proxy.unknown_scripts: \"passthrough\" would run scripts the proxy does not know on a voting master (proxy.backend is empty or one of redlock.masters), where they can change locks on that master alone; give the proxy a backend of its own (proxy.backend)")
	case c.Proxy.LockKeyCommands == "backend" && c.backendVotes():
		return errors.New("proxy.lock_key_commands: \"backend\" would run commands on lock keys on a voting master (proxy.backend is empty or one of redlock.masters), where they read or change that master's copy of a lock alone; give the proxy a backend of its own (proxy.backend)")
	}
	return nil
}

// checkLogAndGuards checks log.* and the names of the guards turned off.
func (c *Config) checkLogAndGuards() error {
	switch c.Log.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: %q is not one of trace, debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "console", "auto":
	default:
		return fmt.Errorf("log.format: %q is not one of json, console, auto", c.Log.Format)
	}
	for _, g := range c.GuardsOff {
		if !slices.Contains(Guards(), g) {
			return fmt.Errorf("guard %q is not one of %s", g, strings.Join(Guards(), ", "))
		}
	}
	return nil
}

// checkMaster checks one entry of redlock.masters: host:port, a
// Sentinel group, sentinel://[user:password@]host:port[,host:port…]/name,
// or a Redis Cluster, cluster://host:port[,host:port…]/ (its seed nodes).
func checkMaster(addr string) error {
	if engine.IsClusterAddr(addr) {
		if _, err := engine.ParseClusterAddr(addr); err != nil {
			return fmt.Errorf("redlock.masters: %w", err)
		}
		return nil
	}
	if engine.IsSentinelAddr(addr) {
		if _, err := engine.ParseSentinelAddr(addr); err != nil {
			return fmt.Errorf("redlock.masters: %w", err)
		}
		return nil
	}
	if strings.Contains(addr, "://") {
		return fmt.Errorf("redlock.masters: %q is neither host:port nor sentinel://host:port[,host:port…]/name nor cluster://host:port[,host:port…]/", addr)
	}
	return checkAddr("redlock.masters", addr)
}

// SplitMasters splits a comma-separated list of masters (the -masters
// flag, REDLOCK_PROXY_MASTERS), where a Sentinel group's sentinels are
// themselves separated by commas: "sentinel://a:1,b:2/name,host:port" is
// two masters. A comma ends an entry unless it falls among the sentinels
// of a sentinel:// entry, before its "/name", or among the seed nodes of
// a cluster:// entry, before its closing "/".
func SplitMasters(v string) []string {
	var out []string
	open := func(e string) bool {
		switch {
		case engine.IsSentinelAddr(e):
			return !strings.Contains(strings.TrimPrefix(e, "sentinel://"), "/")
		case engine.IsClusterAddr(e):
			return !strings.Contains(strings.TrimPrefix(e, "cluster://"), "/")
		}
		return false
	}
	for _, part := range strings.Split(v, ",") {
		if n := len(out); n > 0 && open(out[n-1]) {
			out[n-1] += "," + part
			continue
		}
		out = append(out, part)
	}
	return out
}

func checkAddr(key, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%s: %q is not host:port", key, addr)
	}
	return nil
}

// settingsSummary names what every proxy in front of the same masters must
// agree on, or their locks do not exclude each other: the masters, the
// quorum, the lock keys, the restart guard, the longest lock TTL, the drift
// factor, the handling of unknown scripts and of other commands on lock
// keys, and the guards switched off. Each proxy publishes it
// on the masters (engine.WithSettings).
func (c *Config) settingsSummary() string {
	masters, keys, off := slices.Clone(c.Redlock.Masters), slices.Clone(c.Proxy.LockKeys), slices.Clone(c.GuardsOff)
	for i, m := range masters {
		masters[i] = engine.Redact(m) // published on the masters: no sentinel's password
	}
	slices.Sort(masters)
	slices.Sort(keys)
	slices.Sort(off)
	q := c.Redlock.Quorum
	if q == 0 {
		q = len(masters)/2 + 1
	}
	guard := "off"
	if c.Redlock.RestartGuard {
		guard = c.Redlock.GuardWindow.String()
	}
	lkc := "backend"
	if c.refusesLockKeyCommands() {
		lkc = "refuse"
	}
	s := fmt.Sprintf("masters=%s quorum=%d lock_keys=%s restart_guard=%s max_lock_ttl=%s drift_factor=%v unknown_scripts=%s lock_key_commands=%s",
		strings.Join(masters, ","), q, strings.Join(keys, ","), guard, c.Redlock.MaxLockTTL, c.Redlock.DriftFactor, c.unknownScripts(), lkc)
	if len(off) > 0 {
		s += " guards_off=" + strings.Join(off, ",")
	}
	return s
}

// backendAddr is the passthrough backend: proxy.backend, else the first master.
func (c *Config) backendAddr() string {
	if c.Proxy.Backend != "" {
		return c.Proxy.Backend
	}
	return c.Redlock.Masters[0]
}
