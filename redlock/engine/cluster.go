package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A master may be given as a Redis Cluster, cluster://host:port[,host:port…]
// (seed nodes; a trailing / is allowed), in place of host:port. The
// cluster is one voter: its vote on a key is the vote of the shard (the
// primary) that owns the key's slot. Its node (the voter) holds the slot
// map and one node per shard primary, each a master of its own as far as
// the engine's state goes: its own pipelines (batcher), restart guard,
// data-evidence record, clock check, replication and eviction tracking.
// A shard that restarts, loses its data or is replaced by a promoted
// replica is guarded on its own slots only; the other shards vote on.
//
// Routing happens where a command is queued (fanout, the undo paths,
// route): the voter's command for an operation goes to the shard that
// owns the slot of the operation's keys, which must all hash to one slot
// (a hash tag, {…}, makes them). An operation whose keys span slots is
// refused before anything is sent (*CrossSlotError), as a Redis Cluster
// refuses such a command (CROSSSLOT). A MOVED reply is not a vote: the
// command goes again to the node it names, whose ownership of the slot is
// noted at once, and the whole map is read again (CLUSTER SLOTS) soon
// after; an ASK reply sends it again to the node it names, preceded by
// ASKING. The map is also read every check interval.
//
// Each shard keeps the engine's bookkeeping keys (the data-evidence record,
// the clients' settings) under a hash tag whose slot it owns (the lowest
// it owns, so that every client of the same cluster uses the same keys),
// and moves them to another tag, starting a new record, when that slot
// leaves it. A fenced lock's counter and state are named after the lock
// key (FenceKeys): with a hash tag in the key they share its slot, and
// without one the fenced operation is refused as cross-slot.
//
// When a slot changes owner while its old owner is under the restart
// guard, the guard follows the slot: the new owner does not vote on it
// until the old owner's window ends, nor on the keys of that slot the old
// owner does not vote on, until those end.

// GuardSlotFollow: when a slot leaves a shard under the restart guard, the
// guard follows it to the new owner (setOwner); off, the new owner votes on
// the slot at once, on what the old owner forgot.
const GuardSlotFollow Guard = "slot-follow"

// clusterScheme begins a master given as a Redis Cluster.
const clusterScheme = "cluster://"

// numSlots is the number of hash slots of a Redis Cluster.
const numSlots = 16384

// IsClusterAddr reports whether a master's address names a Redis Cluster
// (cluster://…) rather than one server.
func IsClusterAddr(addr string) bool { return strings.HasPrefix(addr, clusterScheme) }

// ClusterAddr is a master given as a Redis Cluster: cluster://host:port[,host:port…][/].
type ClusterAddr struct {
	Seeds []string // host:port of each seed node
}

// ParseClusterAddr reads a master given as a Redis Cluster. The cluster's
// credentials and TLS are the master's own (WithRedisOptions), used for
// every node of it.
func ParseClusterAddr(s string) (ClusterAddr, error) {
	var a ClusterAddr
	rest, ok := strings.CutPrefix(s, clusterScheme)
	if !ok {
		return a, fmt.Errorf("%q does not begin with %s", s, clusterScheme)
	}
	bad := func(why string) (ClusterAddr, error) {
		return ClusterAddr{}, fmt.Errorf("%q is not cluster://host:port[,host:port…]: %s", s, why)
	}
	if strings.Contains(rest, "@") {
		return bad("credentials go in the masters' own settings, not in the address")
	}
	hosts, tail, _ := strings.Cut(rest, "/")
	switch {
	case tail != "":
		return bad(fmt.Sprintf("nothing may follow the seed nodes (%q)", "/"+tail))
	case hosts == "":
		return bad("no seed node is given")
	}
	seen := map[string]bool{}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return bad(fmt.Sprintf("seed node %q is not host:port", h))
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return bad(fmt.Sprintf("seed node %q has no valid port", h))
		}
		if seen[h] {
			return bad(fmt.Sprintf("seed node %q is listed twice", h))
		}
		seen[h] = true
		a.Seeds = append(a.Seeds, h)
	}
	return a, nil
}

