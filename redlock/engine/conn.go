package engine

import (
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/peek"
)

// Each worker of a master's batcher owns one connection to it (mconn). A
// batch is encoded into one buffer, written with one write, and its replies
// are read back in order. Compared with a go-redis pipeline this leaves out
// the per-command objects, the pool and its checks, which under load were a
// third of the proxy's time per lock operation.
//
// A new connection authenticates and reads the master's run_id before it
// carries a vote, as the pool's connections do (node.onConnect): a master
// that restarted is seen on the first connection after it.

// script is a Lua script this package runs by EVALSHA, falling back to EVAL
// on NOSCRIPT.
type script struct {
	src, hash string
	readOnly  bool // reads only: a batch of these is not followed by a seq raise
}

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{src: src, hash: hex.EncodeToString(h[:])}
}

// newReadScript is newScript for a script that writes nothing.
func newReadScript(src string) *script {
	s := newScript(src)
	s.readOnly = true
	return s
}

// Hash is the script's SHA1, as SCRIPT LOAD would answer it.
func (s *script) Hash() string { return s.hash }

// replyError is an error reply from a master. It satisfies redis.Error, so
// the rest of the package tells it from a failure to reach the master the
// same way for both kinds of connection.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// errProtocol is a reply this client cannot read: the connection is closed.
var errProtocol = errors.New("redlock: protocol error in a master's reply")

const (
	maxBulk  = 512 << 20 // Redis's own proto-max-bulk-len default
	maxArray = 1 << 24
	keepBuf  = 64 << 10 // a larger write buffer is not kept after its batch
	// bigAt is the most one command or one string of a reply may take on a
	// master's shared pipeline: a longer command goes on a connection of
	// its own, and a longer string in a reply makes the worker hand the
	// pipeline to another (worker.handOff) while it reads on.
	bigAt = 64 << 10
	// bigChunk is how much of a long string is read between two pushes of
	// the read deadline.
	bigChunk = 64 << 10
)

// LargeValue stands, in a master's reply, for a string longer than the
// client keeps (WithMaxValue): its bytes were read as they came and
// dropped. Len and Sum (a keyed hash of the bytes, the same for equal
// strings within one process) tell copies apart.
type LargeValue struct {
	Len int
	Sum uint64
}

// valueSeed keys the hash of LargeValue.Sum: unknown outside the process,
// so that no one can make two different values look alike.
var valueSeed = maphash.MakeSeed()

type mconn struct {
	runID string // the master process it reached
	nc    net.Conn
	br    *bufio.Reader
	buf   []byte    // the batch being written
	used  time.Time // when its last batch was taken (written just after)
	// What is long on this connection (bigAt, or never with the guard
	// GuardBigPayloads off), the longest string of a reply it keeps (the
	// client's WithMaxValue; longer ones come back as LargeValue), and how
	// long a transfer of a long string or command may go without a chunk
	// before it fails (the connect timeout: max(node timeout, 1 s); the
	// commands of other operations are not waiting on it).
	bigAt, keep int
	progress    time.Duration
	deadline    time.Time // the current read deadline
	w           *worker   // the worker reading on it, told of long strings
	digest      bool      // the reply being read keeps no long string: LargeValue
	// scripts sent on this connection by their text: the master has them.
	// A script's first use sends its text (EVAL), never an EVALSHA the
	// master would answer NOSCRIPT: the command sent again with the text
	// would run after the batch's later commands, out of order.
	scripts map[*script]struct{}
	// evictSet: CLIENT NO-EVICT was sent, ahead of the first batch (no
	// round trip of its own on the way to the first vote).
	evictSet bool
}

// appendScript appends a call of s, by its text unless s was sent on m
// by its text before (or eval asks for the text anyway).
func (m *mconn) appendScript(s *script, eval bool, keys []string, args []any) (err error) {
	_, known := m.scripts[s]
	if m.buf, err = appendScript(m.buf, s, eval || !known, keys, args); err == nil && !known {
		if m.scripts == nil {
			m.scripts = make(map[*script]struct{})
		}
		m.scripts[s] = struct{}{}
	}
	return err
}

// idleCheck is how long a connection may sit unused before it is checked
// for a close by the master (peek.Of) ahead of its next batch. Under load
// no batch pays for the check.
const idleCheck = time.Second

