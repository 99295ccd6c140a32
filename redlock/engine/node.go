package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// node is one master: its client and what the restart guard knows of it.
type node struct {
	idx   int // its place among the masters
	addr  string
	ro    *redis.Options // how to reach it: address, credentials, TLS
	rdb   *redis.Client  // for probes; lock commands go through batch
	batch *batcher
	opts  *options
	// opened: a connection of the batcher's was opened once; until then
	// commands wait for the first one (firstConnectTimeout).
	opened atomic.Bool

	mu         sync.Mutex
	runID      string
	guardUntil time.Time            // votes do not count before this instant
	keyGuard   map[string]time.Time // … nor, on these keys, before these (guard.go)
	restarts   int
	durable    atomic.Bool // persists every write, at its last check
	datasetID  string      // its record's id
	seqSeen    int64       // the highest seq its current process acknowledged
	doubted    string      // the run_id whose doubt, marked by another client, was adopted
	others     []string    // settings of clients that differ from this one's, at the last check
	up         bool
	down       bool                 // failed downAfter times in a row: not sent to until a probe answers
	downs      int                  // times marked down
	fails      int                  // consecutive failures
	lastOK     time.Time            // the last call it answered
	checkedAt  time.Time            // the last time its current process was inspected (evidence.go)
	taints     map[string]time.Time // key+token → until when this master's votes for it don't count
	lastErr    string
	latency    time.Duration
	clock      clockSample  // the last TIME reading
	clockJumps int          // clock jumps noticed
	clockSkew  atomic.Int64 // tests only: added to the master's TIME, in ns

	repl       replState   // replication and memory, at the last look (replication.go)
	evicts     atomic.Bool // its policy can evict and the eviction guard is on: batches end with INFO stats
	promotions int         // promotions from replica noticed
	evictions  int         // times it was guarded for evicting keys

	undoFailures atomic.Int64        // rollbacks that failed, retries included
	undoLogs     [undoKinds]logLimit // under mu
	probing      atomic.Bool         // a probe is running

	// sentinel follows the primary of a master given as a Sentinel group
	// (sentinel.go); nil for a master given by address.
	sentinel *sentinel
	// cluster holds the slot map and shards of a master given as a Redis
	// Cluster (cluster.go), whose node has no connections of its own;
	// nil otherwise.
	cluster *clusterVoter
	book    atomic.Pointer[bookKeys] // where its records are kept
}

func newNode(i int, addr string, o *options) *node {
	n := &node{idx: i, addr: Redact(addr), opts: o}
	n.book.Store(plainBook)
	base := func(a string) *redis.Options {
		ro := &redis.Options{Addr: a}
		if o.redisOpts != nil {
			o.redisOpts(i, ro)
		}
		ro.Addr = a
		return ro
	}
	if IsClusterAddr(addr) {
		n.followCluster(addr, base) // its shards are nodes of their own
		return n
	}
	n.setup(base(addr))
	return n
}

// setup makes the node's clients from ro, as New's options say.
func (n *node) setup(ro *redis.Options) {
	o, addr := n.opts, ro.Addr
	ro.MaxRetries = -1 // a retried SET NX would turn our own vote into a "no"
	ro.ContextTimeoutEnabled = true
	ro.DialTimeout = o.connectTimeout() // only probes dial here; see probe
	ro.ReadTimeout = o.nodeTimeout
	ro.WriteTimeout = o.nodeTimeout
	ro.PoolSize = o.poolSize
	ro.PoolTimeout = o.nodeTimeout
	ro.Protocol = 2
	ro.DisableIdentity = true
	ro.OnConnect = n.onConnect
	if IsSentinelAddr(addr) {
		n.followSentinels(addr, ro) // its Dialer dials the group's primary
	}
	n.ro = ro
	n.rdb = redis.NewClient(ro)
	n.batch = newBatcher(n, o.pipelines, queueLen)
}

// onConnect checks every new connection's run_id, uptime and record
// before anything it answers can count as a vote: pools reconnect on their
// own, so a restart between two probes is caught here.
func (n *node) onConnect(ctx context.Context, cn *redis.Conn) error {
	do := func(args ...any) (any, error) { return cn.Do(ctx, args...).Result() }
	if _, err := do(noEvict...); err != nil && !isRedisError(err) {
		return err
	}
	st, err := n.inspect(do, false)
	if err != nil {
		return err
	}
	if n.observe(st, time.Now()) {
		n.markDoubt(do, st.runID)
	}
	return nil
}

func (n *node) logf(format string, args ...any) {
	if n.opts.logf != nil {
		n.opts.logf(format, args...)
	}
}

// trusted reports whether a vote from this master counts now on a key the
// guard does not hold back on its own (guardFor).
func (n *node) trusted(now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !now.Before(n.guardUntil) && !n.repl.isReplica()
}