// checkVoterAddrs reports the first malformed Sentinel group or cluster
// among addrs.
func checkVoterAddrs(addrs []string) error {
	if err := checkSentinelAddrs(addrs); err != nil {
		return err
	}
	for _, a := range addrs {
		if IsClusterAddr(a) {
			if _, err := ParseClusterAddr(a); err != nil {
				return fmt.Errorf("redlock: %w", err)
			}
		}
	}
	return nil
}

// KeySlot is the Redis Cluster hash slot of key: CRC16 of the key, or of
// its hash tag (the text between the first { and the next }, when not
// empty), modulo 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % numSlots)
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// ErrCrossSlot is returned, before anything is sent, for an operation
// whose keys hash to different slots while a master is a Redis Cluster.
// Its errors are *CrossSlotError.
var ErrCrossSlot = errors.New("redlock: keys in different cluster slots")

// CrossSlotError is an operation refused because its keys hash to
// different slots of a Redis Cluster voter; it matches ErrCrossSlot.
type CrossSlotError struct {
	Keys []string
}

func (e *CrossSlotError) Error() string {
	return fmt.Sprintf("CROSSSLOT redlock: keys %q hash to different slots, and a master is a Redis Cluster: give them one hash tag ({…})", e.Keys)
}

// Is reports whether target is ErrCrossSlot.
func (e *CrossSlotError) Is(target error) bool { return target == ErrCrossSlot }

// slotOf is the one slot of keys (0 for none), or a *CrossSlotError.
func slotOf(keys []string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	s := KeySlot(keys[0])
	for _, k := range keys[1:] {
		if KeySlot(k) != s {
			return 0, &CrossSlotError{Keys: keys}
		}
	}
	return s, nil
}

// checkSlots refuses keys that span slots when a master is a cluster.
func (c *Client) checkSlots(keys []string) error {
	if !c.clusters || len(keys) < 2 {
		return nil
	}
	_, err := slotOf(keys)
	return err
}

// slotTags maps each slot to a short tag that hashes to it.
var slotTags struct {
	once sync.Once
	tags [numSlots]string
}

// tagOf is a short string whose slot is slot.
func tagOf(slot int) string {
	slotTags.once.Do(func() {
		left := numSlots
		for i := 0; left > 0; i++ {
			s := strconv.Itoa(i)
			if k := crc16(s) % numSlots; slotTags.tags[k] == "" {
				slotTags.tags[k] = s
				left--
			}
		}
	})
	return slotTags.tags[slot]
}

// bookKeys are the keys where a master keeps the engine's own records:
// DatasetKey and ClientsKey for a master given by address, and for a
// cluster's shard the same under a hash tag of a slot it owns.
type bookKeys struct {
	slot            int // the slot of the keys; -1: not in a cluster
	dataset, client string
	seq             []byte // seqCommand on dataset
}

var plainBook = &bookKeys{slot: -1, dataset: DatasetKey, client: ClientsKey, seq: seqCommand}

func shardBook(slot int) *bookKeys {
	t := "{" + tagOf(slot) + "}"
	b := &bookKeys{slot: slot, dataset: DatasetKey + t, client: ClientsKey + t}
	b.seq = appendCommandMust([]any{"hincrby", b.dataset, "seq", 1})
	return b
}

// books returns the master's record keys.
func (n *node) books() *bookKeys { return n.book.Load() }

// clusterVoter is the state of a master given as a Redis Cluster.
type clusterVoter struct {
	v       *node // the voter
	addr    ClusterAddr
	o       *options
	every   time.Duration
	askers  []*redis.Client // one per seed
	stop    chan struct{}
	done    sync.WaitGroup
	again   chan struct{} // a MOVED asks for the map to be read again
	ready   chan struct{} // closed when the first map is known
	readyMu sync.Once
	base    func(addr string) *redis.Options // a shard's go-redis options

	owner     [numSlots]atomic.Pointer[node] // the shard that owns each slot
	slotGuard [numSlots]atomic.Int64         // unix ns until which a slot's new owner does not vote on it

	mu        sync.Mutex
	shards    map[string]*node // by address, every shard seen
	order     []*node          // in the order first seen
	refreshes int              // maps read
	moved     int64            // MOVED replies followed
	asked     int64            // ASK replies followed
	lastErr   string
}

