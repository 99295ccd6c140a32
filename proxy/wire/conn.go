package wire

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/peek"
	"github.com/redlock-proxy/redlock-proxy/internal/sock"
)

// Client input and output limits.
//
// A session (session.go) reads a client's input into a buffer that grows
// for a big command and parses it with ParseCommands. Between the two sits
// Conn, whose Read runs every byte through inputFramer, a small state
// machine that follows RESP framing (without building the command) and
// checks it before the parser sees it:
//
//   - a bulk length above proxy.max_bulk_len, or one that cannot be a
//     number (a leading zero included, as "$03"), answers "-ERR Protocol
//     error: invalid bulk length" and closes the client, as Redis does; a
//     multibulk count above maxArgs, or that is not a positive number
//     written without a leading zero, answers "invalid multibulk length";
//   - a command whose bytes would exceed proxy.max_query_buffer, or an inline
//     command longer than Redis's 64 KB inline limit, closes the client with
//     an error, so a client's pending input never exceeds those bounds, and
//     memory follows the bytes received, never a declared length;
//   - Read returns only when a whole command has arrived or the caller's
//     buffer is full, so the session's buffer doubles at most
//     logarithmically often for one command;
//   - blank inline lines and the leading spaces of inline lines are not
//     passed on.
//
// (The framer was first written in front of redcon's own reader, which
// overflowed its stack on input trickled a byte per read and panicked on a
// declared length near 2^63; the tests still check the framer and the
// parser against that reader's reading of valid input.)
//
// Commands completed before a malformed one are served first; the error is
// answered when the session asks for more input, then the connection is
// closed. Other clients are not affected.
//
// Output: the replies to a whole batch would be collected in memory before
// they are written, so a small batch of commands with large replies
// (GET of a big value, many times over) could make that buffer huge. The
// server therefore flushes after every command (Server.dispatch); Conn
// holds small replies back until the batch ends, so pipelining still costs
// one write per batch. A client that stops reading blocks its own goroutine
// in that write, which then stops reading its input (TCP pushes back on the
// client); the write fails, and the client is closed, when it makes no
// progress for proxy.write_timeout. A client's unsent output is thus at most
// one reply plus outHoldMax.

// Limits that are not settings.
const (
	// maxArgs bounds a command's multibulk count. Redis accepts up to
	// 2^31-1, but redcon's reader loops over the declared count on every
	// read of an unfinished command.
	maxArgs = 1 << 20
	// maxInline is Redis's PROTO_INLINE_MAX_SIZE.
	maxInline = 64 << 10
	// maxHeaderDigits bounds the digits of a count or length line.
	maxHeaderDigits = 20
	// outHoldMax is the most output held back until the end of a batch.
	outHoldMax = 64 << 10
	// writeChunk is the most written under one write deadline.
	writeChunk = 64 << 10
)

// ProtoError is a malformed-input error; its text is Redis's.
type ProtoError struct{ msg string }

func (e *ProtoError) Error() string { return "Protocol error: " + e.msg }

var (
	errMultibulkLen = &ProtoError{"invalid multibulk length"}
	errBulkLen      = &ProtoError{"invalid bulk length"}
	errInlineSize   = &ProtoError{"too big inline request"}
	errQueryBuffer  = &ProtoError{"query buffer limit reached (proxy.max_query_buffer)"}
)

func errExpectedDollar(b byte) error {
	s := string(rune(b))
	if b < ' ' || b > '~' {
		s = fmt.Sprintf("\\x%02x", b)
	}
	return &ProtoError{"expected '$', got '" + s + "'"}
}

// Limits configures an inputFramer.
type Limits struct {
	maxBulk, maxQuery, maxArgs, maxInline int64
}

// NewLimits are the limits of a client's input: the longest argument
// (Redis's proto-max-bulk-len) and the most bytes of one unfinished command
// (client-query-buffer-limit).
func NewLimits(maxBulk, maxQuery int64) Limits {
	return Limits{maxBulk: maxBulk, maxQuery: maxQuery, maxArgs: maxArgs, maxInline: maxInline}
}

