package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client runs Redlock operations against a fixed set of independent masters.
// It is safe for concurrent use.
type Client struct {
	nodes   []*node
	quorum  int
	opts    options
	stop    chan struct{} // closed by Close: ends the prober
	stopped chan struct{}
	once    sync.Once
	flights inflight
	// clusters: a master is given as a Redis Cluster (cluster.go).
	clusters bool
}

type options struct {
	quorum       int
	drift        float64
	nodeTimeout  time.Duration
	retries      int
	retryDelay   time.Duration
	guardWindow  time.Duration
	maxLockTTL   time.Duration
	poolSize     int
	pipelines    int
	downAfter    int
	probeEvery   time.Duration
	clockEvery   time.Duration
	clockJump    time.Duration
	redisOpts    func(i int, o *redis.Options)
	logf         func(format string, args ...any)
	keyTTLs      *keyTTLs       // until when the TTLs written on each key may keep its lock alive: the guard covers them
	guardsOff    map[Guard]bool // WithGuardsOff: tests only, unsafe
	settings     string         // WithSettings: published on the masters
	settingsID   string         // its digest
	fenceSingle  bool           // tests only: take a fenced grant's number from one master, unsafe
	noWriteBack  bool           // tests only: answer a fenced grant without writing its number back, unsafe
	undoByToken  bool           // tests only: undo a refused fenced attempt by token, not by attempt, unsafe
	noUndoRetry  bool           // tests only: leave what a failed rollback should have undone until it expires
	noCloseDrain bool           // tests only: Close closes the connections at once, commands in flight or not
	dialInline   bool           // tests only: open a pipeline's connection within its batch's deadline, and drop it when late; probe within the node timeout
	maxValue     int            // WithMaxValue: the longest string of a reply kept; 0: maxBulk
	waitReplicas int            // WithWaitReplicas
}

// bigAt is the most one command or one string of a reply may take on a
// master's shared pipeline (conn.go); with GuardBigPayloads off, anything.
func (o *options) bigAt() int {
	if o.guardsOff[GuardBigPayloads] {
		return math.MaxInt
	}
	return bigAt
}

// keepMax is the longest string of a master's reply that is kept; longer
// ones come back as LargeValue. With GuardBigPayloads off, all are kept.
func (o *options) keepMax() int {
	if o.maxValue <= 0 || o.guardsOff[GuardBigPayloads] {
		return maxBulk
	}
	return o.maxValue
}

// inlineMax is the longest value that a read of a key brings back on the
// shared pipeline; a longer one is reported by its length (readScript),
// then read on connections of its own if it is kept at all (Read).
func (o *options) inlineMax() int { return min(o.bigAt(), o.keepMax()) }

// WithMaxValue sets the longest string of a master's reply that the client
// keeps: a longer one (a value written on the masters directly) is read
// as it arrives and dropped, and stands as a LargeValue in the reply; Read
// of a key that holds one answers a *ValueTooLargeError. Default: Redis's
// own longest string, 512 MB. A lock's token is tens of bytes.
func WithMaxValue(n int) Option { return func(o *options) { o.maxValue = n } }

// Option configures a Client.
type Option func(*options)

// WithQuorum sets the number of masters that must agree. Default N/2+1; it
// must lie in (N/2, N].
func WithQuorum(n int) Option { return func(o *options) { o.quorum = n } }

// WithDriftFactor sets the clock-drift factor subtracted from every validity
// as ttl·factor + 2 ms. Default 0.01; range [0, 0.5).
func WithDriftFactor(f float64) Option { return func(o *options) { o.drift = f } }

// WithNodeTimeout sets how long one master may take to answer one operation.
// Default 100 ms; it should be small next to the lock TTLs in use.
func WithNodeTimeout(d time.Duration) Option { return func(o *options) { o.nodeTimeout = d } }

// WithRetry sets how many more times an acquire whose vote was split (no
// holder on a majority) is tried, after a random delay in [delay/2, delay].
// Default 3 retries, 50 ms.
func WithRetry(count int, delay time.Duration) Option {
	return func(o *options) { o.retries, o.retryDelay = count, delay }
}

// WithRestartGuard sets the guard window: a master that restarted (its
// run_id changed, or it has been up for less than the window) does not count
// as a vote on any key until the window has passed since its start, nor on
// a key before a longer TTL this client wrote there before has run out
// (guard.go). It must be at least the longest TTL written through any other
// client of these masters. Default 60 s; 0 disables the guard.
func WithRestartGuard(window time.Duration) Option {
	return func(o *options) { o.guardWindow = window }
}