// maxHops bounds the redirections one command follows.
const maxHops = 5

// followCluster makes v, given as a cluster, hold the slot map and its
// shards, and starts reading the map.
func (v *node) followCluster(raw string, base func(addr string) *redis.Options) {
	a, _ := ParseClusterAddr(raw) // New checked it
	every := v.opts.clockEvery
	if every == 0 {
		every = time.Second
	}
	cv := &clusterVoter{v: v, addr: a, o: v.opts, every: every, base: base, stop: make(chan struct{}),
		again: make(chan struct{}, 1), ready: make(chan struct{}), shards: map[string]*node{}}
	t := v.opts.connectTimeout()
	for _, h := range a.Seeds {
		ro := base(h)
		ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = t, t, t
		ro.PoolSize, ro.MaxRetries, ro.OnConnect = 2, -1, nil
		cv.askers = append(cv.askers, redis.NewClient(ro))
	}
	v.cluster = cv
	cv.done.Add(1)
	go cv.poll()
}

// close stops reading the map and closes every shard's connections.
func (cv *clusterVoter) close() error {
	close(cv.stop)
	cv.done.Wait()
	var errs []error
	for _, c := range cv.askers {
		errs = append(errs, c.Close())
	}
	for _, n := range cv.members() {
		n.batch.close()
		errs = append(errs, n.rdb.Close())
	}
	return errors.Join(errs...)
}

// members lists every shard seen, in the order first seen.
func (cv *clusterVoter) members() []*node {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return append([]*node(nil), cv.order...)
}

// shardAt returns the shard node at addr, made (its record keys in slot)
// if new.
func (cv *clusterVoter) shardAt(addr string, slot int) *node {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if n := cv.shards[addr]; n != nil {
		return n
	}
	n := newShard(cv.v, addr, cv.base(addr), shardBook(slot))
	cv.shards[addr] = n
	cv.order = append(cv.order, n)
	return n
}

// poll reads the map at once, then every interval and when a MOVED asks
// for it, until stop.
func (cv *clusterVoter) poll() {
	defer cv.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-cv.stop
		cancel()
	}()
	t := time.NewTicker(cv.every)
	defer t.Stop()
	for {
		cv.refresh(ctx)
		select {
		case <-cv.stop:
			return
		case <-t.C:
		case <-cv.again:
		}
	}
}

