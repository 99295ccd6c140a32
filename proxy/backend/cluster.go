package backend

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// A Redis Cluster as the passthrough backend (proxy.backend =
// "cluster://host:port,host:port"): the connections to its primaries and
// the map of which primary serves each slot, read from CLUSTER SLOTS (on
// start, every clusterRefresh, and after a MOVED). A MOVED, an ASK (with
// ASKING first), a TRYAGAIN or a CLUSTERDOWN a command meets is followed
// here and never reaches the client. Plain commands travel pipelined on
// each node's shared connection (Cluster.Run), as on a single backend
// (Mux); the others a round trip each on a pooled connection
// (Cluster.Send). Which node a client's command goes to (its keys, a
// split by slot, a run on every primary) and transactions on a client's
// own connection are package proxy's (clusterroute.go, clustertx.go).

// ClusterScheme begins a cluster backend's address.
const ClusterScheme = "cluster://"

// IsClusterAddr reports whether proxy.backend names a Redis Cluster.
func IsClusterAddr(addr string) bool { return strings.HasPrefix(addr, ClusterScheme) }

// ParseClusterAddr reads the seed nodes of cluster://host:port[,host:port…].
func ParseClusterAddr(addr string) ([]string, error) {
	rest := strings.TrimPrefix(addr, ClusterScheme)
	if rest == "" {
		return nil, fmt.Errorf("%q names no node (want cluster://host:port[,host:port…])", addr)
	}
	var seeds []string
	for _, a := range strings.Split(rest, ",") {
		if _, _, err := net.SplitHostPort(a); err != nil || strings.ContainsAny(a, "/@") {
			return nil, fmt.Errorf("%q: %q is not host:port (want cluster://host:port[,host:port…])", addr, a)
		}
		if slices.Contains(seeds, a) {
			return nil, fmt.Errorf("%q: %q is listed twice", addr, a)
		}
		seeds = append(seeds, a)
	}
	return seeds, nil
}

// ErrUnreachable fails a command for which no connection to the backend
// could be had.
var ErrUnreachable = errors.New("passthrough backend unreachable")

// numSlots is the number of hash slots of a Redis Cluster.
const numSlots = 16384

// KeySlot is the hash slot of a key: CRC16 of its hash tag (the part
// between the first '{' and the next '}', when not empty) or of the whole
// key, modulo 16384.
func KeySlot(key []byte) int {
	if i := bytes.IndexByte(key, '{'); i >= 0 {
		if j := bytes.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) & (numSlots - 1)
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with,
// a byte at a time from crc16Table.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^c]
	}
	return crc
}

// crc16Table is CRC-16/XMODEM of each byte value.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// clusterRefresh is how often the slot map is read again without a MOVED.
const clusterRefresh = 10 * time.Second

// MaxRedirects bounds the MOVED, ASK and TRYAGAIN a command follows.
const MaxRedirects = 16

// SlotMap is one reading of the cluster's slots.
type SlotMap struct {
	// The primary serving each slot: 1 + its place in addrs; 0: none.
	// Small, so that looking a slot up stays in the CPU's cache.
	slot      [numSlots]uint16
	addrs     []string
	primaries []string // sorted: SCAN's cursors number them
}

// Owner is the primary serving slot; "": none.
func (m *SlotMap) Owner(slot int) string {
	if i := m.slot[slot]; i > 0 {
		return m.addrs[i-1]
	}
	return ""
}

// AddrOf is the primary a command for slot goes to: its owner, and the
// first primary for a keyless command (-1) or a slot none serves (which
// answers CLUSTERDOWN, or MOVED).
func (m *SlotMap) AddrOf(slot int) string {
	if slot >= 0 && m.Owner(slot) != "" {
		return m.Owner(slot)
	}
	return m.primaries[0]
}

// Primaries is the primaries' addresses, sorted, never empty; the
// caller must not change it.
func (m *SlotMap) Primaries() []string { return m.primaries }

// setOwner makes addr the owner of slots from..to.
func (m *SlotMap) setOwner(from, to int, addr string) {
	i := slices.Index(m.addrs, addr)
	if i < 0 {
		m.addrs = append(m.addrs, addr)
		i = len(m.addrs) - 1
	}
	for s := from; s <= to; s++ {
		m.slot[s] = uint16(i + 1)
	}
}

// clusterNode is the connections of one node: pools, for commands that
// have a connection of their own for their round trip, and the shared
// connections (Mux) that plain commands of every client travel on,
// pipelined.
type clusterNode struct {
	be, be3   *Pool
	mux, mux3 *Mux
}