// WithMaxLockTTL sets the longest TTL a lock operation may write: one that
// asks for more (an acquire, an extend, a renewal, a TTL added to what is
// left) is refused with a *TTLError before anything is sent. It bounds how
// long a master that lost its data is kept from voting on a key this client
// wrote (guard.go). Default 1 h; range 1 ms to 7 days.
func WithMaxLockTTL(d time.Duration) Option {
	return func(o *options) { o.maxLockTTL = d }
}

// Bounds of WithMaxLockTTL.
const (
	DefaultMaxLockTTL = time.Hour
	LongestMaxLockTTL = 7 * 24 * time.Hour
)

// WithMarkDown sets after how many consecutive failures (timeouts,
// connection errors) a master is marked down, and how often a down master is
// probed. Calls skip a down master and count it as a failed vote at once, so
// they never wait on it. Default 3 failures, probed every 200 ms; after 0
// never marks down.
func WithMarkDown(after int, probeEvery time.Duration) Option {
	return func(o *options) { o.downAfter, o.probeEvery = after, probeEvery }
}

// WithPoolSize sets the size of each master's go-redis pool, which serves
// health probes; lock commands travel on the pipelines' own connections
// (WithPipelines). Default 64.
func WithPoolSize(n int) Option { return func(o *options) { o.poolSize = n } }

// WithRedisOptions lets the caller adjust the go-redis options of master i
// (credentials, TLS) before its client is made. Timeouts and retries set by
// this package are applied afterwards and cannot be changed here. The
// pipelines' own connections take Addr, Dialer, TLSConfig, Username,
// Password, CredentialsProvider and DB from the same options.
func WithRedisOptions(f func(i int, o *redis.Options)) Option {
	return func(o *options) { o.redisOpts = f }
}

// WithPipelines sets how many pipelines per master carry the commands of
// concurrent operations, each on a connection of its own and sending
// whatever has queued while it waited for its previous round trip. Default
// 1: under load, one pipeline sends bigger batches, so fewer writes and
// reads on both sides; a second one sends a command at once while the
// first waits for its replies, for a little less latency under light load
// at more CPU per operation. At most the pool size.
func WithPipelines(n int) Option { return func(o *options) { o.pipelines = n } }

// WithWaitReplicas makes every batch of lock writes to a master wait
// (WAIT) until n of its replicas acknowledged it, for at most half the
// node timeout; a write not acknowledged in time does not count as that
// master's vote (it answers as a master that did not reply would). It
// narrows the window in which a failover loses a lock a primary granted;
// the safety argument stays the restart guard's treatment of promotions
// (replication.go). Default 0: no WAIT. A master with fewer replicas never
// votes for a write.
func WithWaitReplicas(n int) Option { return func(o *options) { o.waitReplicas = n } }

// Guard names one of the client's safety mechanisms, for WithGuardsOff.
type Guard string

// The guards that WithGuardsOff can switch off.
const (
	// GuardTaint: while a rollback of a token may still land on a master,
	// that master's votes for the key and token are withheld.
	GuardTaint Guard = "taint"
	// GuardNotHeldNeedsQuorum: a lock is "not held" (refused, not renewed,
	// not released, absent) only when a quorum of yes votes is out of reach
	// even if every master that did not answer, or whose vote the restart
	// guard withholds, had voted yes; anything less is a *QuorumError.
	GuardNotHeldNeedsQuorum Guard = "not-held-needs-quorum"
	// GuardBigPayloads: a long command, and a long string in a reply,
	// stay off the master's shared pipeline (a connection of their own, a
	// handed-over pipeline), transfers that make progress do not time
	// out, and strings longer than WithMaxValue are not kept. Off, one
	// big value fails the commands of every operation that shares its
	// pipeline, and the masters are counted as failing.
	GuardBigPayloads Guard = "big-payloads"
)

// Guards lists every guard WithGuardsOff knows.
func Guards() []Guard {
	return []Guard{GuardTaint, GuardNotHeldNeedsQuorum, GuardTTLStretch, GuardDataEvidence, GuardPermitQuorum, GuardBigPayloads, GuardPromotion, GuardEviction, GuardSlotFollow}
}

// WithGuardsOff switches safety mechanisms off. It exists for tests that
// show what each guard prevents: a client with any of them off can grant a
// lock to two holders at once.
func WithGuardsOff(gs ...Guard) Option {
	return func(o *options) {
		if o.guardsOff == nil {
			o.guardsOff = map[Guard]bool{}
		}
		for _, g := range gs {
			o.guardsOff[g] = true
		}
	}
}

func (c *Client) off(g Guard) bool { return c.opts.guardsOff[g] }

// WithLogf sets a function that receives notable events (master restarts).
func WithLogf(f func(format string, args ...any)) Option { return func(o *options) { o.logf = f } }

