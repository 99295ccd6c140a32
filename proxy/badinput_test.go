package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// dial opens a raw TCP connection to the proxy.
func (e *env) dial() net.Conn {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// readUntilClosed reads until the proxy closes the connection (EOF or a
// reset) and returns what it answered; it fails if the connection is still
// open after 5 s.
func readUntilClosed(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var out bytes.Buffer
	_, err := io.Copy(&out, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection is still open after 5s; it answered %q", out.String())
	}
	return out.String()
}

// assertServing checks that the proxy still answers other clients and that
// nothing was written to the masters.
func (e *env) assertServing(others ...net.Conn) {
	t := e.t
	t.Helper()
	mustEqual(t, "PING from a new client", must(e.do("PING")), any("PONG"))
	for _, c := range others {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 7)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("PING from a connected client: %q, %v", buf, err)
		}
	}
	for i, m := range e.masters {
		if n := userKeys(t, m); n != 0 {
			t.Fatalf("master %d holds %d keys after bad input", i, n)
		}
	}
}

// Each malformed request gets Redis's protocol error, then its connection
// is closed; commands before it in the same write are served; other clients,
// connected before or after, are served; nothing reaches the masters.
func TestMalformedInputClosesOnlyThatClient(t *testing.T) {
	e := newEnv(t, 3, nil)
	watcher := e.dial()
	for _, tc := range []struct{ name, in, want string }{
		{"negative multibulk length", "*-1\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"huge multibulk length", "*99999999999999999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"multibulk length above 1M", "*1048577\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"zero multibulk length", "*0\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"negative bulk length", "*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		// redcon alone panics on this one (index arithmetic overflows),
		// which ends the whole process.
		{"bulk length near 2^63", "*3\r\n$3\r\nSET\r\n$4\r\nlock\r\n$9223372036854775807\r\nabc", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk length of 1 GB (above max_bulk_len)", "*3\r\n$3\r\nSET\r\n$4\r\nlock\r\n$1000000000\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk length not a number", "*1\r\n$4x\r\nPING\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"multibulk length with a leading zero", "*01\r\n$4\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"bulk length with a leading zero", "PING\r\n*1\r\n$04\r\nPING\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
		{"not a bulk", "*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
		{"bulk without its CRLF", "*1\r\n$4\r\nPINGxx", "-ERR Protocol error: invalid bulk length\r\n"},
		{"binary garbage after '*'", "*\x00\xff\xfe\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"binary garbage inline", "\x00\xff\xfe\x01 \"unterminated\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"unterminated inline command", strings.Repeat("A", 64<<10+1), "-ERR Protocol error: too big inline request\r\n"},
		{"good commands before a bad one", "PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n$-1\r\n", "+PONG\r\n+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
		{"acquire before a bad one", "*6\r\n$3\r\nSET\r\n$4\r\nlock\r\n$1\r\nt\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n10000\r\n*1\r\n$-1\r\n", "+OK\r\n-ERR Protocol error: invalid bulk length\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.dial()
			if _, err := c.Write([]byte(tc.in)); err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "answer", readUntilClosed(t, c), tc.want)
			if strings.Contains(tc.in, "NX") {
				// The acquire was served; take the lock away again.
				mustEqual(t, "release", must(e.do("DEL", "lock")), any(int64(1)))
			}
			e.assertServing(watcher)
		})
	}
}

// A declared 1 GB bulk that never arrives costs the proxy the bytes that
// did arrive, not the declared length: redcon does not preallocate it.
// max_bulk_len is raised so that the length is accepted.
func TestGiantDeclaredBulkDoesNotAllocate(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Proxy.MaxBulkLen, c.Proxy.MaxQueryBuffer = 2<<30, 2<<30
	})
	watcher := e.dial()
	before := heapAfterGC()
	c := e.dial()
	sent := 4 << 20
	if _, err := c.Write([]byte("*3\r\n$3\r\nSET\r\n$4\r\nlock\r\n$1000000000\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(bytes.Repeat([]byte("x"), sent)); err != nil {
		t.Fatal(err)
	}
	// The proxy buffers what arrives: give it time to read the 4 MB.
	time.Sleep(500 * time.Millisecond)
	during := heapAfterGC()
	grew := int64(during) - int64(before)
	t.Logf("heap before %d MB, with 4 MB of a declared 1 GB bulk pending %d MB (growth %.1f MB)", before>>20, during>>20, float64(grew)/(1<<20))
	if grew > 64<<20 {
		t.Fatalf("the proxy's heap grew by %d bytes for a declared 1 GB bulk of which %d bytes arrived", grew, sent)
	}
	e.assertServing(watcher)
	_ = c.Close()
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// An argument of exactly max_bulk_len is served; one byte more is refused
// and the client closed.
func TestBulkAboveMaxBulkLenRefused(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Proxy.MaxBulkLen, c.Proxy.MaxQueryBuffer = 1<<20, 4<<20
	})
	arg := strings.Repeat("v", 1<<20)
	mustEqual(t, "ECHO of max_bulk_len bytes", must(e.do("ECHO", arg)), any(arg))

	c := e.dial()
	if _, err := c.Write([]byte("*2\r\n$4\r\nECHO\r\n$1048577\r\n")); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "answer", readUntilClosed(t, c), "-ERR Protocol error: invalid bulk length\r\n")
	e.assertServing()
}

