package proxy

import (
	"fmt"
	"reflect"
	"time"
)

func (s *Server) passthroughTimeout() time.Duration { return time.Duration(s.passthrough.Load()) }

// Reload applies a new configuration while the proxy runs. What is safe to
// change live is applied: proxy.max_clients and proxy.passthrough_timeout
// (the caller applies log.level). Any other difference is refused as a
// whole, with the reason: changing the masters or the quorum while locks are
// held moves the majority, and the rest needs a restart. It returns the
// keys it changed.
func (s *Server) Reload(next Config) ([]string, error) {
	if err := next.Validate(); err != nil {
		return nil, err
	}
	cur := s.cfg
	if !reflect.DeepEqual(cur.Redlock.Masters, next.Redlock.Masters) || cur.Redlock.Quorum != next.Redlock.Quorum {
		return nil, fmt.Errorf("redlock.masters or redlock.quorum changed: unsafe while locks are held (the majority would move); restart the proxy once no lock is held")
	}
	// What may differ: the live settings and the log level.
	live := func(c Config) Config {
		c.Proxy.MaxClients, c.Proxy.PassthroughTimeout, c.Log.Level = 0, Duration{}, ""
		c.Proxy.TLS, c.Redlock.TLS = nil, nil // rebuilt from the same files on every load
		return c
	}
	if !reflect.DeepEqual(live(cur), live(next)) {
		return nil, fmt.Errorf("only log.level, proxy.max_clients and proxy.passthrough_timeout change without a restart")
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
	if next.Log.Level != cur.Log.Level {
		changed = append(changed, "log.level")
	}
	s.mu.Lock()
	s.cfg.Proxy.MaxClients, s.cfg.Proxy.PassthroughTimeout, s.cfg.Log.Level = next.Proxy.MaxClients, next.Proxy.PassthroughTimeout, next.Log.Level
	s.mu.Unlock()
	return changed, nil
}