// ClusterOptions say where a Redis Cluster is and how to reach its nodes.
type ClusterOptions struct {
	// Seeds are the nodes asked for the slot map first (host:port).
	Seeds []string
	// Identity returns the AUTH credentials, read at every dial; "" for
	// none.
	Identity func() (user, pass string)
	// Timeout bounds a dial and a command's round trip, read at every
	// use (a reload may change it).
	Timeout func() time.Duration
	// TLS, if set, wraps every connection.
	TLS *tls.Config
}

// Cluster is the connections to a Redis Cluster's primaries and its slot
// map, kept up to date by a goroutine of its own until Close.
type Cluster struct {
	seeds    []string
	identity func() (string, string)
	timeout  func() time.Duration
	tls      *tls.Config

	m       atomic.Pointer[SlotMap]
	mu      sync.Mutex // nodes
	nodes   map[string]*clusterNode
	refresh chan struct{} // asks the refresher for a new reading
	stop    chan struct{}
	// refreshed is closed and replaced after every reading, for those
	// that wait for one.
	rmu       sync.Mutex
	refreshed chan struct{}
}

// NewCluster starts reading the slot map of the cluster o names; its
// nodes are dialled on first use.
func NewCluster(o ClusterOptions) *Cluster {
	cb := &Cluster{seeds: o.Seeds, identity: o.Identity, timeout: o.Timeout, tls: o.TLS,
		nodes: map[string]*clusterNode{}, refresh: make(chan struct{}, 1), stop: make(chan struct{}), refreshed: make(chan struct{})}
	go cb.refresher()
	return cb
}

// node is the pools of a node, made on first use.
func (cb *Cluster) node(addr string) *clusterNode {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	n := cb.nodes[addr]
	if n == nil {
		// A node's host:port, which New takes without error.
		be, _ := New(Options{Addr: addr, Identity: cb.identity, Timeout: cb.timeout(), PoolSize: 64, TLS: cb.tls})
		n = &clusterNode{be: be, be3: be.RESP3()}
		n.mux = NewMux(n.be, cb.timeout)
		n.mux3 = NewMux(n.be3, cb.timeout)
		cb.nodes[addr] = n
	}
	return n
}

// Pool is the pool of the node addr for a protocol, made on first use.
func (cb *Cluster) Pool(addr string, resp3 bool) *Pool {
	if n := cb.node(addr); resp3 {
		return n.be3
	} else {
		return n.be
	}
}

// Close stops the refresher and closes every node's connections.
func (cb *Cluster) Close() {
	close(cb.stop)
	cb.mu.Lock()
	defer cb.mu.Unlock()
	for _, n := range cb.nodes {
		n.be.Close()
		n.be3.Close()
		n.mux.Close()
		n.mux3.Close()
	}
}

// refresher reads the slot map on start, when asked, and every
// clusterRefresh.
func (cb *Cluster) refresher() {
	t := time.NewTicker(clusterRefresh)
	defer t.Stop()
	for {
		_ = cb.load()
		select {
		case <-cb.stop:
			return
		case <-t.C:
		case <-cb.refresh:
		}
	}
}

// askRefresh asks the refresher for a new reading, without waiting.
func (cb *Cluster) askRefresh() {
	select {
	case cb.refresh <- struct{}{}:
	default:
	}
}

// Current is the slot map, waiting for the first reading (at most the
// passthrough timeout) when there is none yet.
func (cb *Cluster) Current() (*SlotMap, error) {
	if m := cb.m.Load(); m != nil {
		return m, nil
	}
	cb.rmu.Lock()
	ch := cb.refreshed
	cb.rmu.Unlock()
	cb.askRefresh()
	select {
	case <-ch:
	case <-time.After(cb.timeout()):
	}
	if m := cb.m.Load(); m != nil {
		return m, nil
	}
	return nil, errors.New("proxy: no node of the cluster backend answered CLUSTER SLOTS")
}

