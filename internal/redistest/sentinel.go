package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelGroup is a primary with one replica, watched by three sentinels
// (redis-server --sentinel), all on free loopback ports. The sentinels
// agree on a failure with two of them, declare the primary down after a
// second without answers, and give a failover three seconds.
type SentinelGroup struct {
	Name      string
	Servers   []*Server // the primary it started with, then the replica
	Sentinels []*Server
	t         testing.TB
}

// Sentinel timings: see SentinelGroup.
const (
	sentinelDownAfter = 1000 // ms
	sentinelFailover  = 3000 // ms
	// sentinelWait bounds every wait of this file: a failover takes the
	// down-after time, an election and a promotion, a few seconds, longer
	// on a loaded machine.
	sentinelWait = 30 * time.Second
)

// StartSentinels starts a group named name and waits until every sentinel
// knows the replica and the other two sentinels, so that a failover can
// run at once.
func StartSentinels(t testing.TB, name string) *SentinelGroup {
	t.Helper()
	Require(t)
	g := &SentinelGroup{Name: name, t: t}
	// Either may be the primary, serving a full sync at once: no wait
	// for more replicas before a diskless sync (5 s by default).
	fast := []string{"--repl-diskless-sync-delay", "0"}
	primary := Start(t, fast...)
	replica := Start(t, append(fast, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))...)
	g.Servers = []*Server{primary, replica}
	g.until("the replica's link to its primary is up", func() bool {
		return replica.InfoField("replication", "master_link_status") == "up"
	})
	for range 3 {
		g.Sentinels = append(g.Sentinels, g.startSentinel(primary.Port))
	}
	g.until("the sentinels know the replica and each other", func() bool {
		for _, s := range g.Sentinels {
			if len(g.sentinelList(s, "replicas")) != 1 || len(g.sentinelList(s, "sentinels")) != 2 {
				return false
			}
		}
		return true
	})
	return g
}

// startSentinel runs one sentinel. Its configuration file is its own, in
// a directory of its own: sentinels rewrite theirs.
func (g *SentinelGroup) startSentinel(primaryPort int) *Server {
	g.t.Helper()
	s := &Server{t: g.t, Port: FreePort(g.t), Dir: g.t.TempDir()}
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.Port)
	conf := filepath.Join(s.Dir, "sentinel.conf")
	text := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
dir %s
logfile sentinel.log
sentinel monitor %s 127.0.0.1 %d 2
sentinel down-after-milliseconds %[3]s %[5]d
sentinel failover-timeout %[3]s %[6]d
sentinel parallel-syncs %[3]s 1
`, s.Port, s.Dir, g.Name, primaryPort, sentinelDownAfter, sentinelFailover)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		g.t.Fatal(err)
	}
	s.args = []string{conf, "--sentinel"}
	s.start()
	g.t.Cleanup(s.Kill)
	return s
}

// Addrs lists the sentinels' addresses.
func (g *SentinelGroup) Addrs() []string { return Addrs(g.Sentinels) }

// URL is the group as redlock.masters writes it:
// sentinel://host:port,…/name.
func (g *SentinelGroup) URL() string {
	return "sentinel://" + strings.Join(g.Addrs(), ",") + "/" + g.Name
}

// Primary is the server that a majority of the sentinels name as the
// primary now, or nil when no majority names the same one.
func (g *SentinelGroup) Primary() *Server {
	votes := map[string]int{}
	for _, s := range g.Sentinels {
		if a := g.askPrimary(s); a != "" {
			votes[a]++
		}
	}
	for a, n := range votes {
		if n > len(g.Sentinels)/2 {
			return g.server(a)
		}
	}
	return nil
}

// server is the data server at addr, or nil.
func (g *SentinelGroup) server(addr string) *Server {
	for _, s := range g.Servers {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// askPrimary asks one sentinel for the primary's address; "" when it does
// not answer.
func (g *SentinelGroup) askPrimary(s *Server) string {
	if s.cmd == nil {
		return ""
	}
	c := s.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	a, err := c.Do(ctx, "sentinel", "get-master-addr-by-name", g.Name).StringSlice()
	if err != nil || len(a) != 2 {
		return ""
	}
	return net.JoinHostPort(a[0], a[1])
}

// sentinelList runs SENTINEL <what> NAME on s and returns its entries.
func (g *SentinelGroup) sentinelList(s *Server, what string) []any {
	c := s.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v, _ := c.Do(ctx, "sentinel", what, g.Name).Slice()
	return v
}

// Failover runs SENTINEL FAILOVER and waits until the sentinels name the
// other server and it says role:master. It returns the old primary and
// the new.
func (g *SentinelGroup) Failover() (old, next *Server) {
	g.t.Helper()
	old = g.waitPrimary(nil)
	g.until("SENTINEL FAILOVER is accepted", func() bool {
		for _, s := range g.Sentinels {
			c := s.Client()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.Do(ctx, "sentinel", "failover", g.Name).Err()
			cancel()
			c.Close()
			// INPROG: a failover is running already (a retried one).
			if err == nil || strings.HasPrefix(err.Error(), "INPROG") {
				return true
			}
		}
		return false
	})
	return old, g.waitPrimary(old)
}

// KillPrimary kills the primary (SIGKILL) and returns it; WaitPrimary
// waits for the sentinels to promote the replica.
func (g *SentinelGroup) KillPrimary() *Server {
	g.t.Helper()
	p := g.waitPrimary(nil)
	p.Kill()
	return p
}

// PausePrimary freezes the primary (SIGSTOP) and returns it; Resume
// thaws it.
func (g *SentinelGroup) PausePrimary() *Server {
	g.t.Helper()
	p := g.waitPrimary(nil)
	p.Stop()
	return p
}

// Resume thaws a server PausePrimary froze.
func (g *SentinelGroup) Resume(s *Server) { s.Cont() }

// WaitPrimary waits until a majority of the sentinels name a primary other
// than old (any, with old nil) and it says role:master, and returns it.
func (g *SentinelGroup) WaitPrimary(old *Server) *Server {
	g.t.Helper()
	return g.waitPrimary(old)
}

func (g *SentinelGroup) waitPrimary(old *Server) *Server {
	g.t.Helper()
	var p *Server
	what := "the sentinels name a primary"
	if old != nil {
		what = "the sentinels name a primary other than " + old.Addr
	}
	g.until(what, func() bool {
		p = g.Primary()
		return p != nil && p != old && p.InfoField("replication", "role") == "master"
	})
	return p
}

// until polls cond every 50 ms, failing the test after sentinelWait.
func (g *SentinelGroup) until(what string, cond func() bool) {
	g.t.Helper()
	deadline := time.Now().Add(sentinelWait)
	for !cond() {
		if time.Now().After(deadline) {
			g.t.Fatalf("sentinel group %s: timed out waiting until %s", g.Name, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
