package proxy

import (
	"slices"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Guards lists the names of the safety mechanisms that Config.GuardsOff
// can switch off: those of the quorum engine's client, and the proxy's own.
func Guards() []string {
	var out []string
	for _, g := range engine.Guards() {
		out = append(out, string(g))
	}
	return append(out, proxyGuards...)
}

// proxyGuards are the proxy's own guards.
var proxyGuards = []string{guardLeaseLapse, guardAdmin, guardLockCache, guardReserved, guardBackendLockKeys, guardBackendScripts, guardLockValue}

// guardsOff is the engine option that switches off the client's guards
// named in names.
func guardsOff(names []string) engine.Option {
	var gs []engine.Guard
	for _, g := range engine.Guards() {
		if slices.Contains(names, string(g)) {
			gs = append(gs, g)
		}
	}
	return engine.WithGuardsOff(gs...)
}

// off reports whether the proxy guard named g is switched off.
func (s *Server) off(g string) bool { return slices.Contains(s.cfg.GuardsOff, g) }
