package proxy

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// Routing of one command on a cluster backend (cluster.go; its
// connections and slot map are backend.Cluster's):
//
//   - a command with keys goes to the primary of their slot; keys in
//     different slots are CROSSSLOT, as the cluster answers, but for
//     MGET, MSET, DEL, UNLINK, EXISTS and TOUCH, which are split by slot
//     and their replies merged in order (splitCommands);
//   - DBSIZE, KEYS, SCAN, FLUSHDB, FLUSHALL and RANDOMKEY run on every
//     primary (fanOut); SCAN's cursor names the primary (scanCursor);
//   - PUBLISH runs on the node of the proxy's subscriptions (the first
//     seed), every other keyless command on one primary, the first of
//     the sorted list.

// errCrossSlot is the cluster's error for keys in different slots.
const errCrossSlot = "-CROSSSLOT Keys in request don't hash to the same slot\r\n"

// splitCommands are the multi-key commands split by slot.
var splitCommands = map[string]bool{"mget": true, "mset": true, "del": true, "unlink": true, "exists": true, "touch": true}

// clusterKeys is the keys of a command, for its slot: where the backend's
// COMMAND reply puts them, the declared keys of a script or function, and
// those of other commands whose keys move with their arguments as COMMAND
// GETKEYS names them.
func (s *Server) clusterKeys(name string, args [][]byte) ([][]byte, error) {
	switch name {
	case "command", "cluster", "info", "ping", "echo", "time":
		return nil, nil // keyless; COMMAND is how keys are found
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		if len(args) < 3 {
			return nil, nil
		}
		n, err := parseInt(args[2])
		if err != nil || n < 0 || n > int64(len(args)-3) {
			return nil, nil // the node answers the error
		}
		return args[3 : 3+n], nil
	}
	specs, err := s.keyTab.load(s)
	if err != nil {
		return nil, err
	}
	sp, ok := specOf(specs, args[0], nil)
	if ok && sp.subs && len(args) > 1 {
		sp, ok = specOf(specs, args[0], args[1])
	}
	switch {
	case !ok:
		return nil, nil
	case sp.movable:
		return s.movableKeys(args)
	case sp.first <= 0 || sp.first >= len(args):
		return nil, nil
	}
	last := sp.last
	if last < 0 {
		last += len(args)
	}
	var keys [][]byte
	for i := sp.first; i <= min(last, len(args)-1); i += max(sp.step, 1) {
		keys = append(keys, args[i])
	}
	return keys, nil
}

// slotOf is the one slot of keys: -1 for none, -2 for keys in different
// slots.
func slotOf(keys [][]byte) int {
	slot := -1
	for _, k := range keys {
		switch n := backend.KeySlot(k); {
		case slot == -1:
			slot = n
		case n != slot:
			return -2
		}
	}
	return slot
}

// clusterVia is how the commands that one client command makes reach the
// primaries: on pooled connections, a round trip each (Cluster.Send), or
// on the nodes' shared connections, pipelined with other clients'
// (Cluster.Run), as the single backend sends a plain command (forward,
// forwardShared).
type clusterVia struct {
	cb     *backend.Cluster
	resp3  bool // RESP3 connections
	shared bool // the shared connections
}

// one runs one command on addr (for slot, -1 for none).
func (v clusterVia) one(addr string, slot int, args [][]byte) ([]byte, error) {
	if v.shared {
		return v.cb.RunOne(addr, slot, args, v.resp3)
	}
	return v.cb.Send(addr, slot, args, v.resp3)
}

// all runs calls at once.
func (v clusterVia) all(calls []backend.ClusterCall) {
	if v.shared {
		v.cb.Run(calls, v.resp3)
		return
	}
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &calls[i]
			c.Reply, c.Err = v.cb.Send(c.Addr, c.Slot, c.Args, v.resp3)
		}()
	}
	wg.Wait()
}