// New returns a Client for the masters at addrs. No connection is made until
// the first operation.
func New(addrs []string, opts ...Option) (*Client, error) {
	o := options{
		drift: 0.01, nodeTimeout: 100 * time.Millisecond, retries: 3,
		retryDelay: 50 * time.Millisecond, guardWindow: 60 * time.Second, maxLockTTL: DefaultMaxLockTTL, poolSize: 64, pipelines: 1,
		downAfter: 3, probeEvery: 200 * time.Millisecond, clockEvery: time.Second, clockJump: time.Second, keyTTLs: newKeyTTLs(),
	}
	for _, f := range opts {
		f(&o)
	}
	if err := o.validate(len(addrs)); err != nil {
		return nil, err
	}
	if err := checkVoterAddrs(addrs); err != nil {
		return nil, err
	}
	for i, a := range addrs {
		if IsClusterAddr(a) && o.redisOpts != nil {
			ro := &redis.Options{}
			if o.redisOpts(i, ro); ro.DB != 0 {
				return nil, fmt.Errorf("redlock: master %s is a Redis Cluster, which has database 0 only, not %d", a, ro.DB)
			}
		}
	}
	c := &Client{quorum: o.quorum, opts: o, stop: make(chan struct{}), stopped: make(chan struct{})}
	for i, a := range addrs {
		c.nodes = append(c.nodes, newNode(i, a, &c.opts))
		c.clusters = c.clusters || IsClusterAddr(a)
	}
	go c.prober()
	return c, nil
}

