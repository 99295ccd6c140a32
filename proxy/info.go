package proxy

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
	"github.com/tidwall/redcon"
)

// cmdInfo answers the proxy's own INFO: its server fields, clients, lock
// statistics and the state of each master. Section arguments select
// sections, as on Redis 7 (INFO server memory).
func cmdInfo(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	// Sections as Redis 7 takes them: any number, in any case; none is
	// "default".
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(args) == 1 || want["default"] || want["all"] || want["everything"]
	var b strings.Builder
	section := func(name string, body func()) {
		if all || want[strings.ToLower(name)] {
			fmt.Fprintf(&b, "# %s\r\n", name)
			body()
			b.WriteString("\r\n")
		}
	}
	section("Server", func() {
		fmt.Fprintf(&b, "redis_version:%s\r\nredlock_proxy_version:%s\r\nredis_mode:standalone\r\nos:%s %s\r\nprocess_id:%d\r\ntcp_port:%s\r\nuptime_in_seconds:%d\r\n",
			redisVersion, Version, runtime.GOOS, runtime.GOARCH, os.Getpid(), portOf(s.cfg.Proxy.Listen), int(time.Since(s.started).Seconds()))
	})
	section("Memory", func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Fprintf(&b, "used_memory:%d\r\nheap_sys:%d\r\ngoroutines:%d\r\n", m.HeapAlloc, m.HeapSys, runtime.NumGoroutine())
	})
	section("Clients", func() {
		fmt.Fprintf(&b, "connected_clients:%d\r\nmaxclients:%d\r\ntotal_connections_received:%d\r\nlock_waiters:%d\r\nlock_leases:%d\r\n",
			s.clients.Load(), s.maxClients.Load(), s.m.Totals().Connections, s.waits.waiting(), s.leasesActive.Load())
	})
	s.backendSections(&b, st, all, want)
	section("Redlock", func() {
		ms := s.rl.Status()
		up, guarded := 0, 0
		for _, m := range ms {
			if m.Up {
				up++
			}
			if m.Guarded {
				guarded++
			}
		}
		fmt.Fprintf(&b, "masters:%d\r\nquorum:%d\r\nmasters_up:%d\r\nmasters_guarded:%d\r\nrestart_guard_window_ms:%d\r\n",
			len(ms), s.rl.Quorum(), up, guarded, s.guardWindow().Milliseconds())
		others := s.rl.OtherSettings()
		fmt.Fprintf(&b, "settings:%s\r\nother_settings:%d\r\n", infoSettings(s.settings), len(others))
		for i, o := range others {
			fmt.Fprintf(&b, "other_settings%d:%s\r\n", i, infoSettings(o))
		}
		t := s.m.Totals()
		fmt.Fprintf(&b, "acquires:%d\r\nacquires_granted:%d\r\nacquires_held_elsewhere:%d\r\nacquires_no_quorum:%d\r\nacquires_not_granted_other:%d\r\nreleases:%d\r\nextends:%d\r\npassthrough_commands:%d\r\npipelined_lock_operations:%d\r\n",
			t.Acquires, t.Granted, t.Held, t.NoQuorum, t.OtherFailures, t.Releases, t.Extends, t.Passthrough, t.Pipelined)
		for i, m := range ms {
			state := "up"
			if !m.Up {
				state = "down"
			}
			fmt.Fprintf(&b, "master%d:state=%s,durable=%d,guarded=%d,guard_left_ms=%d,guarded_keys=%d,restarts=%d,clock_jumps=%d,latency_us=%d,pipelines=%d,commands=%d,marked_down=%d,handoffs=%d,alone_commands=%d,role=%s,replicas=%d,min_replicas_to_write=%d,promotions=%d,maxmemory_policy=%s,maxmemory=%d,evicted_keys=%d,evictions=%d,run_id=%s%s\r\n",
				i, state, b2i(m.Durable), b2i(m.Guarded), m.GuardLeft.Milliseconds(), m.GuardedKeys, m.Restarts, m.ClockJumps, m.LastLatency.Microseconds(), m.Pipelines, m.Commands, m.MarkedDown, m.Handoffs, m.AloneCommands,
				orNone(m.Role), m.Replicas, m.MinReplicasToWrite, m.Promotions, orNone(m.EvictionPolicy), m.Maxmemory, m.EvictedKeys, m.Evictions, m.RunID, infoSentinel(m.Sentinel)+infoCluster(m.Cluster))
			infoShards(&b, i, m.Cluster)
		}
		if g := s.backendSentinel(); g != nil { // a Sentinel group as the backend (backend.Sentinel)
			fmt.Fprintf(&b, "backend:%s\r\n", strings.TrimPrefix(infoSentinel(g), ","))
		}
	})
	wire.WriteVerbatim(c, b.String())
	return replied
}