// dial connects to the master, authenticates, selects the database and
// reports the master's run_id to the restart guard, all before deadline.
func (n *node) dial(deadline time.Time) (*mconn, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ro := n.ro
	var nc net.Conn
	var err error
	switch {
	case ro.Dialer != nil:
		nc, err = ro.Dialer(ctx, "tcp", n.addr)
	case ro.TLSConfig != nil:
		d := &tls.Dialer{NetDialer: &net.Dialer{KeepAlive: 5 * time.Minute}, Config: ro.TLSConfig}
		nc, err = d.DialContext(ctx, "tcp", n.addr)
	default:
		d := &net.Dialer{KeepAlive: 5 * time.Minute}
		nc, err = d.DialContext(ctx, "tcp", n.addr)
	}
	if err != nil {
		return nil, err
	}
	m := &mconn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10), used: time.Now(),
		bigAt: n.opts.bigAt(), keep: n.opts.keepMax(), progress: n.opts.connectTimeout()}
	if err := m.handshake(n, deadline); err != nil {
		nc.Close()
		return nil, err
	}
	n.opened.Store(true)
	return m, nil
}

func (m *mconn) handshake(n *node, deadline time.Time) error {
	ro := n.ro
	user, pass := ro.Username, ro.Password
	if ro.CredentialsProvider != nil {
		user, pass = ro.CredentialsProvider()
	}
	var hello [][]any
	switch {
	case user != "":
		hello = append(hello, []any{"auth", user, pass})
	case pass != "":
		hello = append(hello, []any{"auth", pass})
	}
	if ro.DB != 0 {
		hello = append(hello, []any{"select", ro.DB})
	}
	if len(hello) > 0 {
		if _, err := m.exchange(deadline, hello...); err != nil {
			return err
		}
	}
	do := func(args ...any) (any, error) {
		vals, err := m.exchange(deadline, args)
		if len(vals) == 0 {
			return nil, err
		}
		return vals[0], err
	}
	st, err := n.inspect(do, false)
	if err != nil {
		return err
	}
	m.runID = st.runID
	if n.observe(st, time.Now()) {
		n.markDoubt(do, st.runID)
	}
	return nil
}

// noEvict keeps the connection from client eviction (maxmemory-clients,
// Redis 7): a lock operation's connection is not dropped for memory.
var noEvict = []any{"client", "no-evict", "on"}

// noEvictCommand is noEvict encoded, sent ahead of a connection's first
// batch.
var noEvictCommand = appendCommandMust(noEvict)

func isReplyError(err error) bool {
	_, ok := err.(replyError)
	return ok
}

// exchange sends cmds and returns their replies, failing on the first error
// reply or I/O error.
func (m *mconn) exchange(deadline time.Time, cmds ...[]any) ([]any, error) {
	m.buf = m.buf[:0]
	for _, args := range cmds {
		var err error
		if m.buf, err = appendCommand(m.buf, args); err != nil {
			return nil, err
		}
	}
	if err := m.flush(deadline); err != nil {
		return nil, err
	}
	vals := make([]any, len(cmds))
	var first error
	for i := range cmds {
		v, err := m.readReply()
		if err != nil && err != redis.Nil && !isReplyError(err) {
			return nil, err
		}
		if err != nil && first == nil && err != redis.Nil {
			first = err
		}
		vals[i] = v
	}
	return vals, first
}

// flush writes the buffered commands. A long write (beyond bigAt) has
// until deadline, or for as long as it makes progress, and its replies as
// long again after it (mconn.progress).
func (m *mconn) flush(deadline time.Time) error {
	m.deadline = deadline
	if err := m.nc.SetDeadline(deadline); err != nil {
		return err
	}
	var err error
	if len(m.buf) <= m.bigAt {
		_, err = m.nc.Write(m.buf)
	} else {
		for b := m.buf; len(b) > 0 && err == nil; {
			k := min(len(b), 64<<10)
			if d := time.Now().Add(m.progress); d.After(deadline) {
				err = m.nc.SetWriteDeadline(d)
			}
			if err == nil {
				_, err = m.nc.Write(b[:k])
			}
			b = b[k:]
		}
		if err == nil {
			err = m.pushReadDeadline()
		}
	}
	if cap(m.buf) > keepBuf {
		m.buf = nil
	} else {
		m.buf = m.buf[:0]
	}
	return err
}