// record notes the outcome of one call, answered at now. An error reply from Redis means the
// master answered; timeouts and connection errors count towards marking it
// down.
func (n *node) record(err error, latency time.Duration, now time.Time) {
	reached := err == nil || err == redis.Nil || isReplyError(err)
	if !reached {
		var re redis.Error
		var nr *NotReplicatedError
		reached = errors.As(err, &re) || errors.As(err, &nr)
		if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, errAloneBusy) {
			return // our own pool was busy: says nothing about the master
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.up = reached
	if reached {
		n.latency, n.fails, n.lastOK = latency, 0, now
		return
	}
	n.lastErr = err.Error()
	n.fails++
	// Calls in flight together fail together in one scheduling stall: a
	// master is marked down only when it has also not answered anything
	// for twice the node timeout, or when it refuses connections.
	silent := now.Sub(n.lastOK) > 2*n.opts.nodeTimeout || errors.Is(err, syscall.ECONNREFUSED)
	if n.opts.downAfter > 0 && n.fails >= n.opts.downAfter && silent && !n.down {
		n.down = true
		n.downs++
		n.logf("redlock: master %s marked down after %d failures (%v); probing it in the background", n.addr, n.fails, err)
	}
}

// isDown reports whether calls skip this master for now.
func (n *node) isDown() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.down
}

// probe pings a master that is down and marks it up when it answers. A new
// connection runs onConnect, so a restart is noticed before it votes. The
// dial, the handshake and the PING get the connect timeout, as a pipeline's
// connection does: a master slower to connect to than the node timeout
// (TLS over a long round trip) would otherwise never be found back. One
// probe of a master runs at a time.
func (n *node) probe(ctx context.Context) {
	if !n.isDown() || !n.probing.CompareAndSwap(false, true) {
		return
	}
	defer n.probing.Store(false)
	d := n.opts.connectTimeout()
	if n.opts.dialInline {
		d = n.opts.nodeTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := n.rdb.Ping(pctx).Err(); err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down, n.fails, n.up = false, 0, true
	n.logf("redlock: master %s is back", n.addr)
}

func (n *node) status() MasterStatus {
	if n.cluster != nil {
		return n.clusterStatus()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	left := time.Until(n.guardUntil)
	if left < 0 {
		left = 0
	}
	st := MasterStatus{
		Addr: n.addr, RunID: n.runID, Up: n.up && !n.down, Down: n.down, Guarded: left > 0, GuardLeft: left, GuardedKeys: n.guardedKeys(time.Now()),
		Restarts: n.restarts, ClockJumps: n.clockJumps, Durable: n.durable.Load(), LastError: n.lastErr, LastLatency: n.latency,
		MarkedDown: n.downs,
	}
	st.RollbackFailures = n.undoFailures.Load()
	st.Role, st.Replicas, st.MinReplicasToWrite = n.repl.role, n.repl.replicas, n.repl.minReplicas
	st.Promotions, st.Evictions, st.EvictedKeys = n.promotions, n.evictions, n.repl.evicted
	st.EvictionPolicy, st.Maxmemory = n.repl.policy, n.repl.maxmemory
	if n.repl.isReplica() {
		st.Guarded = true
	}
	if n.batch != nil {
		st.Pipelines, st.Commands = n.batch.pipelines.Load(), n.batch.commands.Load()
		st.Handoffs, st.AloneCommands = n.batch.handoffs.Load(), n.batch.aloneRuns.Load()
	}
	n.sentinelStatus(&st)
	return st
}

// taint withholds this master's votes for one key and token for d.
func (n *node) taint(k string, d time.Duration) {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.taints == nil {
		n.taints = map[string]time.Time{}
	}
	for t, until := range n.taints {
		if now.After(until) {
			delete(n.taints, t)
		}
	}
	n.taints[k] = now.Add(d)
}

func (n *node) untaint(k string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.taints, k)
}

// taintedPrefix reports whether a taint of a key and token that begins
// with p holds now.
func (n *node) taintedPrefix(p string) bool {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, until := range n.taints {
		if strings.HasPrefix(k, p) && now.Before(until) {
			return true
		}
	}
	return false
}

func (n *node) tainted(k string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	until, ok := n.taints[k]
	return ok && time.Now().Before(until)
}

// do sends one command to this master, in the next batch of its
// pipeline, and waits for the reply (the clock check). Quorum steps send
// theirs to every master with fanoutCmd.
func (n *node) do(ctx context.Context, args ...any) *redis.Cmd {
	return n.call(ctx, &call{args: args})
}

func (n *node) call(ctx context.Context, c *call) *redis.Cmd {
	c.deadline = time.Now().Add(n.opts.nodeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(c.deadline) {
		c.deadline = d
	}
	ch := make(chan struct{})
	c.done = func(*redis.Cmd) { close(ch) }
	n.batch.send(ctx, c)
	<-ch
	return &c.res
}
