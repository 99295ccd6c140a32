package faults

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// A raw RESP connection, for clients that send what no client library
// would: any command, any argument, several in one write, and read
// whatever comes back (RESP2, and the RESP3 types a HELLO 3 brings).

// reply is one RESP reply: kind is its type byte ('+', '-', ':', '$',
// '*', and RESP3's), str its text (a simple or bulk string, an error, a
// number as written), arr its elements; null for a nil.
type reply struct {
	kind byte
	str  string
	arr  []reply
	null bool
}

func (r reply) isErr() bool { return r.kind == '-' || r.kind == '!' }

func (r reply) int() (int64, bool) {
	if r.kind != ':' {
		return 0, false
	}
	n, err := strconv.ParseInt(r.str, 10, 64)
	return n, err == nil
}

// short is a reply as a line of a report.
func (r reply) short() string {
	switch {
	case r.null:
		return "nil"
	case r.kind == '*' || r.kind == '~' || r.kind == '%' || r.kind == '>':
		parts := make([]string, 0, len(r.arr))
		for i, x := range r.arr {
			if i == 4 {
				parts = append(parts, fmt.Sprintf("… %d in all", len(r.arr)))
				break
			}
			parts = append(parts, x.short())
		}
		return "[" + strings.Join(parts, " ") + "]"
	case r.kind == '-' || r.kind == '!':
		return "(error) " + clip(r.str, 90)
	}
	return clip(r.str, 40)
}

// errClass is a short name of an error reply, for the outcome counts.
func (r reply) errClass() string {
	f := strings.Fields(r.str)
	switch {
	case len(f) == 0:
		return "error"
	case len(f) > 1 && f[0] == "ERR" && strings.HasPrefix(f[1], "redlock-proxy"):
		return "refused by the proxy"
	}
	return f[0]
}

func clip(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:n]) + fmt.Sprintf("…(%d bytes)", len(s))
}

// describe is commands as a line of a report.
func describe(cmds [][]string) string {
	parts := make([]string, 0, len(cmds))
	for _, c := range cmds {
		words := make([]string, 0, len(c))
		for _, x := range c {
			if isWordy(x) {
				words = append(words, x)
			} else {
				words = append(words, clip(x, 48))
			}
		}
		parts = append(parts, strings.Join(words, " "))
	}
	return strings.Join(parts, "; ")
}

func isWordy(s string) bool {
	if s == "" || len(s) > 48 {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c > '~' || c == '"' {
			return false
		}
	}
	return true
}

// appendCmd encodes one command as a RESP array of bulk strings.
func appendCmd(b []byte, args []string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// rawConn is one connection of a raw client.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(addr string, timeout time.Duration) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

func (rc *rawConn) Close() error { return rc.c.Close() }

// do sends cmds in one write and reads a reply to each, all within
// timeout; it returns the replies read before an error.
func (rc *rawConn) do(cmds [][]string, timeout time.Duration) ([]reply, error) {
	_ = rc.c.SetDeadline(time.Now().Add(timeout))
	var b []byte
	for _, c := range cmds {
		b = appendCmd(b, c)
	}
	if _, err := rc.c.Write(b); err != nil {
		return nil, err
	}
	out := make([]reply, 0, len(cmds))
	for range cmds {
		r, err := readReply(rc.r)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// sendRaw dials addr, sends cmds and reads their replies.
func sendRaw(addr string, cmds [][]string, timeout time.Duration) ([]reply, error) {
	rc, err := dialRaw(addr, min(timeout, time.Second))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return rc.do(cmds, timeout)
}

var errProtocol = errors.New("unexpected reply")

// readReply reads one reply.
func readReply(r *bufio.Reader) (reply, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return reply{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return reply{}, errProtocol
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+', '-', ':', ',', '#', '(':
		return reply{kind: kind, str: body}, nil
	case '_':
		return reply{kind: kind, null: true}, nil
	case '$', '!', '=':
		n, err := strconv.Atoi(body)
		if err != nil {
			return reply{}, errProtocol
		}
		if n < 0 {
			return reply{kind: kind, null: true}, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return reply{}, err
		}
		return reply{kind: kind, str: string(buf[:n])}, nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil {
			return reply{}, errProtocol
		}
		if n < 0 {
			return reply{kind: kind, null: true}, nil
		}
		if kind == '%' || kind == '|' {
			n *= 2
		}
		out := reply{kind: kind, arr: make([]reply, 0, min(n, 1024))}
		for range n {
			x, err := readReply(r)
			if err != nil {
				return reply{}, err
			}
			out.arr = append(out.arr, x)
		}
		if kind == '|' { // an attribute precedes the reply it is about
			return readReply(r)
		}
		return out, nil
	}
	return reply{}, errProtocol
}
