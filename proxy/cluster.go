package proxy

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

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// A Redis Cluster as the passthrough backend (proxy.backend =
// "cluster://host:port,host:port"): the proxy presents itself as one
// standalone Redis, and the application's data lives in the cluster. Each
// command with keys goes to the primary that serves its slot, read from
// CLUSTER SLOTS (on start, every clusterRefresh, and after a MOVED); a
// MOVED or ASK is followed (ASK with ASKING first) and never reaches the
// client. Multi-key commands whose keys are in different slots are split
// (clusterroute.go), or answered CROSSSLOT as the cluster answers them;
// transactions, WATCH and blocking commands keep a connection of the
// client's own on one primary (clustertx.go). Plain commands travel
// pipelined on each node's shared connection (run), as on a single
// backend (backend.Mux); the others a round trip each on a pooled connection
// (send). docs/commands.md, "A Redis Cluster as the backend", lists what
// is routed, split and refused.

// clusterScheme begins a cluster backend's address.
const clusterScheme = "cluster://"

// isClusterAddr reports whether proxy.backend names a Redis Cluster.
func isClusterAddr(addr string) bool { return strings.HasPrefix(addr, clusterScheme) }

// parseClusterAddr reads the seed nodes of cluster://host:port[,host:port…].
func parseClusterAddr(addr string) ([]string, error) {
	rest := strings.TrimPrefix(addr, clusterScheme)
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

// checkClusterBackend validates a cluster backend: its seeds, none of
// which may be a master (the cluster is the application's data, never a
// voter).
func checkClusterBackend(c *Config) error {
	seeds, err := parseClusterAddr(c.Proxy.Backend)
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

// numSlots is the number of hash slots of a Redis Cluster.
const numSlots = 16384

// keySlot is the hash slot of a key: CRC16 of its hash tag (the part
// between the first '{' and the next '}', when not empty) or of the whole
// key, modulo 16384.
func keySlot(key []byte) int {
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

// clusterMaxRedirects bounds the MOVED, ASK and TRYAGAIN a command follows.
const clusterMaxRedirects = 16

// clusterMap is one reading of the cluster's slots.
type clusterMap struct {
	// The primary serving each slot: 1 + its place in addrs; 0: none.
	// Small, so that looking a slot up stays in the CPU's cache.
	slot      [numSlots]uint16
	addrs     []string
	primaries []string // sorted: SCAN's cursors number them
}

// owner is the primary serving slot; "": none.
func (m *clusterMap) owner(slot int) string {
	if i := m.slot[slot]; i > 0 {
		return m.addrs[i-1]
	}
	return ""
}

// setOwner makes addr the owner of slots from..to.
func (m *clusterMap) setOwner(from, to int, addr string) {
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
// connections (backend.Mux) that plain commands of every client travel on,
// pipelined.
type clusterNode struct {
	be, be3   *backend.Pool
	mux, mux3 *backend.Mux
}

// clusterBackend routes passthrough commands to a Redis Cluster's primaries.
type clusterBackend struct {
	seeds    []string
	identity func() (string, string)
	timeout  func() time.Duration
	tls      *tls.Config

	m       atomic.Pointer[clusterMap]
	mu      sync.Mutex // nodes
	nodes   map[string]*clusterNode
	refresh chan struct{} // asks the refresher for a new reading
	stop    chan struct{}
	// refreshed is closed and replaced after every reading, for those
	// that wait for one.
	rmu       sync.Mutex
	refreshed chan struct{}
}

func newClusterBackend(seeds []string, identity func() (string, string), timeout func() time.Duration, tlsCfg *tls.Config) *clusterBackend {
	cb := &clusterBackend{seeds: seeds, identity: identity, timeout: timeout, tls: tlsCfg,
		nodes: map[string]*clusterNode{}, refresh: make(chan struct{}, 1), stop: make(chan struct{}), refreshed: make(chan struct{})}
	go cb.refresher()
	return cb
}

// node is the pools of a node, made on first use.
func (cb *clusterBackend) node(addr string) *clusterNode {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	n := cb.nodes[addr]
	if n == nil {
		// A node's host:port, which New takes without error.
		be, _ := backend.New(backend.Options{Addr: addr, Identity: cb.identity, Timeout: cb.timeout(), PoolSize: 64, TLS: cb.tls})
		n = &clusterNode{be: be, be3: be.RESP3()}
		n.mux = backend.NewMux(n.be, cb.timeout)
		n.mux3 = backend.NewMux(n.be3, cb.timeout)
		cb.nodes[addr] = n
	}
	return n
}

// pool is the pool of addr for a protocol.
func (cb *clusterBackend) pool(addr string, resp3 bool) *backend.Pool {
	if n := cb.node(addr); resp3 {
		return n.be3
	} else {
		return n.be
	}
}

func (cb *clusterBackend) close() {
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
func (cb *clusterBackend) refresher() {
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
func (cb *clusterBackend) askRefresh() {
	select {
	case cb.refresh <- struct{}{}:
	default:
	}
}

// current is the slot map, waiting for the first reading (at most the
// passthrough timeout) when there is none yet.
func (cb *clusterBackend) current() (*clusterMap, error) {
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
func (cb *clusterBackend) load() error {
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
func (cb *clusterBackend) readSlots(addr string) (*clusterMap, error) {
	be := cb.pool(addr, false)
	bc, err := be.Get()
	if err != nil {
		return nil, err
	}
	raw, err := bc.Do([][]byte{[]byte("CLUSTER"), []byte("SLOTS")}, cb.timeout())
	if err != nil {
		bc.Close()
		return nil, err
	}
	v, err := wire.ParseValue(raw)
	be.Put(bc)
	if err != nil {
		return nil, err
	}
	if er, ok := v.(wire.ErrorReply); ok {
		return nil, er
	}
	host, _, _ := net.SplitHostPort(addr)
	m := &clusterMap{}
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

// moved notes a MOVED: the slot's owner at once, and a new reading of the
// whole map (a MOVED usually comes with others: a resharding, a failover).
func (cb *clusterBackend) moved(slot int, addr string) {
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

// redirect reads a MOVED or ASK reply: "-MOVED 3999 127.0.0.1:6381".
func redirect(reply []byte) (kind string, slot int, addr string, ok bool) {
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

// retryable reports whether an error reply asks to try again shortly: a
// multi-key command whose slot is being migrated (TRYAGAIN), or a cluster
// that is reconfiguring (CLUSTERDOWN).
func retryable(reply []byte) bool {
	return bytes.HasPrefix(reply, []byte("-TRYAGAIN")) || bytes.HasPrefix(reply, []byte("-CLUSTERDOWN"))
}

// send runs one command on the primary addr (for slot, -1 for a keyless
// command) on a pooled connection, following MOVED and ASK, and returns
// its raw reply (the caller's to keep).
func (cb *clusterBackend) send(addr string, slot int, args [][]byte, resp3 bool) ([]byte, error) {
	reply, err := cb.sendOnce(addr, args, resp3, false)
	if err != nil {
		return nil, err
	}
	return cb.follow(reply, addr, slot, args, resp3)
}

// follow follows the MOVED, ASK, TRYAGAIN or CLUSTERDOWN that reply, the
// reply of addr to args, may be, sending args again (on pooled
// connections) until the reply is another, at most clusterMaxRedirects
// times; it returns the last reply.
func (cb *clusterBackend) follow(reply []byte, addr string, slot int, args [][]byte, resp3 bool) ([]byte, error) {
	for try := 0; try < clusterMaxRedirects; try++ {
		asking := false
		if kind, s, to, ok := redirect(reply); ok {
			if kind == "MOVED" {
				cb.moved(s, to)
			} else {
				asking = true
			}
			addr = to
		} else if retryable(reply) {
			time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
			if slot >= 0 {
				if m, err := cb.current(); err == nil && m.owner(slot) != "" {
					addr = m.owner(slot)
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

// clusterCall is one command for a primary of a cluster backend, and its
// reply once run (clusterBackend.run).
type clusterCall struct {
	addr  string // the primary it goes to
	slot  int    // its keys' slot, -1 for none
	args  [][]byte
	reply []byte // raw, the caller's to keep
	err   error
}

// run runs calls on the nodes' shared connections (backend.Mux), as the single
// backend runs plain commands: the calls bound for one node go out
// together, in their order, in one write with other clients' commands,
// and every node's at once; the proxy waits for all the replies. A reply
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
func (cb *clusterBackend) run(calls []clusterCall, resp3 bool) {
	type part struct {
		addr string
		at   []int // indexes in calls
		cmds []redcon.Command
		r    backend.MuxReq
		err  error
	}
	var parts []*part
	for i := range calls {
		var p *part
		for _, q := range parts {
			if q.addr == calls[i].addr {
				p = q
				break
			}
		}
		if p == nil {
			p = &part{addr: calls[i].addr, at: make([]int, 0, len(calls)), cmds: make([]redcon.Command, 0, len(calls))}
			parts = append(parts, p)
		}
		p.at = append(p.at, i)
		p.cmds = append(p.cmds, redcon.Command{Args: calls[i].args})
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
				calls[at].err = errBackendUnreachable
			}
			cb.askRefresh()
			continue
		}
		out, got, err := p.r.Wait()
		prev := 0
		for j, at := range p.at {
			if j >= got {
				calls[at].err = err
				if err == nil {
					calls[at].err = backend.ErrMuxClosed
				}
				continue
			}
			calls[at].reply = out[prev:p.r.Ends[j]:p.r.Ends[j]]
			prev = p.r.Ends[j]
		}
		if err != nil {
			cb.askRefresh()
		}
	}
	for i := range calls {
		c := &calls[i]
		if c.err == nil && (len(c.reply) > 0 && c.reply[0] == '-') {
			c.reply, c.err = cb.follow(c.reply, c.addr, c.slot, c.args, resp3)
		}
	}
}

// runOne is run for one command.
func (cb *clusterBackend) runOne(addr string, slot int, args [][]byte, resp3 bool) ([]byte, error) {
	calls := []clusterCall{{addr: addr, slot: slot, args: args}}
	cb.run(calls, resp3)
	return calls[0].reply, calls[0].err
}

// sendOnce runs one command on addr (after ASKING when asking), on a
// pooled connection; a pooled connection the node closed meanwhile is
// replaced once by a new one.
func (cb *clusterBackend) sendOnce(addr string, args [][]byte, resp3, asking bool) ([]byte, error) {
	be := cb.pool(addr, resp3)
	run := func(bc *backend.Conn) ([]byte, error) {
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
		return nil, errBackendUnreachable
	}
	reply, err := run(bc)
	if err != nil {
		bc.Close()
		if bc, err = be.Dial(); err != nil {
			return nil, errBackendUnreachable
		}
		if reply, err = run(bc); err != nil {
			bc.Close()
			return nil, err
		}
	}
	be.Put(bc)
	return reply, nil
}

// readElements splits a raw array reply into its elements' raw replies;
// ok is false for a reply that is not an array (an error).
func readElements(raw []byte) (elems [][]byte, ok bool) {
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
