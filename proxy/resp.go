package proxy

import (
	"bufio"
	"errors"
	"strconv"

	"github.com/tidwall/redcon"
)

var errBadReply = errors.New("proxy: malformed reply from backend")

// readReply appends one whole reply, as raw bytes, from r to buf: RESP2,
// or RESP3 on a connection that said HELLO 3.
func readReply(r *bufio.Reader, buf []byte) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return buf, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return buf, errBadReply
	}
	buf = append(buf, line...)
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return buf, nil
	case '$', '=', '!':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil || n < -1 {
			return buf, errBadReply
		}
		if n == -1 {
			return buf, nil
		}
		start := len(buf)
		buf = append(buf, make([]byte, n+2)...)
		if _, err := readFull(r, buf[start:]); err != nil {
			return buf, err
		}
		return buf, nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil || n < -1 || n == -1 && line[0] != '*' {
			return buf, errBadReply
		}
		kind := line[0]
		if kind == '%' || kind == '|' {
			n *= 2 // a key and a value each
		}
		for i := 0; i < n; i++ {
			if buf, err = readReply(r, buf); err != nil {
				return buf, err
			}
		}
		if kind == '|' {
			// Attributes come before the reply they describe.
			return readReply(r, buf)
		}
		return buf, nil
	}
	return buf, errBadReply
}

func readFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// appendRequest appends a client's command as it goes to the backend: its
// own bytes when the parser kept them (Raw: exactly appendCommand's
// encoding), else its arguments encoded.
func appendRequest(buf []byte, cmd redcon.Command) []byte {
	if cmd.Raw != nil {
		return append(buf, cmd.Raw...)
	}
	return appendCommand(buf, cmd.Args)
}

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(buf []byte, args [][]byte) []byte {
	buf = append(buf, '*')
	buf = strconv.AppendInt(buf, int64(len(args)), 10)
	buf = append(buf, '\r', '\n')
	for _, a := range args {
		buf = append(buf, '$')
		buf = strconv.AppendInt(buf, int64(len(a)), 10)
		buf = append(buf, '\r', '\n')
		buf = append(buf, a...)
		buf = append(buf, '\r', '\n')
	}
	return buf
}

// respBuf collects replies in RESP: the writing half of a redcon.Conn, for
// a session's replies and for each lock operation's in flight. With resp3,
// the types RESP3 has of its own are written in RESP3 (null, map,
// verbatim string); RESP2 otherwise.
type respBuf struct {
	b     []byte
	resp3 bool
}

func (r *respBuf) WriteMap(pairs int) {
	if r.resp3 {
		r.b = appendPrefix(r.b, '%', pairs)
		return
	}
	r.b = redcon.AppendArray(r.b, 2*pairs)
}

// WriteVerbatim writes a text reply: a verbatim string ("txt") in RESP3,
// as Redis answers INFO and CLIENT INFO, a bulk string in RESP2.
func (r *respBuf) WriteVerbatim(s string) {
	if r.resp3 {
		r.b = appendPrefix(r.b, '=', len(s)+4)
		r.b = append(append(append(r.b, "txt:"...), s...), '\r', '\n')
		return
	}
	r.b = redcon.AppendBulkString(r.b, s)
}

func appendPrefix(b []byte, c byte, n int) []byte {
	b = append(b, c)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// writeMap writes the header of a map of pairs entries to c: a RESP3 map
// for a client that speaks RESP3, an array of twice as many elements
// otherwise.
func writeMap(c redcon.Conn, pairs int) {
	if m, ok := c.(interface{ WriteMap(int) }); ok {
		m.WriteMap(pairs)
		return
	}
	c.WriteArray(2 * pairs)
}

// writeVerbatim writes a text reply to c (respBuf.WriteVerbatim).
func writeVerbatim(c redcon.Conn, s string) {
	if v, ok := c.(interface{ WriteVerbatim(string) }); ok {
		v.WriteVerbatim(s)
		return
	}
	c.WriteBulkString(s)
}

func (r *respBuf) WriteError(msg string)       { r.b = redcon.AppendError(r.b, msg) }
func (r *respBuf) WriteString(str string)      { r.b = redcon.AppendString(r.b, str) }
func (r *respBuf) WriteBulk(bulk []byte)       { r.b = redcon.AppendBulk(r.b, bulk) }
func (r *respBuf) WriteBulkString(bulk string) { r.b = redcon.AppendBulkString(r.b, bulk) }
func (r *respBuf) WriteInt(num int)            { r.b = redcon.AppendInt(r.b, int64(num)) }
func (r *respBuf) WriteInt64(num int64)        { r.b = redcon.AppendInt(r.b, num) }
func (r *respBuf) WriteUint64(num uint64)      { r.b = redcon.AppendUint(r.b, num) }
func (r *respBuf) WriteArray(count int)        { r.b = redcon.AppendArray(r.b, count) }
func (r *respBuf) WriteNull() {
	if r.resp3 {
		r.b = append(r.b, '_', '\r', '\n')
		return
	}
	r.b = redcon.AppendNull(r.b)
}
func (r *respBuf) WriteRaw(data []byte) { r.b = append(r.b, data...) }
func (r *respBuf) WriteAny(v any)       { r.b = redcon.AppendAny(r.b, v) }