// fanOutCommands run on every primary (fanOut).
var fanOutCommands = map[string]bool{"dbsize": true, "keys": true, "scan": true, "flushdb": true, "flushall": true, "randomkey": true, "info": true}

// clusterDo runs one command (args) on the cluster backend and returns its
// raw reply.
func (s *Server) clusterDo(args [][]byte, v clusterVia) ([]byte, error) {
	m, err := s.cl.Current()
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(string(args[0]))
	if fanOutCommands[name] {
		return s.fanOut(m, name, args, v)
	}
	keys, err := s.clusterKeys(name, args)
	if err != nil {
		return nil, err
	}
	switch slot := slotOf(keys); {
	case slot == -1 && name == "publish":
		// On the node the proxy's subscriptions are on (the first
		// seed): its count is theirs. The cluster passes the message to
		// every node's subscribers.
		return v.one(s.be.Addr(), -1, args)
	case slot >= -1:
		return v.one(m.AddrOf(slot), slot, args)
	case splitCommands[name]:
		return s.splitDo(m, name, args, v)
	}
	return []byte(errCrossSlot), nil
}

// slotPart is the part of a split command for one slot: the positions of
// its keys (or key-value pairs) in the client's command.
type slotPart struct {
	slot int
	at   []int
	args [][]byte
}

// splitDo runs a multi-key command whose keys are in several slots as one
// command per slot, at once, and merges their replies: MGET's values in
// the order of its keys, MSET's OK, the others' counts summed. The first
// error answered by a part is the reply (the other parts ran: MSET and
// DEL are not atomic across slots, as on a cluster-aware client).
func (s *Server) splitDo(m *backend.SlotMap, name string, args [][]byte, v clusterVia) ([]byte, error) {
	step := 1
	if name == "mset" {
		step = 2
		if (len(args)-1)%2 != 0 {
			return []byte("-ERR wrong number of arguments for 'mset' command\r\n"), nil
		}
	}
	var parts []*slotPart
	bySlot := map[int]*slotPart{}
	for i := 1; i+step-1 < len(args); i += step {
		sl := backend.KeySlot(args[i])
		p := bySlot[sl]
		if p == nil {
			p = &slotPart{slot: sl, args: [][]byte{args[0]}}
			bySlot[sl] = p
			parts = append(parts, p)
		}
		p.at = append(p.at, i)
		p.args = append(p.args, args[i:i+step]...)
	}
	calls := make([]backend.ClusterCall, len(parts))
	for i, p := range parts {
		calls[i] = backend.ClusterCall{Addr: m.AddrOf(p.slot), Slot: p.slot, Args: p.args}
	}
	v.all(calls)
	replies := make([][]byte, len(parts))
	for i, c := range calls {
		if c.Err != nil {
			return nil, c.Err
		}
		replies[i] = c.Reply
	}
	for _, r := range replies {
		if len(r) > 0 && (r[0] == '-' || r[0] == '!') {
			return r, nil
		}
	}
	switch name {
	case "mset":
		return []byte("+OK\r\n"), nil
	case "mget":
		vals := make([][]byte, len(args))
		for i, p := range parts {
			elems, ok := backend.ReadElements(replies[i])
			if !ok || len(elems) != len(p.at) {
				return nil, errors.New("proxy: unexpected MGET reply from a cluster node")
			}
			for j, at := range p.at {
				vals[at] = elems[j]
			}
		}
		out := redcon.AppendArray(nil, len(args)-1)
		for _, v := range vals[1:] {
			out = append(out, v...)
		}
		return out, nil
	}
	var n int64
	for _, r := range replies {
		v, err := wire.ParseValue(r)
		x, ok := v.(int64)
		if err != nil || !ok {
			return nil, errors.New("proxy: unexpected reply from a cluster node")
		}
		n += x
	}
	return redcon.AppendInt(nil, n), nil
}