// load reads CLUSTER SLOTS from the first node that answers: the primaries
// known, then the seeds.
func (cb *Cluster) load() error {
	defer func() {
		cb.rmu.Lock()
		close(cb.refreshed)
		cb.refreshed = make(chan struct{})
		cb.rmu.Unlock()
	}()
	var tries []string
	if m := cb.m.Load(); m != nil {
		tries = append(tries, m.primaries...)
	}
	tries = append(tries, cb.seeds...)
	var errs []error
	for _, addr := range tries {
		m, err := cb.readSlots(addr)
		if err == nil {
			cb.m.Store(m)
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return errors.Join(errs...)
}

// readSlots reads the slot map from one node.
func (cb *Cluster) readSlots(addr string) (*SlotMap, error) {
	be := cb.Pool(addr, false)
	bc, err := be.Get()
	if err != nil {
		return nil, err
	}
	raw, err := bc.Do([][]byte{[]byte("CLUSTER"), []byte("SLOTS")}, cb.timeout())
	if err != nil {
		bc.Close()
		return nil, err
	}
	v, err := wire.ParseResult(raw)
	be.Put(bc)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	m := &SlotMap{}
	ranges, _ := v.([]any)
	for _, r := range ranges {
		f, _ := r.([]any)
		if len(f) < 3 {
			continue
		}
		start, _ := f[0].(int64)
		end, _ := f[1].(int64)
		n, _ := f[2].([]any)
		if len(n) < 2 || start < 0 || end >= numSlots || start > end {
			continue
		}
		ip, _ := n[0].(string)
		port, _ := n[1].(int64)
		if ip == "" || ip == "?" {
			ip = host // the node asked
		}
		p := net.JoinHostPort(ip, strconv.FormatInt(port, 10))
		m.setOwner(int(start), int(end), p)
		if !slices.Contains(m.primaries, p) {
			m.primaries = append(m.primaries, p)
		}
	}
	if len(m.primaries) == 0 {
		return nil, errors.New("CLUSTER SLOTS: no slot is served")
	}
	slices.Sort(m.primaries)
	return m, nil
}

// Moved notes a MOVED: the slot's owner at once, and a new reading of the
// whole map (a MOVED usually comes with others: a resharding, a failover).
func (cb *Cluster) Moved(slot int, addr string) {
	if old := cb.m.Load(); old != nil && slot >= 0 && slot < numSlots {
		m := *old
		m.addrs = slices.Clip(m.addrs) // appended to: a copy of its own
		m.setOwner(slot, slot, addr)
		if !slices.Contains(m.primaries, addr) {
			m.primaries = append(slices.Clone(m.primaries), addr)
			slices.Sort(m.primaries)
		}
		cb.m.CompareAndSwap(old, &m)
	}
	cb.askRefresh()
}

// Redirect reads a MOVED or ASK reply: "-MOVED 3999 127.0.0.1:6381".
func Redirect(reply []byte) (kind string, slot int, addr string, ok bool) {
	for _, k := range []string{"-MOVED ", "-ASK "} {
		if bytes.HasPrefix(reply, []byte(k)) {
			f := strings.Fields(string(trimCRLF(reply[len(k):])))
			if len(f) != 2 {
				return "", 0, "", false
			}
			n, err := strconv.Atoi(f[0])
			if err != nil {
				return "", 0, "", false
			}
			return strings.TrimSpace(k[1:]), n, f[1], true
		}
	}
	return "", 0, "", false
}

// Retryable reports whether an error reply asks to try again shortly: a
// multi-key command whose slot is being migrated (TRYAGAIN), or a cluster
// that is reconfiguring (CLUSTERDOWN).
func Retryable(reply []byte) bool {
	return bytes.HasPrefix(reply, []byte("-TRYAGAIN")) || bytes.HasPrefix(reply, []byte("-CLUSTERDOWN"))
}

// Send runs one command on the primary addr (for slot, -1 for a keyless
// command) on a pooled connection, following MOVED and ASK, and returns
// its raw reply (the caller's to keep).
func (cb *Cluster) Send(addr string, slot int, args [][]byte, resp3 bool) ([]byte, error) {
	reply, err := cb.sendOnce(addr, args, resp3, false)
	if err != nil {
		return nil, err
	}
	return cb.follow(reply, addr, slot, args, resp3)
}

// follow follows the MOVED, ASK, TRYAGAIN or CLUSTERDOWN that reply, the
// reply of addr to args, may be, sending args again (on pooled
// connections) until the reply is another, at most MaxRedirects times;
// it returns the last reply.
func (cb *Cluster) follow(reply []byte, addr string, slot int, args [][]byte, resp3 bool) ([]byte, error) {
	for try := 0; try < MaxRedirects; try++ {
		asking := false
		if kind, s, to, ok := Redirect(reply); ok {
			if kind == "MOVED" {
				cb.Moved(s, to)
			} else {
				asking = true
			}
			addr = to
		} else if Retryable(reply) {
			time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
			if slot >= 0 {
				if m, err := cb.Current(); err == nil && m.Owner(slot) != "" {
					addr = m.Owner(slot)
				}
			}
		} else {
			return reply, nil
		}
		var err error
		if reply, err = cb.sendOnce(addr, args, resp3, asking); err != nil {
			return nil, err
		}
	}
	return reply, nil
}

// ClusterCall is one command for a primary of a Cluster, and its reply
// once run (Cluster.Run).
type ClusterCall struct {
	Addr  string // the primary it goes to
	Slot  int    // its keys' slot, -1 for none
	Args  [][]byte
	Reply []byte // raw, the caller's to keep
	Err   error
}

// Run runs calls on the nodes' shared connections (Mux), as the single
// backend runs plain commands: the calls bound for one node go out
// together, in their order, in one write with other clients' commands,
// and every node's at once; Run waits for all the replies. A reply
// that is a MOVED, an ASK, a TRYAGAIN or a CLUSTERDOWN is then followed
// (follow), one call after another in their order. A node's connection
// that fails fails the calls on it not yet answered; they are not sent
// again, as they may have run.
//
// So a call that meets a redirect runs after the other calls of the batch
// on its node, even those after it: on one key that cannot be seen (a
// MOVED answers every call of the slot, an ASK every call on a key the
// node no longer has), but a TRYAGAIN of a multi-key command during a
// migration lets the calls after it on its keys run first, as with a
// cluster-aware client's pipeline (docs/commands.md).
func (cb *Cluster) Run(calls []ClusterCall, resp3 bool) {
	type part struct {
		addr string
		at   []int // indexes in calls
		cmds []redcon.Command
		r    MuxReq
		err  error
	}
	var parts []*part
	for i := range calls {
		var p *part
		for _, q := range parts {
			if q.addr == calls[i].Addr {
				p = q
				break
			}
		}
		if p == nil {
			p = &part{addr: calls[i].Addr, at: make([]int, 0, len(calls)), cmds: make([]redcon.Command, 0, len(calls))}
			parts = append(parts, p)
		}
		p.at = append(p.at, i)
		p.cmds = append(p.cmds, redcon.Command{Args: calls[i].Args})
	}
	for _, p := range parts {
		n := cb.node(p.addr)
		pool := n.mux
		if resp3 {
			pool = n.mux3
		}
		p.err = pool.Start(&p.r, p.cmds)
	}
	for _, p := range parts {
		if p.err != nil {
			for _, at := range p.at {
				calls[at].Err = ErrUnreachable
			}
			cb.askRefresh()
			continue
		}
		out, got, err := p.r.Wait()
		prev := 0
		for j, at := range p.at {
			if j >= got {
				calls[at].Err = err
				if err == nil {
					calls[at].Err = ErrMuxClosed
				}
				continue
			}
			calls[at].Reply = out[prev:p.r.Ends[j]:p.r.Ends[j]]
			prev = p.r.Ends[j]
		}
		if err != nil {
			cb.askRefresh()
		}
	}
	for i := range calls {
		c := &calls[i]
		if c.Err == nil && (len(c.Reply) > 0 && c.Reply[0] == '-') {
			c.Reply, c.Err = cb.follow(c.Reply, c.Addr, c.Slot, c.Args, resp3)
		}
	}
}

// RunOne is Run for one command.
func (cb *Cluster) RunOne(addr string, slot int, args [][]byte, resp3 bool) ([]byte, error) {
	calls := []ClusterCall{{Addr: addr, Slot: slot, Args: args}}
	cb.Run(calls, resp3)
	return calls[0].Reply, calls[0].Err
}

// sendOnce runs one command on addr (after ASKING when asking), on a
// pooled connection; a pooled connection the node closed meanwhile is
// replaced once by a new one.
func (cb *Cluster) sendOnce(addr string, args [][]byte, resp3, asking bool) ([]byte, error) {
	be := cb.Pool(addr, resp3)
	run := func(bc *Conn) ([]byte, error) {
		if asking {
			r, err := bc.Do([][]byte{[]byte("ASKING")}, cb.timeout())
			if err != nil {
				return nil, err
			}
			if len(r) == 0 || r[0] != '+' {
				return append([]byte(nil), r...), nil
			}
		}
		r, err := bc.Do(args, cb.timeout())
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), r...), nil
	}
	bc, err := be.Get()
	if err != nil {
		return nil, ErrUnreachable
	}
	reply, err := run(bc)
	if err != nil {
		bc.Close()
		if bc, err = be.Dial(); err != nil {
			return nil, ErrUnreachable
		}
		if reply, err = run(bc); err != nil {
			bc.Close()
			return nil, err
		}
	}
	be.Put(bc)
	return reply, nil
}

// ReadElements splits a raw array reply into its elements' raw replies;
// ok is false for a reply that is not an array (an error).
func ReadElements(raw []byte) (elems [][]byte, ok bool) {
	if len(raw) == 0 || raw[0] != '*' {
		return nil, false
	}
	r := bufio.NewReader(bytes.NewReader(raw))
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, false
	}
	n, err := strconv.Atoi(string(trimCRLF(line[1:])))
	if err != nil {
		return nil, false
	}
	for range max(n, 0) {
		e, err := wire.ReadReply(r, nil)
		if err != nil {
			return nil, false
		}
		elems = append(elems, e)
	}
	return elems, true
}

// trimCRLF is b without the CR and LF it ends with.
func trimCRLF(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