// framer states.
const (
	fStart    = iota // at the start of a command
	fLead            // leading spaces of an inline line dropped
	fLeadCR          // a '\r' held back (a blank line if '\n' follows)
	fInline          // inside an inline command
	fCount           // in the "*<count>\r\n" line
	fBulkHead        // expecting '$'
	fBulkLen         // in the "$<length>\r\n" line
	fBody            // inside a bulk's bytes
	fBodyCR          // expecting the '\r' after a bulk
	fBodyLF          // expecting the '\n' after a bulk
)

// inputFramer follows the framing of one client's input; see the comment at
// the top of this file.
type inputFramer struct {
	lim     Limits
	state   int
	num     int64 // the number of the count or length line
	digits  int   // its digits so far
	cr      bool  // the line's '\r' has been seen
	args    int64 // bulks left in the command
	body    int64 // bytes left in the bulk
	pending int64 // bytes of the unfinished command
}

// holding reports whether a dropped byte may still have to be passed on.
func (f *inputFramer) holding() bool { return f.state == fLead || f.state == fLeadCR }

// scan checks the bytes b[i:end] and moves those to pass on down to b[w:].
// The caller guarantees w < i while holding(), so a held byte fits. It
// returns the new w, the w just after the last command completed (-1 if
// none), and the error that stops the input.
func (f *inputFramer) scan(b []byte, w, i, end int) (int, int, error) {
	cut := -1
	put := func(c byte) {
		b[w] = c
		w++
	}
	done := func() {
		f.state, f.pending = fStart, 0
		cut = w
	}
	for i < end {
		if f.state == fStart && b[i] == '*' {
			// A whole well-formed command is passed on in one step.
			if k := f.whole(b, i, end); k > 0 {
				w, i = moveDown(b, w, i, k), k
				done()
				continue
			}
		}
		if f.state == fBody {
			w, i = f.passBody(b, w, i, end)
			continue
		}
		c := b[i]
		i++
		f.pending++
		switch f.state {
		case fStart, fLead, fLeadCR:
			w = f.lineStart(b, w, c)
		case fInline:
			put(c)
			if c == '\n' {
				done()
			} else if f.pending > f.lim.maxInline {
				return w, cut, errInlineSize
			}
		case fCount, fBulkLen:
			bad := errMultibulkLen
			if f.state == fBulkLen {
				bad = errBulkLen
			}
			switch {
			case f.cr:
				if c != '\n' || f.digits == 0 {
					return w, cut, bad
				}
				put(c)
				f.cr = false
				if err := f.headerEnd(bad); err != nil {
					return w, cut, err
				}
			case c == '\r':
				put(c)
				f.cr = true
			case c >= '0' && c <= '9' && f.digits < maxHeaderDigits:
				if f.digits == 1 && f.num == 0 {
					return w, cut, bad // a leading zero, which Redis refuses
				}
				put(c)
				f.num = f.num*10 + int64(c-'0')
				f.digits++
				if f.num > f.lim.maxBulk && f.num > f.lim.maxArgs {
					return w, cut, bad
				}
			default:
				return w, cut, bad
			}
		case fBulkHead:
			if c != '$' {
				return w, cut, errExpectedDollar(c)
			}
			put(c)
			f.state, f.num, f.digits, f.cr = fBulkLen, 0, 0, false
		case fBodyCR:
			if c != '\r' {
				return w, cut, errBulkLen
			}
			put(c)
			f.state = fBodyLF
		case fBodyLF:
			if c != '\n' {
				return w, cut, errBulkLen
			}
			put(c)
			f.args--
			if f.args == 0 {
				done()
			} else {
				f.state = fBulkHead
			}
		}
		if f.pending > f.lim.maxQuery {
			return w, cut, errQueryBuffer
		}
	}
	return w, cut, nil
}

// moveDown moves b[i:k] down to b[w:] (w <= i) and returns the w after it.
func moveDown(b []byte, w, i, k int) int {
	if w != i {
		copy(b[w:], b[i:k])
	}
	return w + k - i
}