// fanOut runs a keyspace command on every primary: DBSIZE summed, KEYS
// joined, FLUSHDB and FLUSHALL on each (the first error, else OK),
// RANDOMKEY from the primaries in random order until one has a key, SCAN
// one primary after another (scanCursor).
func (s *Server) fanOut(m *backend.SlotMap, name string, args [][]byte, v clusterVia) ([]byte, error) {
	switch name {
	case "scan":
		return s.clusterScan(m, args, v)
	case "randomkey":
		var last []byte
		for _, i := range rand.Perm(len(m.Primaries())) {
			r, err := v.one(m.Primaries()[i], -1, args)
			if err != nil {
				return nil, err
			}
			if !isNilReply(r) {
				return r, nil
			}
			last = r
		}
		return last, nil
	}
	calls := make([]backend.ClusterCall, len(m.Primaries()))
	for i, addr := range m.Primaries() {
		calls[i] = backend.ClusterCall{Addr: addr, Slot: -1, Args: args}
	}
	v.all(calls)
	replies := make([][]byte, len(calls))
	for i, c := range calls {
		if c.Err != nil {
			return nil, c.Err
		}
		replies[i] = c.Reply
	}
	for _, r := range replies {
		if len(r) > 0 && (r[0] == '-' || r[0] == '!') {
			return r, nil
		}
	}
	switch name {
	case "dbsize":
		var n int64
		for _, r := range replies {
			v, _ := wire.ParseValue(r)
			x, _ := v.(int64)
			n += x
		}
		return redcon.AppendInt(nil, n), nil
	case "keys":
		var all [][]byte
		for _, r := range replies {
			elems, ok := backend.ReadElements(r)
			if !ok {
				return r, nil
			}
			all = append(all, elems...)
		}
		out := redcon.AppendArray(nil, len(all))
		for _, e := range all {
			out = append(out, e...)
		}
		return out, nil
	case "info":
		return mergeInfo(replies, v.resp3)
	}
	return replies[0], nil // flushes: OK
}

// SCAN's cursor on a cluster backend names the primary and the cursor
// there: node + cursor<<scanNodeBits, where node is the primary's place in
// the sorted list of primaries' addresses. A scan goes through the
// primaries one after another, each from cursor 0 until it answers 0, and
// ends (cursor 0) after the last. A primary's cursor of more than
// 64-scanNodeBits bits, or a change of the primaries in the middle of a
// scan, is answered "ERR invalid cursor" or loses SCAN's guarantees.
const scanNodeBits = 10

func (s *Server) clusterScan(m *backend.SlotMap, args [][]byte, v clusterVia) ([]byte, error) {
	if len(args) < 2 {
		return v.one(m.Primaries()[0], -1, args) // its error
	}
	c, err := strconv.ParseUint(string(args[1]), 10, 64)
	node := int(c & (1<<scanNodeBits - 1))
	if err != nil || node >= len(m.Primaries()) {
		return []byte("-ERR invalid cursor\r\n"), nil
	}
	a := append([][]byte{args[0], []byte(strconv.FormatUint(c>>scanNodeBits, 10))}, args[2:]...)
	r, err := v.one(m.Primaries()[node], -1, a)
	if err != nil {
		return nil, err
	}
	elems, ok := backend.ReadElements(r)
	if !ok || len(elems) != 2 {
		return r, nil // an error
	}
	cv, _ := wire.ParseValue(elems[0])
	cs, _ := cv.(string)
	next, err := strconv.ParseUint(cs, 10, 64)
	if err != nil || next >= 1<<(64-scanNodeBits) {
		return []byte("-ERR redlock-proxy: a cluster node's SCAN cursor is too large to encode\r\n"), nil
	}
	var out uint64
	switch {
	case next != 0:
		out = next<<scanNodeBits | uint64(node)
	case node+1 < len(m.Primaries()):
		out = uint64(node + 1)
	}
	b := redcon.AppendArray(nil, 2)
	b = redcon.AppendBulkString(b, strconv.FormatUint(out, 10))
	return append(b, elems[1]...), nil
}

