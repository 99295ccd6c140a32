package scripteq

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// A RESP2 connection that keeps what go-redis does not: the type of each
// reply (a status "OK" is not a bulk "OK"), so that replies compare exactly.

type conn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
}

func dial(addr string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{addr: addr, c: c, r: bufio.NewReaderSize(c, 1<<16)}, nil
}

func (c *conn) Close() { _ = c.c.Close() }

// reply is one RESP2 reply: t is '+', '-', ':', '$' or '*', or 'n' for a
// nil bulk string and 'N' for a nil array.
type reply struct {
	t byte
	s string
	n int64
	a []reply
}

func (r reply) isErr() bool { return r.t == '-' }

func (r reply) String() string {
	switch r.t {
	case '+':
		return "+" + r.s
	case '-':
		return "-" + r.s
	case ':':
		return ":" + strconv.FormatInt(r.n, 10)
	case '$':
		return strconv.Quote(clip(r.s))
	case 'n':
		return "(nil)"
	case 'N':
		return "(nil array)"
	}
	parts := make([]string, len(r.a))
	for i, x := range r.a {
		parts[i] = x.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// clip shortens a long string for a report.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:48], len(s))
}

// do sends one command and reads its reply.
func (c *conn) do(args ...string) (reply, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_ = c.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.c, b.String()); err != nil {
		return reply{}, err
	}
	return c.read()
}

// must is do for the test's own commands, which cannot fail.
func (c *conn) must(args ...string) reply {
	r, err := c.do(args...)
	if err != nil {
		panic(fmt.Sprintf("%s: %v: %v", c.addr, args, err))
	}
	if r.isErr() {
		panic(fmt.Sprintf("%s: %v: %s", c.addr, args, r.s))
	}
	return r
}

func (c *conn) read() (reply, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return reply{}, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return reply{}, fmt.Errorf("bad reply line %q", line)
	}
	t, body := line[0], line[1:len(line)-2]
	switch t {
	case '+', '-':
		return reply{t: t, s: body}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		return reply{t: t, n: n}, err
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return reply{}, err
		}
		if n < 0 {
			return reply{t: 'n'}, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return reply{}, err
		}
		return reply{t: t, s: string(buf[:n])}, nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return reply{}, err
		}
		if n < 0 {
			return reply{t: 'N'}, nil
		}
		out := reply{t: t, a: make([]reply, n)}
		for i := range out.a {
			if out.a[i], err = c.read(); err != nil {
				return reply{}, err
			}
		}
		return out, nil
	}
	return reply{}, fmt.Errorf("bad reply type %q", t)
}