// A command whose arguments together exceed max_query_buffer is refused
// and the client closed, although each argument is within max_bulk_len.
func TestQueryBufferLimit(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Proxy.MaxBulkLen, c.Proxy.MaxQueryBuffer = 1<<20, 2<<20
	})
	c := e.dial()
	k := strings.Repeat("k", 1000000)
	in := "*4\r\n$3\r\nDEL\r\n$1000000\r\n" + k + "\r\n$1000000\r\n" + k + "\r\n$200000\r\n"
	if _, err := c.Write([]byte(in)); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "answer", readUntilClosed(t, c), "-ERR Protocol error: query buffer limit reached (proxy.max_query_buffer)\r\n")
	e.assertServing()
}

// A client that pipelines GETs of a 1 MB value and never reads its replies
// does not make the proxy buffer them (200 MB here): its writes block, it
// is no longer read from, and it is closed after write_timeout.
func TestSlowReaderIsCutOff(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Proxy.LockKeys = []string{"lock:*"}
		c.Proxy.WriteTimeout = proxy.Duration{Duration: time.Second}
	})
	big := strings.Repeat("b", 1<<20)
	mc := e.masters[0].Client() // the passthrough backend
	if err := mc.Set(context.Background(), "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	mc.Close()
	watcher := e.dial()
	before := heapAfterGC()

	c := e.dial()
	if _, err := c.Write(bytes.Repeat([]byte("GET big\r\n"), 200)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the proxy has written what the socket takes
	during := heapAfterGC()
	grew := int64(during) - int64(before)
	t.Logf("heap before %d MB, with 200 unread 1 MB replies due %d MB (growth %.1f MB)", before>>20, during>>20, float64(grew)/(1<<20))
	if grew > 64<<20 {
		t.Fatalf("the proxy's heap grew by %d bytes for a client that does not read", grew)
	}
	// After write_timeout without progress the client is closed.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(must(e.do("INFO", "clients")).(string), "connected_clients:2\r\n") {
		if time.Now().After(deadline) {
			t.Fatalf("the client that does not read is still connected: %s", must(e.do("INFO", "clients")))
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = c.Close()
	e.assertServingKeys(watcher)
}

// assertServingKeys is assertServing for tests that keep keys on the masters.
func (e *env) assertServingKeys(others ...net.Conn) {
	e.t.Helper()
	mustEqual(e.t, "PING from a new client", must(e.do("PING")), any("PONG"))
	for _, c := range others {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			e.t.Fatal(err)
		}
		buf := make([]byte, 7)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "+PONG\r\n" {
			e.t.Fatalf("PING from a connected client: %q, %v", buf, err)
		}
	}
}

// A command sent a byte per TCP segment is served (redcon alone recurses
// once per read and would grow its stack with every byte), and so is a
// pipeline mixing blank lines, inline and RESP commands.
func TestTrickledAndMixedInput(t *testing.T) {
	e := newEnv(t, 3, nil)
	c := e.dial()
	arg := strings.Repeat("t", 20000)
	cmd := []byte("*2\r\n$4\r\nECHO\r\n$20000\r\n" + arg + "\r\n")
	for i := range cmd {
		if _, err := c.Write(cmd[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	want := "$20000\r\n" + arg + "\r\n"
	got := make([]byte, len(want))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("trickled ECHO: %v, %.40q", err, got)
	}

	in := "\r\n\n   \r\n  PING\r\n*1\r\n$4\r\nPING\r\necho \"a b\"\r\n \r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"
	want = "+PONG\r\n+PONG\r\n$3\r\na b\r\n$0\r\n\r\n"
	if _, err := c.Write([]byte(in)); err != nil {
		t.Fatal(err)
	}
	got = make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("mixed pipeline: %v, %q", err, got)
	}
}

// Random bytes, each on a connection of its own, never take the proxy down.
func TestRandomGarbage(t *testing.T) {
	e := newEnv(t, 3, nil)
	watcher := e.dial()
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 150; i++ {
		b := make([]byte, 1+rng.Intn(200))
		rng.Read(b)
		if i%2 == 0 {
			b[0] = '*'
		}
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(b)
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
	}
	e.assertServing(watcher)
}