// infoSentinel is what INFO adds to a master given as a Sentinel group:
// the group, the primary its connections go to, how many of its
// sentinels answered the last time (of how many), for how long none has,
// and the changes of primary seen.
func infoSentinel(g *engine.SentinelStatus) string {
	if g == nil {
		return ""
	}
	down := int64(0)
	if !g.Reachable && !g.UnreachableSince.IsZero() {
		down = time.Since(g.UnreachableSince).Milliseconds()
	}
	return fmt.Sprintf(",sentinel_group=%s,primary=%s,sentinels=%d,sentinels_answered=%d,sentinels_reachable=%d,sentinels_unreachable_ms=%d,primary_switches=%d",
		g.Name, g.Primary, g.Sentinels, g.Answered, b2i(g.Reachable), down, g.Switches)
}

// infoCluster is what INFO adds to a master given as a Redis Cluster: the
// shards seen, whether a slot map is known, and the MOVED and ASK replies
// followed.
func infoCluster(cs *engine.ClusterStatus) string {
	if cs == nil {
		return ""
	}
	guarded := 0
	for _, s := range cs.Shards {
		if s.Slots > 0 && s.Guarded {
			guarded++
		}
	}
	return fmt.Sprintf(",cluster_shards=%d,cluster_slot_map=%d,cluster_shards_guarded=%d,cluster_moved=%d,cluster_asked=%d,cluster_map_reads=%d",
		len(cs.Shards), b2i(cs.Known), guarded, cs.Moved, cs.Asked, cs.Refreshes)
}

// infoShards writes one line per shard of master i, given as a Redis
// Cluster: each shard's own state (its restart guard, restarts, record).
func infoShards(b *strings.Builder, i int, cs *engine.ClusterStatus) {
	if cs == nil {
		return
	}
	for j, s := range cs.Shards {
		state := "up"
		if !s.Up {
			state = "down"
		}
		fmt.Fprintf(b, "master%d_shard%d:addr=%s,slots=%d,state=%s,durable=%d,guarded=%d,guard_left_ms=%d,guarded_keys=%d,restarts=%d,clock_jumps=%d,promotions=%d,evictions=%d,role=%s,run_id=%s\r\n",
			i, j, s.Addr, s.Slots, state, b2i(s.Durable), b2i(s.Guarded), s.GuardLeft.Milliseconds(), s.GuardedKeys, s.Restarts, s.ClockJumps, s.Promotions, s.Evictions, orNone(s.Role), s.RunID)
	}
}

// backendInfo are the sections of INFO the proxy has no fields of its own
// for, in Redis 7.0's order: the backend's, of the client's database
// (keyspace) and of the data it holds, as one Redis would answer them.
// inAll are given only for "all", "everything" or by name, as on Redis.
var backendInfo = []struct {
	name  string
	inAll bool
}{
	{"Persistence", false}, {"Stats", false}, {"Replication", false}, {"CPU", false}, {"Modules", false},
	{"Errorstats", false}, {"Cluster", false}, {"Keyspace", false}, {"Commandstats", true}, {"Latencystats", true},
}

// backendSections appends the sections of backendInfo that INFO asks for,
// as the backend answers them; with the backend unreachable, none.
func (s *Server) backendSections(b *strings.Builder, st *client, all bool, want map[string]bool) {
	args := [][]byte{[]byte("INFO")}
	every := want["all"] || want["everything"]
	for _, sec := range backendInfo {
		if every || all && !sec.inAll || want[strings.ToLower(sec.name)] {
			args = append(args, []byte(strings.ToLower(sec.name)))
		}
	}
	if len(args) == 1 {
		return
	}
	v, err := s.backendValue(st, args)
	text, _ := v.(string)
	if err != nil || text == "" {
		return
	}
	for _, part := range strings.Split(strings.TrimRight(text, "\r\n"), "\r\n\r\n") {
		if strings.HasPrefix(part, "# ") {
			b.WriteString(part)
			b.WriteString("\r\n\r\n")
		}
	}
}

// infoSettings writes a settings summary ("masters=a,b,c quorum=2 …") as
// an INFO value in the form Redis gives its own composite fields
// ("k=v,k=v", as in db0:keys=1,expires=0): the clients' INFO parsers
// (redis-py's parse_info among them) read a value holding both "," and "="
// as such pairs, and fail on any other. A list inside a value is joined
// with "|"; a field that is not "k=v" is named "_" (a summary written by
// another version).
func infoSettings(summary string) string {
	fields := strings.Fields(summary)
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			k, v = "_", f
		}
		fields[i] = k + "=" + strings.NewReplacer(",", "|", "=", "|").Replace(v)
	}
	return strings.Join(fields, ",")
}

func (s *Server) guardWindow() time.Duration {
	if !s.cfg.Redlock.RestartGuard {
		return 0
	}
	return s.cfg.Redlock.GuardWindow.Duration
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// orNone writes an empty field of a master's line as "none", so that
// every field holds a value.
func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// backendSentinel is the backend's Sentinel group as the follower sees it;
// nil for a backend that is not one.
func (s *Server) backendSentinel() *engine.SentinelStatus {
	if s.be.Sentinel() == nil {
		return nil
	}
	st := s.be.Sentinel().Follower.Status()
	return &st
}