// refresh reads CLUSTER SLOTS from a seed, or from a shard when no seed
// answers, and applies it.
func (cv *clusterVoter) refresh(ctx context.Context) {
	var errs []string
	ask := func(c *redis.Client, host string) bool {
		actx, cancel := context.WithTimeout(ctx, cv.o.connectTimeout())
		defer cancel()
		//lint:ignore SA1019 CLUSTER SHARDS is Redis 7 only; CLUSTER SLOTS answers on 6 too.
		slots, err := c.ClusterSlots(actx).Result()
		if err == nil && len(slots) == 0 {
			err = errors.New("no slot is assigned")
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", c.Options().Addr, err))
			return false
		}
		cv.apply(slots, host)
		return true
	}
	for i, c := range cv.askers {
		host, _, _ := net.SplitHostPort(cv.addr.Seeds[i])
		if ask(c, host) {
			return
		}
	}
	for _, n := range cv.members() {
		host, _, _ := net.SplitHostPort(n.addr)
		if ask(n.rdb, host) {
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if msg := strings.Join(errs, "; "); msg != cv.lastErr {
		cv.lastErr = msg
		cv.v.logf("redlock: master %s: no node of the cluster answers CLUSTER SLOTS (%s); keeping the last slot map", cv.v.addr, msg)
	}
}

// apply takes a map read from a node whose host is host (for nodes that
// announce no address of their own).
func (cv *clusterVoter) apply(slots []redis.ClusterSlot, host string) {
	lowest := map[*node]int{}
	for _, s := range slots {
		if len(s.Nodes) == 0 || s.Start < 0 || s.End >= numSlots {
			continue
		}
		addr := s.Nodes[0].Addr
		if h, p, err := net.SplitHostPort(addr); err == nil && (h == "" || h == "?") {
			addr = net.JoinHostPort(host, p)
		}
		n := cv.shardAt(addr, s.Start)
		for slot := s.Start; slot <= s.End; slot++ {
			cv.setOwner(slot, n)
		}
		if l, ok := lowest[n]; !ok || s.Start < l {
			lowest[n] = s.Start
		}
	}
	for n, l := range lowest {
		if b := n.books(); b.slot != l {
			n.rehome(shardBook(l))
		}
	}
	cv.mu.Lock()
	cv.refreshes++
	if cv.lastErr != "" {
		cv.v.logf("redlock: master %s: the cluster answers CLUSTER SLOTS again", cv.v.addr)
		cv.lastErr = ""
	}
	cv.mu.Unlock()
	cv.readyMu.Do(func() { close(cv.ready) })
}

// setOwner makes n the owner of slot. When the slot leaves a shard under
// the restart guard, the guard follows it (see above).
func (cv *clusterVoter) setOwner(slot int, n *node) {
	old := cv.owner[slot].Swap(n)
	if old == nil || old == n || cv.o.guardsOff[GuardSlotFollow] {
		return
	}
	now := time.Now()
	old.mu.Lock()
	until := old.guardUntil
	if old.repl.isReplica() {
		until = maxTime(until, now.Add(old.opts.guardWindow))
	}
	var keys map[string]time.Time
	for k, u := range old.keyGuard {
		if now.Before(u) && KeySlot(k) == slot {
			if keys == nil {
				keys = map[string]time.Time{}
			}
			keys[k] = u
		}
	}
	old.mu.Unlock()
	if until.After(now) {
		for {
			cur := cv.slotGuard[slot].Load()
			if cur >= until.UnixNano() || cv.slotGuard[slot].CompareAndSwap(cur, until.UnixNano()) {
				break
			}
		}
	}
	if len(keys) > 0 {
		n.mu.Lock()
		if n.keyGuard == nil {
			n.keyGuard = map[string]time.Time{}
		}
		for k, u := range keys {
			if u.After(n.keyGuard[k]) {
				n.keyGuard[k] = u
			}
		}
		n.mu.Unlock()
	}
}

// slotGuardFor reports whether the guard that followed the slot of keys
// withholds its new owner's vote at now.
func (cv *clusterVoter) slotGuardFor(now time.Time, keys []string) (guardOf, bool) {
	s, err := slotOf(keys)
	if err != nil {
		return guardOf{}, false
	}
	if u := cv.slotGuard[s].Load(); u > now.UnixNano() {
		return guardOf{until: time.Unix(0, u)}, true
	}
	return guardOf{}, false
}

// errNoSlotMap answers a command for a cluster whose slot map is not known.
var errNoSlotMap = errors.New("redlock: the cluster's slot map is not known yet")

// route returns the shard that owns the slot of keys (any shard for no
// keys), waiting up to the connect timeout for the first map.
func (cv *clusterVoter) route(keys []string) (*node, error) {
	s, err := slotOf(keys)
	if err != nil {
		return nil, err
	}
	if err := cv.waitMap(); err != nil {
		return nil, err
	}
	if n := cv.owner[s].Load(); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("redlock: no shard of the cluster serves slot %d", s)
}

// redirect sends c again where a MOVED or ASK reply names, and reports
// whether it did; a command past maxHops keeps its reply.
func (cv *clusterVoter) redirect(c *call) bool {
	re, ok := c.res.Err().(replyError)
	if !ok || c.hops >= maxHops {
		return false
	}
	kind, rest, _ := strings.Cut(string(re), " ")
	if kind != "MOVED" && kind != "ASK" {
		return false
	}
	f := strings.Fields(rest)
	if len(f) != 2 {
		return false
	}
	slot, err := strconv.Atoi(f[0])
	if err != nil || slot < 0 || slot >= numSlots {
		return false
	}
	addr := f[1]
	if h, p, err := net.SplitHostPort(addr); err == nil && h == "" && c.shard != nil {
		host, _, _ := net.SplitHostPort(c.shard.addr)
		addr = net.JoinHostPort(host, p)
	}
	n := cv.shardAt(addr, slot)
	cv.mu.Lock()
	if kind == "MOVED" {
		cv.moved++
	} else {
		cv.asked++
	}
	cv.mu.Unlock()
	if kind == "MOVED" {
		cv.setOwner(slot, n)
		select {
		case cv.again <- struct{}{}:
		default:
		}
	}
	c.res = redis.Cmd{}
	c.hops++
	c.asking = kind == "ASK"
	c.shard = n
	n.batch.sendAsync(c)
	return true
}

// newShard makes the node of one shard primary of voter v.
func newShard(v *node, addr string, ro *redis.Options, b *bookKeys) *node {
	n := &node{idx: v.idx, addr: addr, opts: v.opts}
	n.book.Store(b)
	n.setup(ro)
	return n
}

// rehome moves the shard's records to b, its old slot having left it:
// what it knew of the old record says nothing of the new one.
func (n *node) rehome(b *bookKeys) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.books()
	n.book.Store(b)
	n.datasetID, n.seqSeen = "", 0
	n.logf("redlock: master %s: its records move from %s to %s (slot %d left it)", n.addr, old.dataset, b.dataset, old.slot)
}

// target is the node that a command on keys goes to: n itself, or for a
// cluster the shard that owns the keys' slot.
func (n *node) target(keys []string) (*node, error) {
	if n.cluster == nil {
		return n, nil
	}
	return n.cluster.route(keys)
}

// routed prepares c for the node a command on c.keys goes to, and returns
// that node: n itself for a master given by address.
func (n *node) routed(c *call) (*node, error) {
	if n.cluster == nil {
		return n, nil
	}
	t, err := n.cluster.route(c.keys)
	if err != nil {
		return nil, err
	}
	c.cv, c.shard = n.cluster, t
	return t, nil
}

// sendAsync queues c (an undo) on the node serving c.keys, as
// batcher.sendAsync does.
func (n *node) sendAsync(c *call) {
	t, err := n.routed(c)
	if err != nil {
		c.fail(err)
		return
	}
	t.batch.sendAsync(c)
}

// send queues c on the node serving c.keys, as batcher.send does.
func (n *node) send(ctx context.Context, c *call) {
	t, err := n.routed(c)
	if err != nil {
		c.fail(err)
		return
	}
	t.batch.send(ctx, c)
}

// downFor reports whether the node a command on keys goes to is marked
// down (a cluster whose map has no owner for them counts as down).
func (n *node) downFor(keys []string) bool {
	t, err := n.target(keys)
	return err != nil || t.isDown()
}

// guardOn reports whether the restart guard withholds the voter's vote on
// keys at now: for a cluster, its shard's for their slot.
func (n *node) guardOn(now time.Time, keys []string) (*node, guardOf, bool) {
	if n.cluster == nil {
		g, ok := n.guardFor(now, keys)
		return n, g, ok
	}
	if len(keys) == 0 {
		// Every key: the cluster votes on all only when no shard is guarded.
		for _, s := range n.cluster.owners() {
			if g, ok := s.guardFor(now, nil); ok {
				return s, g, true
			}
		}
		return n, guardOf{}, false
	}
	t, err := n.cluster.route(keys)
	if err != nil {
		return n, guardOf{}, false
	}
	if g, ok := t.guardFor(now, keys); ok {
		return t, g, true
	}
	g, ok := n.cluster.slotGuardFor(now, keys)
	return t, g, ok
}

// waitMap waits up to the connect timeout for the first slot map.
func (cv *clusterVoter) waitMap() error {
	select {
	case <-cv.ready:
		return nil
	default:
	}
	t := time.NewTimer(cv.o.connectTimeout())
	defer t.Stop()
	select {
	case <-cv.ready:
		return nil
	case <-t.C:
		return errNoSlotMap
	case <-cv.stop:
		return errClosed
	}
}

// ownersOnceKnown waits up to the connect timeout for the first slot map,
// then lists the shards that own slots in it.
func (cv *clusterVoter) ownersOnceKnown() ([]*node, error) {
	if err := cv.waitMap(); err != nil {
		return nil, err
	}
	owners := cv.owners()
	if len(owners) == 0 {
		return nil, errNoSlotMap
	}
	return owners, nil
}

// owners lists the shards that own slots now, and how many each.
func (cv *clusterVoter) owners() []*node {
	seen := map[*node]bool{}
	var out []*node
	for i := range cv.owner {
		if n := cv.owner[i].Load(); n != nil && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// members lists the nodes a client checks: every master given by address,
// and every shard of each cluster.
func (c *Client) members() []*node {
	if !c.clusters {
		return c.nodes
	}
	var out []*node
	for _, n := range c.nodes {
		if n.cluster != nil {
			out = append(out, n.cluster.members()...)
		} else {
			out = append(out, n)
		}
	}
	return out
}

// ClusterStatus describes a master given as a Redis Cluster.
type ClusterStatus struct {
	Seeds     int  // seed nodes given
	Known     bool // a slot map has been read
	Refreshes int  // slot maps read since the client started
	// Moved and Asked count the MOVED and ASK replies followed.
	Moved, Asked int64
	LastError    string // why no node answered CLUSTER SLOTS the last time; "" when one did
	// Shards are every shard primary seen, in the order first seen; each
	// with its own state (restart guard, record, clock, replication).
	Shards []ShardStatus
}

// ShardStatus is one shard primary of a cluster master.
type ShardStatus struct {
	MasterStatus
	Slots int // slots it owns in the current map
}

// clusterStatus fills st, the status of a cluster master, from its shards.
func (n *node) clusterStatus() MasterStatus {
	cv := n.cluster
	count := map[*node]int{}
	for i := range cv.owner {
		if s := cv.owner[i].Load(); s != nil {
			count[s]++
		}
	}
	cs := &ClusterStatus{Seeds: len(cv.addr.Seeds)}
	select {
	case <-cv.ready:
		cs.Known = true
	default:
	}
	cv.mu.Lock()
	cs.Refreshes, cs.Moved, cs.Asked, cs.LastError = cv.refreshes, cv.moved, cv.asked, cv.lastErr
	cv.mu.Unlock()
	st := MasterStatus{Addr: n.addr, Cluster: cs, Up: cs.Known}
	allGuarded := cs.Known
	for _, s := range cv.members() {
		ss := ShardStatus{MasterStatus: s.status(), Slots: count[s]}
		cs.Shards = append(cs.Shards, ss)
		st.Restarts += ss.Restarts
		st.ClockJumps += ss.ClockJumps
		st.Pipelines += ss.Pipelines
		st.Commands += ss.Commands
		st.Handoffs += ss.Handoffs
		st.AloneCommands += ss.AloneCommands
		st.MarkedDown += ss.MarkedDown
		st.RollbackFailures += ss.RollbackFailures
		st.Promotions += ss.Promotions
		st.Evictions += ss.Evictions
		st.GuardedKeys += ss.GuardedKeys
		if ss.Slots == 0 {
			continue
		}
		if !ss.Up {
			st.Up = false
		}
		if ss.Down {
			st.Down = true
		}
		if ss.LastError != "" {
			st.LastError = ss.Addr + ": " + ss.LastError
		}
		allGuarded = allGuarded && ss.Guarded
	}
	st.Guarded = allGuarded
	st.Role = "cluster"
	st.MinReplicasToWrite = -1
	st.RollbackFailures += n.undoFailures.Load()
	return st
}