// clusterForward passes one command through to the cluster backend, on
// pooled connections, and writes its reply.
func (s *Server) clusterForward(c redcon.Conn, st *client, args [][]byte) {
	s.m.Passthrough.Inc()
	reply, err := s.clusterDo(args, clusterVia{cb: s.cl, resp3: st != nil && st.proto == 3})
	if err != nil {
		s.log.Warn().Err(err).Msg("passthrough command failed")
		c.WriteError("ERR redlock-proxy: passthrough backend failed")
		return
	}
	c.WriteRaw(reply)
}

// clusterBatch passes a batch of plain commands through to the cluster
// backend, their replies written in order, as forwardShared does on one
// backend: the commands with keys of one slot go to its primary on the
// node's shared connection (backend.Cluster.Run), those of the batch bound
// for one node together, in their order, every node's at once, in turns
// of at most backend.MuxMaxBatch commands (whose replies are held at once). A
// command without keys, with keys of several slots (split or refused) or
// run on every primary (DBSIZE, SCAN, FLUSHALL…) may act on any key: it
// runs alone, after the commands before it are answered and before those
// after it are sent. Where the backend holds data beside the locks, a GET
// of a lock key it answers nil is answered by the quorum (writeBatched).
func (s *Server) clusterBatch(c redcon.Conn, st *client, batch []redcon.Command) {
	s.m.Passthrough.Add(float64(len(batch)))
	v := clusterVia{cb: s.cl, resp3: st != nil && st.proto == 3, shared: true}
	m, err := s.cl.Current()
	if err != nil {
		for _, cmd := range batch {
			s.clusterReply(c, st, cmd.Args, nil, err)
		}
		return
	}
	calls := make([]backend.ClusterCall, 0, min(len(batch), backend.MuxMaxBatch))
	first := 0 // calls[0]'s place in batch
	flush := func() {
		if len(calls) == 0 {
			return
		}
		s.cl.Run(calls, v.resp3)
		for j, call := range calls {
			s.clusterReply(c, st, batch[first+j].Args, call.Reply, call.Err)
		}
		clear(calls)
		calls = calls[:0]
	}
	for i, cmd := range batch {
		name := strings.ToLower(string(cmd.Args[0]))
		keys, err := s.clusterKeys(name, cmd.Args)
		slot := slotOf(keys)
		if err != nil || slot < 0 || fanOutCommands[name] {
			flush()
			reply, err := s.clusterDo(cmd.Args, v)
			s.clusterReply(c, st, cmd.Args, reply, err)
			continue
		}
		if len(calls) == backend.MuxMaxBatch {
			flush()
		}
		if len(calls) == 0 {
			first = i
		}
		calls = append(calls, backend.ClusterCall{Addr: m.AddrOf(slot), Slot: slot, Args: cmd.Args})
	}
	flush()
	handOver(c)
}

// clusterReply writes the reply of a plain command passed through to the
// cluster backend (err: it failed); in mixed mode, a GET of a lock key
// that the backend answers nil is answered by the quorum.
func (s *Server) clusterReply(c redcon.Conn, st *client, args [][]byte, reply []byte, err error) {
	switch {
	case err != nil:
		s.log.Warn().Err(err).Msg("passthrough command failed")
		c.WriteError("ERR redlock-proxy: passthrough backend failed")
	case s.mixed() && isNilReply(reply) && len(args) == 2 && s.isLockKey(args[1]) && lookup(args[0]) != nil && lookup(args[0]).name == "get":
		s.quorumGet(st, c, args)
	default:
		c.WriteRaw(reply)
	}
}

// clusterValue is backendValue on a cluster backend, in RESP2; shared: on
// the nodes' shared connections (backendShared).
func (s *Server) clusterValue(args [][]byte, shared bool) (any, error) {
	raw, err := s.clusterDo(args, clusterVia{cb: s.cl, shared: shared})
	if err != nil {
		return nil, err
	}
	return wire.ParseResult(raw)
}
