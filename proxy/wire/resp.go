package wire

import (
	"bufio"
	"errors"
	"strconv"

	"github.com/tidwall/redcon"
)

var errBadReply = errors.New("wire: malformed reply from backend")

// ReadReply appends one whole reply, as raw bytes, from r to buf: RESP2,
// or RESP3 on a connection that said HELLO 3.
func ReadReply(r *bufio.Reader, buf []byte) ([]byte, error) {
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
			if buf, err = ReadReply(r, buf); err != nil {
				return buf, err
			}
		}
		if kind == '|' {
			// Attributes come before the reply they describe.
			return ReadReply(r, buf)
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

// AppendRequest appends a client's command as it goes to the backend: its
// own bytes when the parser kept them (Raw: exactly AppendCommand's
// encoding), else its arguments encoded.
func AppendRequest(buf []byte, cmd redcon.Command) []byte {
	if cmd.Raw != nil {
		return append(buf, cmd.Raw...)
	}
	return AppendCommand(buf, cmd.Args)
}

// AppendCommand appends args as a RESP array of bulk strings.
func AppendCommand(buf []byte, args [][]byte) []byte {
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

// Buf collects replies in RESP: the writing half of a redcon.Conn, for a
// session's replies and for each lock operation's in flight. With RESP3,
// the types RESP3 has of its own are written in RESP3 (null, map,
// verbatim string); RESP2 otherwise.
type Buf struct {
	B     []byte // the replies written
	RESP3 bool   // the client speaks RESP3
}

// WriteMap writes the header of a map of pairs entries: a RESP3 map, or in
// RESP2 an array of twice as many elements.
func (r *Buf) WriteMap(pairs int) {
	if r.RESP3 {
		r.B = appendPrefix(r.B, '%', pairs)
		return
	}
	r.B = redcon.AppendArray(r.B, 2*pairs)
}

// WriteVerbatim writes a text reply: a verbatim string ("txt") in RESP3,
// as Redis answers INFO and CLIENT INFO, a bulk string in RESP2.
func (r *Buf) WriteVerbatim(s string) {
	if r.RESP3 {
		r.B = appendPrefix(r.B, '=', len(s)+4)
		r.B = append(append(append(r.B, "txt:"...), s...), '\r', '\n')
		return
	}
	r.B = redcon.AppendBulkString(r.B, s)
}

func appendPrefix(b []byte, c byte, n int) []byte {
	b = append(b, c)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// WriteMap writes the header of a map of pairs entries to c: a RESP3 map
// for a client that speaks RESP3, an array of twice as many elements
// otherwise.
func WriteMap(c redcon.Conn, pairs int) {
	if m, ok := c.(interface{ WriteMap(int) }); ok {
		m.WriteMap(pairs)
		return
	}
	c.WriteArray(2 * pairs)
}

// WriteVerbatim writes a text reply to c (Buf.WriteVerbatim).
func WriteVerbatim(c redcon.Conn, s string) {
	if v, ok := c.(interface{ WriteVerbatim(string) }); ok {
		v.WriteVerbatim(s)
		return
	}
	c.WriteBulkString(s)
}

func (r *Buf) WriteError(msg string)       { r.B = redcon.AppendError(r.B, msg) }
func (r *Buf) WriteString(str string)      { r.B = redcon.AppendString(r.B, str) }
func (r *Buf) WriteBulk(bulk []byte)       { r.B = redcon.AppendBulk(r.B, bulk) }
func (r *Buf) WriteBulkString(bulk string) { r.B = redcon.AppendBulkString(r.B, bulk) }
func (r *Buf) WriteInt(num int)            { r.B = redcon.AppendInt(r.B, int64(num)) }
func (r *Buf) WriteInt64(num int64)        { r.B = redcon.AppendInt(r.B, num) }
func (r *Buf) WriteUint64(num uint64)      { r.B = redcon.AppendUint(r.B, num) }
func (r *Buf) WriteArray(count int)        { r.B = redcon.AppendArray(r.B, count) }
func (r *Buf) WriteNull() {
	if r.RESP3 {
		r.B = append(r.B, '_', '\r', '\n')
		return
	}
	r.B = redcon.AppendNull(r.B)
}
func (r *Buf) WriteRaw(data []byte) { r.B = append(r.B, data...) }
func (r *Buf) WriteAny(v any)       { r.B = redcon.AppendAny(r.B, v) }