// passBody passes on what of the current bulk's bytes is in b[i:end]
// and returns the new w and i.
func (f *inputFramer) passBody(b []byte, w, i, end int) (int, int) {
	k := end - i
	if int64(k) > f.body {
		k = int(f.body)
	}
	w = moveDown(b, w, i, i+k)
	f.body, f.pending = f.body-int64(k), f.pending+int64(k)
	if f.body == 0 {
		f.state = fBodyCR
	}
	return w, i + k
}

// lineStart takes the byte c at the start of a command, after the leading
// spaces of an inline one or after a '\r' held back, and returns the new w.
func (f *inputFramer) lineStart(b []byte, w int, c byte) int {
	switch {
	case c == '\n':
		f.state, f.pending = fStart, 0 // a blank line
		return w
	case f.state == fLeadCR:
		b[w] = '\r' // the '\r' was part of the command
		w++
	case c == '*' && f.state == fStart:
		b[w] = c
		f.state, f.num, f.digits, f.cr = fCount, 0, 0, false
		return w + 1
	case c == ' ':
		f.state = fLead
		return w
	case c == '\r':
		f.state = fLeadCR
		return w
	case c == '*':
		b[w] = ' ' // " *…" is inline; "*…" would not be
		w++
	}
	b[w] = c
	f.state = fInline
	return w + 1
}

// headerEnd checks the number of a count or length line that just ended
// and moves on to the bulks or the bulk's bytes; bad is the line's error.
func (f *inputFramer) headerEnd(bad error) error {
	if f.state == fCount {
		if f.num == 0 || f.num > f.lim.maxArgs {
			return bad
		}
		f.args, f.state = f.num, fBulkHead
		return nil
	}
	if f.num > f.lim.maxBulk {
		return bad
	}
	if f.pending+f.num+2 > f.lim.maxQuery {
		return errQueryBuffer
	}
	f.body, f.state = f.num, fBody
	if f.num == 0 {
		f.state = fBodyCR
	}
	return nil
}

// whole returns the end of the multibulk command that starts at b[i] when
// all of it is in b[:end], well formed and within the limits; 0 otherwise,
// and the byte-by-byte path reads it (and finds its error, if any).
func (f *inputFramer) whole(b []byte, i, end int) int {
	count, j, ok := headerNumber(b, i+1, end)
	if !ok || count == 0 || count > f.lim.maxArgs {
		return 0
	}
	for ; count > 0; count-- {
		if j >= end || b[j] != '$' {
			return 0
		}
		var size int64
		if size, j, ok = headerNumber(b, j+1, end); !ok || size > f.lim.maxBulk || int64(end-j) < size+2 {
			return 0
		}
		j += int(size)
		if b[j] != '\r' || b[j+1] != '\n' || int64(j+2-i) > f.lim.maxQuery {
			return 0
		}
		j += 2
	}
	return j
}

// headerNumber reads the digits from b[j] to a "\r\n" within b[:end]: the
// number and where the next line starts. Up to 18 digits, so that it cannot
// overflow; a longer number, or one with a leading zero, is left to the
// byte-by-byte path.
func headerNumber(b []byte, j, end int) (int64, int, bool) {
	var v int64
	k := j
	for ; k < end && k-j < 18 && b[k] >= '0' && b[k] <= '9'; k++ {
		v = v*10 + int64(b[k]-'0')
	}
	if k == j || k+1 >= end || b[k] != '\r' || b[k+1] != '\n' || (b[j] == '0' && k-j > 1) {
		return 0, 0, false
	}
	return v, k + 2, true
}

// Listener wraps every accepted connection in a Conn.
type Listener struct {
	net.Listener
	Limits       Limits
	WriteTimeout *atomic.Int64 // ns; a reload may change it
}

func (l *Listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return NewConn(nc, l.Limits, l.WriteTimeout), nil
}

// Conn is a client connection as its session sees it: input checked
// by an inputFramer, output written with a progress deadline. The session
// uses it from the client's goroutine only (Close and SetReadDeadline
// excepted, which net.Conn allows).
type Conn struct {
	net.Conn
	f            inputFramer
	writeTimeout *atomic.Int64 // ns
	rerr         error         // the error the next Read returns
	told         bool          // a protocol error was answered
	hold         bool          // Write may keep small output back (mid-batch)
	out          []byte        // output kept back
	werr         error         // a write failed: the client is gone
	wdl          LazyDeadline  // the write deadline
	closed       atomic.Bool
}

