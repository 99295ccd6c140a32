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