func (m *mconn) close() { m.nc.Close() }

// roundTrip sends the calls of one batch (by EVALSHA, or by EVAL if eval is
// set, for scripts) and puts each one's reply in its res; now is when the
// batch was taken. An I/O or protocol error answers every call not yet
// answered with it and closes the connection; the next batch dials a new
// one.
func (w *worker) roundTrip(calls []*call, eval bool, now, deadline time.Time) {
	if w.alone {
		// Off the shared pipeline nobody waits behind these calls: the
		// connection, the command and the first byte of its reply get as
		// long as a new connection does (a master takes a while to copy
		// a long value out), and the transfer as long as it makes progress.
		if d := time.Now().Add(w.b.n.opts.connectTimeout()); d.After(deadline) {
			deadline = d
		}
	}
	m, deadline, err := w.ready(now, deadline)
	if err != nil {
		for _, c := range calls {
			c.res.SetErr(err)
		}
		return
	}
	m.w = w
	m.buf = m.buf[:0]
	noEvictFirst := !m.evictSet
	if noEvictFirst {
		m.buf = append(m.buf, noEvictCommand...)
		m.evictSet = true
	}
	sent, written := w.appendCalls(m, calls, eval)
	if sent == 0 {
		if noEvictFirst {
			m.buf, m.evictSet = m.buf[:0], false
		}
		return
	}
	t := w.appendTrailer(m, len(written) > 0)
	m.used = now
	if err := m.flush(deadline); err != nil {
		w.fail(calls, err)
		return
	}
	if noEvictFirst {
		// Refused before Redis 7, or by an ACL: nothing lost.
		if _, err := m.readReply(); err != nil && err != redis.Nil && !isReplyError(err) {
			w.fail(calls, err)
			return
		}
	}
	if err := m.readCalls(calls); err != nil {
		w.fail(calls, err)
		return
	}
	w.readTrailer(m, t, calls, written)
}

// ready returns the connection for a batch taken at now: the worker's own,
// or, if it has none or the master closed it while idle, a new one, opened
// by deadline (which connect may push back: the deadline returned is the
// batch's).
func (w *worker) ready(now, deadline time.Time) (*mconn, time.Time, error) {
	if w.conn != nil && now.Sub(w.conn.used) > idleCheck && peek.Of(w.conn.nc).Broken() {
		// Closed by the master while idle: a batch sent on it would fail
		// every vote in it.
		w.conn.close()
		w.conn = nil
	}
	if w.conn == nil {
		m, d, err := w.connect(deadline)
		if err != nil {
			return nil, d, err
		}
		w.conn = m
		deadline = d
	}
	return w.conn, deadline, nil
}

// fail answers every call of the batch sent and not yet answered with err,
// and closes the connection.
func (w *worker) fail(calls []*call, err error) {
	for _, c := range calls {
		if c.sent {
			c.sent = false
			c.res.SetErr(err)
		}
	}
	if w.conn != nil {
		w.conn.close()
		w.conn = nil
	}
}

// appendCalls appends the calls to m's batch and marks them sent; a call
// that cannot be encoded is answered with its error, unsent. It returns
// how many were sent and, among them, the writes (in w.written's storage).
func (w *worker) appendCalls(m *mconn, calls []*call, eval bool) (sent int, written []*call) {
	written = w.written[:0]
	for _, c := range calls {
		mark := len(m.buf)
		var err error
		if c.asking {
			m.buf = append(m.buf, askingCommand...)
		}
		switch {
		case c.raw != nil:
			m.buf = append(m.buf, c.raw...)
		case c.script != nil:
			err = m.appendScript(c.script, eval, c.keys, c.args)
		default:
			m.buf, err = appendCommand(m.buf, c.args)
		}
		if err != nil {
			m.buf = m.buf[:mark]
			c.res.SetErr(err) // not sent: no reply to wait for
			continue
		}
		c.sent = true
		sent++
		if c.writes() {
			written = append(written, c)
		}
	}
	w.written = written[:0]
	return sent, written
}

// trailer is what follows a batch's calls on its pipeline, each read
// after their replies.
type trailer struct {
	seq    bool // the raise of the master's record's seq
	wait   int  // WAIT for this many replicas, or none if 0
	evicts bool // INFO stats
}

