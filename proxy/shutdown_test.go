package proxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// Close lets a client finish the command it sent (a BLOPOP waiting 1 s on
// the backend gets its reply), ends idle clients at once and accepts no one
// new.
func TestCloseFinishesCommandsInFlight(t *testing.T) {
	own := ownBackend(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = own })
	busy, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	idle, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	idleR := bufio.NewReader(idle)
	idle.Write([]byte("PING\r\n"))
	if l, _ := idleR.ReadString('\n'); l != "+PONG\r\n" {
		t.Fatalf("PING: %q", l)
	}
	busy.Write([]byte("*3\r\n$5\r\nBLPOP\r\n$" + itoa(len(e.key("q"))) + "\r\n" + e.key("q") + "\r\n$1\r\n1\r\n"))
	time.Sleep(200 * time.Millisecond) // BLPOP is waiting on the backend

	closed := make(chan struct{})
	go func() { e.srv.Close(); close(closed) }()

	idle.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := idleR.ReadString('\n'); err == nil {
		t.Fatal("an idle client was answered something during shutdown")
	}
	busy.SetReadDeadline(time.Now().Add(3 * time.Second))
	if l, err := bufio.NewReader(busy).ReadString('\n'); err != nil || l != "*-1\r\n" {
		t.Fatalf("BLPOP in flight at shutdown: %q %v (want its timeout reply)", l, err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the last command finished")
	}
	if c, err := net.DialTimeout("tcp", e.addr, time.Second); err == nil {
		c.Close()
		t.Fatal("a new client was accepted after Close")
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