// prober probes down masters until Close.
func (c *Client) prober() {
	defer close(c.stopped)
	never := make(<-chan time.Time)
	probe, clock := never, never
	if c.opts.downAfter > 0 && c.opts.probeEvery > 0 {
		t := time.NewTicker(c.opts.probeEvery)
		defer t.Stop()
		probe = t.C
	}
	// Persistence and records (with the guard), and the settings of the
	// masters' other clients, are checked as often as clocks, and every
	// second with the clock check off.
	every := c.opts.clockEvery
	if every == 0 {
		every = time.Second
	}
	if c.opts.guardWindow > 0 || c.opts.settings != "" {
		t := time.NewTicker(every)
		defer t.Stop()
		clock = t.C
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for {
		select {
		case <-c.stop:
			return
		case <-probe:
			for _, n := range c.members() {
				go n.probe(ctx)
			}
		case now := <-clock:
			c.opts.keyTTLs.sweep(now)
			for _, n := range c.members() {
				n.sweepKeyGuard(now)
				if c.opts.guardWindow > 0 {
					go n.check(ctx)
				}
				if c.opts.guardWindow > 0 && c.opts.clockEvery > 0 {
					go n.checkClock(ctx)
				}
				if c.opts.settings != "" {
					go n.publishSettings(ctx, every)
				}
			}
		}
	}
}

func (o *options) validate(n int) error {
	switch {
	case n == 0:
		return errors.New("redlock: no masters given")
	case o.quorum == 0:
		o.quorum = n/2 + 1
	}
	switch {
	case o.quorum <= n/2 || o.quorum > n:
		return fmt.Errorf("redlock: quorum %d out of range (%d, %d] for %d masters", o.quorum, n/2, n, n)
	case o.drift < 0 || o.drift >= 0.5:
		return fmt.Errorf("redlock: drift factor %v out of range [0, 0.5)", o.drift)
	case o.nodeTimeout <= 0:
		return errors.New("redlock: node timeout must be positive")
	case o.retries < 0 || o.retryDelay < 0:
		return errors.New("redlock: retry count and delay must not be negative")
	case o.guardWindow < 0:
		return errors.New("redlock: restart guard window must not be negative")
	case o.maxLockTTL < time.Millisecond || o.maxLockTTL > LongestMaxLockTTL:
		return fmt.Errorf("redlock: longest lock TTL %s out of range [1ms, %s]", o.maxLockTTL, FormatTTL(LongestMaxLockTTL))
	case o.clockEvery < 0 || o.clockJump < 0:
		return errors.New("redlock: clock check interval and jump must not be negative")
	case o.poolSize <= 0:
		return errors.New("redlock: pool size must be positive")
	case o.waitReplicas < 0:
		return errors.New("redlock: replicas to wait for must not be negative")
	case o.pipelines <= 0 || o.pipelines > o.poolSize:
		return fmt.Errorf("redlock: pipelines per master %d out of range [1, pool size %d]", o.pipelines, o.poolSize)
	}
	return nil
}

// Quorum is the number of masters that must agree.
func (c *Client) Quorum() int { return c.quorum }

// Masters is the number of masters.
func (c *Client) Masters() int { return len(c.nodes) }

// Close closes every master connection.
//
// Commands already queued or in flight, the rollbacks of an acquire that
// was not granted among them, are let finish first: each is answered by
// its deadline, and Close waits for them at most the node timeout past
// the longest a first connection may take to open (the larger of 5 s and
// the node timeout). Retries of a rollback that failed are not started
// after Close; the key expires on its own then.
func (c *Client) Close() error {
	c.once.Do(func() { close(c.stop); <-c.stopped })
	if !c.opts.noCloseDrain {
		c.drain(time.Now().Add(c.opts.firstConnectTimeout() + c.opts.nodeTimeout))
	}
	var errs []error
	for _, n := range c.nodes {
		if n.cluster != nil {
			errs = append(errs, n.cluster.close())
			continue
		}
		n.stopSentinels()
		n.batch.close()
		errs = append(errs, n.rdb.Close())
	}
	return errors.Join(errs...)
}

// drain waits until no command is queued for or in flight to any master,
// or until.
func (c *Client) drain(until time.Time) {
	for time.Now().Before(until) {
		pending := int64(0)
		for _, n := range c.nodes {
			if n.cluster == nil {
				pending += n.batch.pending.Load()
				continue
			}
			for _, sn := range n.cluster.members() {
				pending += sn.batch.pending.Load()
			}
		}
		if pending == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// MasterStatus describes one master as the client last saw it.
type MasterStatus struct {
	Addr        string
	RunID       string
	Up          bool          // the last operation or probe reached it
	Down        bool          // skipped by calls until a background probe reaches it
	Guarded     bool          // its votes are withheld by the restart guard, on every key
	GuardLeft   time.Duration // how long the guard still holds on every key
	GuardedKeys int           // keys it does not vote on beyond that, until the TTLs written there run out
	Restarts    int           // restarts noticed since the client started
	ClockJumps  int           // clock jumps noticed since the client started
	Durable     bool          // AOF with appendfsync always: restarts lose no locks
	LastError   string
	LastLatency time.Duration
	// Pipelines written to the master since the client started, and the
	// commands they carried: Commands/Pipelines is how many concurrent
	// operations' commands share one write and one read on it.
	Pipelines, Commands int64
	// Handoffs counts the pipelines handed to a new worker because a reply
	// carried a string longer than the pipeline is for; AloneCommands the
	// commands sent on connections of their own (long commands, and the
	// reads of long values).
	Handoffs, AloneCommands int64
	// MarkedDown counts the times the master was marked down.
	MarkedDown int
	// RollbackFailures counts tries to undo a refused acquire's part on
	// the master that failed (a timeout, a lost connection); each is tried
	// again until it lands or the lock would have expired.
	RollbackFailures int64
	// Role is "master", or "slave" for a master that answers as a replica
	// (it never votes); "" before it was reached.
	Role string
	// Replicas is how many replicas it has, MinReplicasToWrite its
	// min-replicas-to-write (-1: not read; it is read only with replicas).
	Replicas, MinReplicasToWrite int
	// Promotions counts its promotions from replica noticed; Evictions the
	// times it was guarded for evicting keys, EvictedKeys its process's
	// evicted_keys at the last look.
	Promotions, Evictions int
	EvictedKeys           int64
	// EvictionPolicy is its maxmemory-policy, Maxmemory its maxmemory
	// (0: no limit, nothing is evicted).
	EvictionPolicy string
	Maxmemory      int64
	// Sentinel describes the Sentinel group of a master given as one
	// (sentinel://…); nil for a master given by address.
	Sentinel *SentinelStatus
	// Cluster describes the shards of a master given as a Redis Cluster
	// (cluster://…), each with its own state; nil otherwise. The fields
	// above then sum the shards' counters, Up and Down speak of the
	// shards that own slots, and Guarded means every shard is guarded.
	Cluster *ClusterStatus
}

// Status reports the state of every master, in configuration order.
func (c *Client) Status() []MasterStatus {
	out := make([]MasterStatus, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.status()
	}
	return out
}

// Probe pings every master once, down the pipeline of its lock commands
// (to one of them, with WithPipelines above 1), opening its connection
// (and so checking its run_id) where none is open, and returns how many
// answered. The connection is then dialled and its handshake done before
// the first lock operation, which would otherwise wait for them (the
// first connection to a master, firstConnectTimeout) or fail at its node
// timeout while they run (a master that once answered). The PINGs may
// take until ctx's deadline (the node timeout without one).
func (c *Client) Probe(ctx context.Context) int {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.opts.nodeTimeout)
	}
	ch := fanoutUntil(c, nil, deadline, func(_ *node, cl *call) { cl.args, cl.readOnly = pingArgs, true }, (*redis.Cmd).Result, nil)
	// A worker answers a call by its deadline and one round trip; a client
	// closed meanwhile may never answer.
	expire := time.NewTimer(time.Until(deadline) + c.opts.nodeTimeout)
	defer expire.Stop()
	t, _ := countVotesBy(c, ch, "", nil, func(any) vote { return voteYes }, expire.C)
	return t.answered() - t.failed
}

var pingArgs = []any{"ping"}