// appendTrailer appends the commands that follow a batch's calls; writes
// is whether any of them is a lock write.
func (w *worker) appendTrailer(m *mconn, writes bool) trailer {
	n := w.b.n
	// On a master trusted to keep its data, lock writes are followed by a
	// raise of its record's seq: if that survives a restart, they did.
	t := trailer{seq: writes && n.countsSeq()}
	if t.seq {
		m.buf = append(m.buf, n.books().seq...)
	}
	// With WithWaitReplicas, they are followed by a WAIT, and count only
	// when enough replicas acknowledged them.
	if writes {
		t.wait = n.opts.waitReplicas
	}
	if t.wait > 0 {
		m.buf = appendWait(m.buf, t.wait, n.opts.nodeTimeout)
	}
	// On a master whose policy can evict keys, every batch ends with INFO
	// stats: an eviction before its commands ran guards the master before
	// their replies count (replication.go).
	t.evicts = n.evicts.Load()
	if t.evicts {
		m.buf = append(m.buf, infoStatsCommand...)
	}
	return t
}

// readCalls reads the replies of the calls sent into their res, and
// returns the first I/O or protocol error (the calls from there on are
// left sent, unanswered).
func (m *mconn) readCalls(calls []*call) error {
	for _, c := range calls {
		if !c.sent {
			continue
		}
		if c.asking { // ASKING's own reply
			if _, err := m.readReply(); err != nil && !isReplyError(err) {
				return err
			}
		}
		m.digest = c.digest
		v, err := m.readReply()
		m.digest = false
		if err != nil && err != redis.Nil && !isReplyError(err) {
			return err
		}
		c.sent = false
		if err != nil {
			c.res.SetErr(err)
		} else {
			c.res.SetVal(v)
		}
	}
	return nil
}

// readTrailer reads the replies of t's commands, after the calls': the
// seq the master acknowledged, the replicas that acknowledged the written
// calls (too few answers each with NotReplicatedError), the master's
// evictions.
func (w *worker) readTrailer(m *mconn, t trailer, calls, written []*call) {
	n := w.b.n
	if t.seq {
		v, err := m.readReply()
		if err != nil && err != redis.Nil && !isReplyError(err) {
			w.fail(calls, err)
			return
		}
		if seq, ok := v.(int64); ok {
			n.noteSeq(m.runID, seq)
		}
	}
	if t.wait > 0 {
		v, err := m.readReply()
		acked, _ := v.(int64)
		if err != nil && err != redis.Nil && !isReplyError(err) {
			w.fail(calls, err)
		}
		if err != nil || acked < int64(t.wait) {
			// Applied on the master, perhaps, but not known to be on a
			// replica: no answer, as a master that did not reply gives.
			e := &NotReplicatedError{Acked: acked, Want: t.wait}
			for _, c := range written {
				c.res.SetErr(e)
			}
		}
	}
	if t.evicts {
		v, err := m.readReply()
		if err != nil && err != redis.Nil && !isReplyError(err) {
			w.fail(calls, err)
			return
		}
		if info, ok := v.(string); ok {
			n.evictedNow(m.runID, parseServerInfo(info).repl.evicted, time.Now())
		}
	}
}

// askingCommand precedes a command sent again after an ASK reply.
var askingCommand = appendCommandMust([]any{"asking"})

// infoStatsCommand reads a master's evicted_keys after a batch, encoded
// once.
var infoStatsCommand = appendCommandMust([]any{"info", "stats"})

// NotReplicatedError is a master's answer to a lock write that fewer of
// its replicas acknowledged in time than WithWaitReplicas asks for: the
// write may have taken effect on the master, so it counts as no answer
// (and an acquire's part there is undone), but the master is not failing.
type NotReplicatedError struct {
	Acked int64 // replicas that acknowledged it
	Want  int
}

func (e *NotReplicatedError) Error() string {
	return fmt.Sprintf("redlock: %d of the %d replicas asked for (WithWaitReplicas) acknowledged the write in time", e.Acked, e.Want)
}

// appendWait appends WAIT for replicas, with half the node timeout (at
// least a millisecond) for them to acknowledge: its reply then comes
// before the batch's deadline.
func appendWait(buf []byte, replicas int, nodeTimeout time.Duration) []byte {
	ms := max(nodeTimeout.Milliseconds()/2, 1)
	buf, _ = appendCommand(buf, []any{"wait", replicas, ms})
	return buf
}

