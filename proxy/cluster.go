package proxy

import (
	"fmt"
	"slices"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
)

// A Redis Cluster as the passthrough backend (proxy.backend =
// "cluster://host:port,host:port"): the proxy presents itself as one
// standalone Redis, and the application's data lives in the cluster. The
// connections to its primaries and the slot map are package backend's
// (backend.Cluster, backend/cluster.go): each command with keys goes to
// the primary that serves its slot, and a MOVED or ASK is followed there,
// never reaching the client. Here, what needs a client's session or the
// proxy's configuration: multi-key commands whose keys are in different
// slots are split (clusterroute.go), or answered CROSSSLOT as the cluster
// answers them; transactions, WATCH and blocking commands keep a
// connection of the client's own on one primary (clustertx.go); INFO is
// merged from every primary (clusterinfo.go). docs/commands.md, "A Redis
// Cluster as the backend", lists what is routed, split and refused.

// checkClusterBackend validates a cluster backend: its seeds, none of
// which may be a master (the cluster is the application's data, never a
// voter).
func checkClusterBackend(c *Config) error {
	seeds, err := backend.ParseClusterAddr(c.Proxy.Backend)
	if err != nil {
		return fmt.Errorf("proxy.backend: %w", err)
	}
	for _, s := range seeds {
		if slices.Contains(c.Redlock.Masters, s) {
			return fmt.Errorf("proxy.backend: %s is one of redlock.masters; a Redis Cluster backend holds the application's data and is never a voter: give it nodes of its own", s)
		}
	}
	return nil
}