// NewConn wraps nc, whose reads and writes, on TCP, are package sock's.
// writeTimeout, in ns, may change while the connection is open (a
// reload); nil: no write deadline.
func NewConn(nc net.Conn, lim Limits, writeTimeout *atomic.Int64) *Conn {
	if writeTimeout == nil {
		writeTimeout = new(atomic.Int64)
	}
	return &Conn{Conn: sock.Wrap(nc), f: inputFramer{lim: lim}, writeTimeout: writeTimeout}
}

// Hold lets Write keep small output back (on) until it is set off, so that
// the replies to a batch of commands go out in one write.
func (c *Conn) Hold(on bool) { c.hold = on }

// Failed reports whether the input failed: the next Read answers the error
// (after the commands read before it).
func (c *Conn) Failed() bool { return c.rerr != nil }

// Read returns checked input once it holds a whole command or fills p.
func (c *Conn) Read(p []byte) (int, error) {
	if c.rerr != nil {
		return 0, c.fail(c.rerr)
	}
	if len(p) < 2 {
		return 0, io.ErrShortBuffer
	}
	total := 0
	for {
		start := total
		if c.f.holding() {
			start++ // room for a held byte
		}
		if start >= len(p) {
			return total, nil
		}
		n, err := c.Conn.Read(p[start:])
		w, cut, ferr := c.f.scan(p, total, start, start+n)
		if ferr != nil {
			// Pass on the commands completed before the error; the error
			// itself is answered at the next Read, after their replies.
			c.rerr = ferr
			if cut > 0 {
				return cut, nil
			}
			return 0, c.fail(ferr)
		}
		total = w
		if err != nil {
			if total > 0 {
				c.rerr = err
				return total, nil
			}
			return 0, err
		}
		if cut >= 0 {
			return total, nil
		}
	}
}

// fail answers a protocol error once, as Redis does, and returns err.
func (c *Conn) fail(err error) error {
	if pe, ok := err.(*ProtoError); ok && !c.told {
		c.told = true
		_ = c.send([]byte("-ERR " + pe.Error() + "\r\n"))
	}
	return err
}

// Write sends b, or keeps it back while hold is set and little is kept.
func (c *Conn) Write(b []byte) (int, error) {
	if c.werr != nil {
		return 0, c.werr
	}
	if c.hold && len(c.out)+len(b) <= outHoldMax {
		c.out = append(c.out, b...)
		return len(b), nil
	}
	if len(c.out) > 0 {
		if len(c.out)+len(b) <= writeChunk {
			c.out, b = append(c.out, b...), nil
		}
		err := c.send(c.out)
		if c.out = c.out[:0]; cap(c.out) > 4<<10 {
			c.out = nil
		}
		if err != nil {
			c.werr = err
			return 0, err
		}
	}
	if err := c.send(b); err != nil {
		c.werr = err
		return 0, err
	}
	return len(b), nil
}

// send writes b in chunks, each under its own deadline: a slow reader that
// keeps reading is served, one that stops is cut off.
func (c *Conn) send(b []byte) error {
	for len(b) > 0 {
		k := min(len(b), writeChunk)
		c.wdl.Arm(c.Conn.SetWriteDeadline, time.Duration(c.writeTimeout.Load()))
		n, err := c.Conn.Write(b[:k])
		b = b[n:]
		if err != nil {
			return err
		}
	}
	return nil
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

// Gone reports whether the connection was closed or a write to it failed:
// the rest of the client's pipeline is not to be run.
func (c *Conn) Gone() bool { return c.werr != nil || c.closed.Load() }

// PeerClosed reports whether the client has closed its side of the
// connection: a read would return end of file now. It looks without
// taking anything and without waiting. Input the client has already sent
// counts as alive; a TLS client is not known without reading.
func (c *Conn) PeerClosed() bool {
	if _, ok := c.Conn.(*tls.Conn); ok {
		return false
	}
	return peek.Of(c.Conn) == peek.EOF
}