// readReply reads one RESP2 reply into the values go-redis gives: string,
// int64, []any (nil and error elements in place), redis.Nil for a nil
// reply and replyError for an error reply.
func (m *mconn) readReply() (any, error) {
	line, err := m.readLine()
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, errProtocol
	}
	switch line[0] {
	case '+':
		return string(line[1:]), nil
	case '-':
		return nil, replyError(line[1:])
	case ':':
		v, ok := parseRESPInt(line[1:])
		if !ok {
			return nil, errProtocol
		}
		return v, nil
	case '$':
		n, ok := parseRESPInt(line[1:])
		switch {
		case !ok || n < -1 || n > maxBulk:
			return nil, errProtocol
		case n == -1:
			return nil, redis.Nil
		}
		return m.readBulk(int(n))
	case '*':
		n, ok := parseRESPInt(line[1:])
		switch {
		case !ok || n < -1 || n > maxArray:
			return nil, errProtocol
		case n == -1:
			return nil, redis.Nil
		}
		vals := make([]any, n)
		for i := range vals {
			v, err := m.readReply()
			switch {
			case err == redis.Nil:
			case isReplyError(err):
				vals[i] = err
			case err != nil:
				return nil, err
			default:
				vals[i] = v
			}
		}
		return vals, nil
	}
	return nil, errProtocol
}

// readLine returns one line without its CRLF. The slice is valid until the
// next read.
func (m *mconn) readLine() ([]byte, error) {
	line, err := m.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A long error line (a script error quoting its source): gather it.
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			line, err = m.br.ReadSlice('\n')
			long = append(long, line...)
			if len(long) > maxBulk {
				return nil, errProtocol
			}
		}
		line = long
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errProtocol
	}
	return line[:len(line)-2], nil
}

// pushReadDeadline gives the reads mconn.progress from now, if that is
// later than their deadline: a transfer that makes progress goes on.
func (m *mconn) pushReadDeadline() error {
	d := time.Now().Add(m.progress)
	if !d.After(m.deadline) {
		return nil
	}
	m.deadline = d
	return m.nc.SetReadDeadline(d)
}

func (m *mconn) readBulk(n int) (any, error) {
	if n > m.bigAt {
		return m.readLong(n)
	}
	if n+2 <= m.br.Size() {
		b, err := m.br.Peek(n + 2)
		if err != nil {
			return nil, err
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return nil, errProtocol
		}
		s := string(b[:n])
		_, _ = m.br.Discard(n + 2)
		return s, nil
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(m.br, b); err != nil {
		return nil, err
	}
	if b[n] != '\r' || b[n+1] != '\n' {
		return nil, errProtocol
	}
	return string(b[:n]), nil
}

// readLong reads a string longer than bigAt. The worker reading it first
// hands the shared pipeline over (worker.handOff): the commands queued
// behind go on at once, on another connection. Each chunk that arrives
// pushes the read deadline on, so that neither this reply nor those behind
// it on the connection fail while bytes keep coming. A string longer than
// keep (or any, for a call that asked for digests only) is not kept: it
// is hashed as it comes and answered as a LargeValue.
func (m *mconn) readLong(n int) (any, error) {
	if m.w != nil {
		m.w.handOff()
	}
	keep := !m.digest && n <= m.keep
	var buf []byte
	var h maphash.Hash
	if keep {
		buf = make([]byte, n)
	} else {
		h.SetSeed(valueSeed)
		scratch := chunks.Get().(*[]byte)
		defer chunks.Put(scratch)
		buf = *scratch
	}
	for got := 0; got < n; {
		if err := m.pushReadDeadline(); err != nil {
			return nil, err
		}
		k := min(n-got, bigChunk)
		b := buf[:k]
		if keep {
			b = buf[got : got+k]
		}
		if _, err := io.ReadFull(m.br, b); err != nil {
			return nil, err
		}
		if !keep {
			_, _ = h.Write(b)
		}
		got += k
	}
	end, err := m.br.Peek(2)
	if err != nil {
		return nil, err
	}
	if end[0] != '\r' || end[1] != '\n' {
		return nil, errProtocol
	}
	_, _ = m.br.Discard(2)
	if !keep {
		return LargeValue{Len: n, Sum: h.Sum64()}, nil
	}
	return unsafe.String(&buf[0], n), nil // buf is not written again
}

// chunks are the buffers that long strings not kept are read through.
var chunks = sync.Pool{New: func() any { b := make([]byte, bigChunk); return &b }}

// sumOf is the LargeValue.Sum of s.
func sumOf(s string) uint64 { return maphash.String(valueSeed, s) }

// parseRESPInt parses a RESP integer without allocating.
func parseRESPInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, true
}

