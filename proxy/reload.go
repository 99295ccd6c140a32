package proxy

import (
	"fmt"
	"reflect"
	"time"
)

func (s *Server) passthroughTimeout() time.Duration { return time.Duration(s.passthrough.Load()) }

// Reload applies a new configuration while the proxy runs. What is safe to
// change live is applied: proxy.max_clients, the client timeouts
// (proxy.passthrough_timeout, idle_timeout, write_timeout: from the next
// command, read or write of each client), the
// client credentials (proxy.password, proxy.users: checked by every AUTH
// from now on; clients that already authenticated stay so) and the
// credentials for the masters and the backend (redlock.username,
// redlock.password, redlock.master_auth: used by every new connection to
// them; open connections stay as they are). The caller applies log.level,
// proxy.procs and proxy.gc_headroom.
// Any other difference is refused as a whole, with the reason: changing the
// masters or the quorum while locks are held moves the majority, and the
// rest needs a restart. It returns the keys it changed, never their values.
func (s *Server) Reload(next Config) ([]string, error) {
	if err := next.Validate(); err != nil {
		return nil, err
	}
	cur := s.cfg
	if !reflect.DeepEqual(cur.Redlock.Masters, next.Redlock.Masters) || cur.Redlock.Quorum != next.Redlock.Quorum {
		return nil, fmt.Errorf("redlock.masters or redlock.quorum changed: unsafe while locks are held (the majority would move); restart the proxy once no lock is held")
	}
	// What may differ: the live settings and the log level.
	if !reflect.DeepEqual(withoutLive(cur), withoutLive(next)) {
		return nil, fmt.Errorf("only log.level, proxy.procs, proxy.gc_headroom, proxy.max_clients, proxy.passthrough_timeout, proxy.idle_timeout, proxy.write_timeout, proxy.password, proxy.users, redlock.username, redlock.password and redlock.master_auth change without a restart")
	}
	var changed []string
	if next.Proxy.MaxClients != cur.Proxy.MaxClients {
		s.maxClients.Store(int64(next.Proxy.MaxClients))
		changed = append(changed, "proxy.max_clients")
	}
	if next.Proxy.PassthroughTimeout != cur.Proxy.PassthroughTimeout {
		s.passthrough.Store(int64(next.Proxy.PassthroughTimeout.Duration))
		changed = append(changed, "proxy.passthrough_timeout")
	}
	if next.Proxy.IdleTimeout != cur.Proxy.IdleTimeout {
		s.idleTimeout.Store(int64(next.Proxy.IdleTimeout.Duration))
		changed = append(changed, "proxy.idle_timeout")
	}
	if next.Proxy.WriteTimeout != cur.Proxy.WriteTimeout {
		s.writeTimeout.Store(int64(next.Proxy.WriteTimeout.Duration))
		changed = append(changed, "proxy.write_timeout")
	}
	if next.Log.Level != cur.Log.Level {
		changed = append(changed, "log.level")
	}
	if next.Proxy.Procs != cur.Proxy.Procs {
		changed = append(changed, "proxy.procs")
	}
	if next.Proxy.GCHeadroom != cur.Proxy.GCHeadroom {
		changed = append(changed, "proxy.gc_headroom")
	}
	changed = append(changed, s.reloadCredentials(cur, next)...)
	s.mu.Lock()
	s.cfg.Proxy.MaxClients, s.cfg.Proxy.PassthroughTimeout, s.cfg.Log.Level = next.Proxy.MaxClients, next.Proxy.PassthroughTimeout, next.Log.Level
	s.cfg.Proxy.IdleTimeout, s.cfg.Proxy.WriteTimeout = next.Proxy.IdleTimeout, next.Proxy.WriteTimeout
	s.cfg.Proxy.Procs, s.cfg.Proxy.GCHeadroom = next.Proxy.Procs, next.Proxy.GCHeadroom
	s.cfg.Proxy.Password, s.cfg.Proxy.Users = next.Proxy.Password, next.Proxy.Users
	s.cfg.Redlock.Username, s.cfg.Redlock.Password, s.cfg.Redlock.MasterAuth = next.Redlock.Username, next.Redlock.Password, next.Redlock.MasterAuth
	s.mu.Unlock()
	return changed, nil
}

// withoutLive blanks what a reload may change.
func withoutLive(c Config) Config {
	c.Proxy.MaxClients, c.Proxy.PassthroughTimeout, c.Log.Level = 0, Duration{}, ""
	c.Proxy.IdleTimeout, c.Proxy.WriteTimeout = Duration{}, Duration{}
	c.Proxy.Procs, c.Proxy.GCHeadroom = 0, 0
	c.Proxy.Password, c.Proxy.Users = "", nil
	c.Redlock.Username, c.Redlock.Password, c.Redlock.MasterAuth = "", "", nil
	c.Proxy.TLS, c.Redlock.TLS = nil, nil // rebuilt from the same files on every load
	return c
}

// reloadCredentials swaps the client and master credentials when they
// changed, and names the keys that did.
func (s *Server) reloadCredentials(cur, next Config) []string {
	var changed []string
	if next.Proxy.Password != cur.Proxy.Password {
		changed = append(changed, "proxy.password")
	}
	if !reflect.DeepEqual(next.Proxy.Users, cur.Proxy.Users) {
		changed = append(changed, "proxy.users")
	}
	if len(changed) > 0 {
		s.auth.Store(newClientAuth(next.Proxy))
	}
	n := len(changed)
	if next.Redlock.Username != cur.Redlock.Username {
		changed = append(changed, "redlock.username")
	}
	if next.Redlock.Password != cur.Redlock.Password {
		changed = append(changed, "redlock.password")
	}
	if !reflect.DeepEqual(next.Redlock.MasterAuth, cur.Redlock.MasterAuth) {
		changed = append(changed, "redlock.master_auth")
	}
	if len(changed) > n {
		s.creds.set(next.Redlock)
	}
	return changed
}
