package proxy_test

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

func rawConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return c, bufio.NewReader(c)
}

// Clients beyond max_clients are refused with Redis's own error; a place
// freed is taken again.
func TestMaxClients(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.MaxClients = 3 })
	// e.c is not connected yet: three raw clients fill the proxy.
	var conns []net.Conn
	for i := 0; i < 3; i++ {
		c, r := rawConn(t, e.addr)
		c.Write([]byte("PING\r\n"))
		if line, _ := r.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("client %d: %q", i, line)
		}
		conns = append(conns, c)
	}
	c, r := rawConn(t, e.addr)
	line, _ := r.ReadString('\n')
	mustEqual(t, "fourth client", line, "-ERR max number of clients reached\r\n")
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("the refused client was not closed")
	}
	c.Close()
	conns[0].Close()
	eventually(t, "a freed place is taken again", func() bool {
		c, r := rawConn(t, e.addr)
		defer c.Close()
		c.Write([]byte("PING\r\n"))
		line, _ := r.ReadString('\n')
		return line == "+PONG\r\n"
	})
}

// A client idle for longer than idle_timeout is closed; an active one is not.
func TestIdleTimeout(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.IdleTimeout = proxy.Duration{Duration: 300 * time.Millisecond} })
	idle, r := rawConn(t, e.addr)
	idle.Write([]byte("PING\r\n"))
	r.ReadString('\n')
	_, err := r.ReadByte() // blocks until the proxy closes it (or the 5 s deadline)
	if err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("idle client not closed by the proxy: %v", err)
	}
	active, ra := rawConn(t, e.addr)
	for i := 0; i < 6; i++ {
		time.Sleep(100 * time.Millisecond)
		active.Write([]byte("PING\r\n"))
		if line, _ := ra.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("active client closed after %d pings: %q", i, line)
		}
	}
}