// appendScript appends EVALSHA (or EVAL) of s with keys and args.
func appendScript(buf []byte, s *script, eval bool, keys []string, args []any) ([]byte, error) {
	buf = appendLen(buf, '*', 3+len(keys)+len(args))
	if eval {
		buf = appendBulk(buf, "eval")
		buf = appendBulk(buf, s.src)
	} else {
		buf = appendBulk(buf, "evalsha")
		buf = appendBulk(buf, s.hash)
	}
	buf = appendBulkInt(buf, int64(len(keys)))
	for _, k := range keys {
		buf = appendBulk(buf, k)
	}
	return appendArgs(buf, args)
}

// appendCommand appends one command as a RESP array of bulk strings.
func appendCommand(buf []byte, args []any) ([]byte, error) {
	if len(args) == 0 {
		return buf, errors.New("redlock: empty command")
	}
	buf = appendLen(buf, '*', len(args))
	return appendArgs(buf, args)
}

// appendArgs encodes args the way go-redis does for the types this package
// and its callers pass.
func appendArgs(buf []byte, args []any) ([]byte, error) {
	for _, a := range args {
		switch v := a.(type) {
		case nil:
			buf = appendBulk(buf, "")
		case string:
			buf = appendBulk(buf, v)
		case []byte:
			buf = appendBulkBytes(buf, v)
		case int:
			buf = appendBulkInt(buf, int64(v))
		case int8:
			buf = appendBulkInt(buf, int64(v))
		case int16:
			buf = appendBulkInt(buf, int64(v))
		case int32:
			buf = appendBulkInt(buf, int64(v))
		case int64:
			buf = appendBulkInt(buf, v)
		case uint:
			buf = appendBulkUint(buf, uint64(v))
		case uint8:
			buf = appendBulkUint(buf, uint64(v))
		case uint16:
			buf = appendBulkUint(buf, uint64(v))
		case uint32:
			buf = appendBulkUint(buf, uint64(v))
		case uint64:
			buf = appendBulkUint(buf, v)
		case float32:
			buf = appendBulk(buf, strconv.FormatFloat(float64(v), 'f', -1, 64))
		case float64:
			buf = appendBulk(buf, strconv.FormatFloat(v, 'f', -1, 64))
		case bool:
			if v {
				buf = appendBulkInt(buf, 1)
			} else {
				buf = appendBulkInt(buf, 0)
			}
		case time.Duration:
			buf = appendBulkInt(buf, v.Nanoseconds())
		case encoding.BinaryMarshaler:
			b, err := v.MarshalBinary()
			if err != nil {
				return buf, err
			}
			buf = appendBulkBytes(buf, b)
		default:
			return buf, fmt.Errorf("redis: can't marshal %T (implement encoding.BinaryMarshaler)", v)
		}
	}
	return buf, nil
}

func appendLen(buf []byte, kind byte, n int) []byte {
	buf = append(buf, kind)
	buf = strconv.AppendInt(buf, int64(n), 10)
	return append(buf, '\r', '\n')
}

func appendBulk(buf []byte, s string) []byte {
	buf = appendLen(buf, '$', len(s))
	buf = append(buf, s...)
	return append(buf, '\r', '\n')
}

func appendBulkBytes(buf, b []byte) []byte {
	buf = appendLen(buf, '$', len(b))
	buf = append(buf, b...)
	return append(buf, '\r', '\n')
}

func appendBulkInt(buf []byte, v int64) []byte {
	var num [20]byte
	return appendBulkBytes(buf, strconv.AppendInt(num[:0], v, 10))
}

func appendBulkUint(buf []byte, v uint64) []byte {
	var num [20]byte
	return appendBulkBytes(buf, strconv.AppendUint(num[:0], v, 10))
}
