package proxy

import (
	"bufio"
	"errors"
	"strconv"

	"github.com/tidwall/redcon"
)

var errBadReply = errors.New("proxy: malformed reply from backend")

// readReply appends one whole RESP2 reply, as raw bytes, from r to buf.
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
	case '+', '-', ':':
		return buf, nil
	case '$':
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
	case '*':
		n, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil || n < -1 {
			return buf, errBadReply
		}
		for i := 0; i < n; i++ {
			if buf, err = readReply(r, buf); err != nil {
				return buf, err
			}
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
// a session's replies and for each lock operation's in flight.
type respBuf struct{ b []byte }

func (r *respBuf) WriteError(msg string)       { r.b = redcon.AppendError(r.b, msg) }
func (r *respBuf) WriteString(str string)      { r.b = redcon.AppendString(r.b, str) }
func (r *respBuf) WriteBulk(bulk []byte)       { r.b = redcon.AppendBulk(r.b, bulk) }
func (r *respBuf) WriteBulkString(bulk string) { r.b = redcon.AppendBulkString(r.b, bulk) }
func (r *respBuf) WriteInt(num int)            { r.b = redcon.AppendInt(r.b, int64(num)) }
func (r *respBuf) WriteInt64(num int64)        { r.b = redcon.AppendInt(r.b, num) }
func (r *respBuf) WriteUint64(num uint64)      { r.b = redcon.AppendUint(r.b, num) }
func (r *respBuf) WriteArray(count int)        { r.b = redcon.AppendArray(r.b, count) }
func (r *respBuf) WriteNull()                  { r.b = redcon.AppendNull(r.b) }
func (r *respBuf) WriteRaw(data []byte)        { r.b = append(r.b, data...) }
func (r *respBuf) WriteAny(v any)              { r.b = redcon.AppendAny(r.b, v) }
