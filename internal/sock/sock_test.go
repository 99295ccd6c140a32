package sock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// pair returns a connected client and server, both as Wrap makes them.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c, s = Wrap(c), Wrap(s)
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

func TestWrap(t *testing.T) {
	c, _ := pair(t)
	if _, ok := c.(*Conn); !ok && runtime.GOOS == "linux" {
		t.Fatalf("Wrap of a TCP connection = %T", c)
	}
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if Wrap(p) != p {
		t.Fatal("Wrap changed a connection that is not TCP")
	}
}

// TestPiecewiseInput: input that comes in pieces, some of them after the
// reader waits, is read whole.
func TestPiecewiseInput(t *testing.T) {
	c, s := pair(t)
	buf := make([]byte, 64)
	for i := 0; i < 200; i++ {
		msg := []byte{byte(i), 'a', 'b'}
		go func() {
			if i%3 == 0 {
				time.Sleep(time.Millisecond)
			}
			_, _ = c.Write(msg[:1])
			if i%2 == 0 {
				runtime.Gosched()
			}
			_, _ = c.Write(msg[1:])
		}()
		var got []byte
		for len(got) < 3 {
			_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := s.Read(buf)
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("round %d: read %q, want %q", i, got, msg)
		}
	}
}

// TestFullReads: input longer than the buffer is read in full reads, the
// next of which must not wait (nothing more comes).
func TestFullReads(t *testing.T) {
	c, s := pair(t)
	want := bytes.Repeat([]byte("0123456789"), 1000)
	if _, err := c.Write(want); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // all of it in the socket
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []byte
	buf := make([]byte, 100) // divides the input: every read is full
	for len(got) < len(want) {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("read other bytes than written")
	}
}

// TestLargeWrite: a write larger than the socket takes waits for the
// reader, and arrives whole. (A reader that waited before it tried, after a
// read that returned less than it asked for, stopped for good here.)
func TestLargeWrite(t *testing.T) {
	c, s := pair(t)
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	var got []byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 10000)
		for len(got) < len(want) {
			n, err := s.Read(buf)
			if err != nil {
				t.Error(err)
				return
			}
			got = append(got, buf[:n]...)
			if len(got)%7 == 0 {
				time.Sleep(time.Microsecond)
			}
		}
	}()
	n, err := c.Write(want)
	if n != len(want) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	wg.Wait()
	if !bytes.Equal(got, want) {
		t.Fatal("read other bytes than written")
	}
}

// TestErrors: the errors are those of a net.TCPConn, wrapped the same way.
func TestErrors(t *testing.T) {
	check := func(t *testing.T, c net.Conn) {
		t.Helper()
		buf := make([]byte, 8)
		// A deadline.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		_, err := c.Read(buf)
		var oe *net.OpError
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &oe) || oe.Op != "read" || oe.Net != "tcp" ||
			oe.Source.String() != c.LocalAddr().String() || oe.Addr.String() != c.RemoteAddr().String() {
			t.Fatalf("read past the deadline: %#v", err)
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("read past the deadline: not a timeout: %v", err)
		}
		_ = c.SetReadDeadline(time.Time{})
		// Zero-length reads and writes.
		if n, err := c.Read(nil); n != 0 || err != nil {
			t.Fatalf("Read(nil) = %d, %v", n, err)
		}
		if n, err := c.Write(nil); n != 0 || err != nil {
			t.Fatalf("Write(nil) = %d, %v", n, err)
		}
		// Closed.
		c.Close()
		_, rerr := c.Read(buf)
		_, werr := c.Write(buf)
		if !errors.Is(rerr, net.ErrClosed) || !errors.Is(werr, net.ErrClosed) {
			t.Fatalf("after Close: read %v, write %v", rerr, werr)
		}
	}
	t.Run("wrapped", func(t *testing.T) {
		c, _ := pair(t)
		check(t, c)
	})
	t.Run("tcp", func(t *testing.T) { // the reference
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		check(t, c)
	})
}

// TestEOFAndReset: the other side's close is io.EOF; its reset, the same
// error text as on a net.TCPConn.
func TestEOFAndReset(t *testing.T) {
	c, s := pair(t)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	buf := make([]byte, 8)
	if n, err := s.Read(buf); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if n, err := s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after the close = %d, %v; want io.EOF", n, err)
	}
	// A reset: the other side closes with unread input.
	c2, s2 := pair(t)
	if _, err := c2.Write([]byte("unread")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	s2.Close()
	time.Sleep(10 * time.Millisecond)
	_, err := c2.Read(buf)
	var oe *net.OpError
	var se *os.SyscallError
	if !errors.As(err, &oe) || oe.Op != "read" || !errors.As(err, &se) || se.Syscall != "read" {
		t.Fatalf("read after a reset: %#v", err)
	}
}

// TestCloseWakesRead: Close ends a Read that waits.
func TestCloseWakesRead(t *testing.T) {
	c, s := pair(t)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := s.Read(buf); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(buf)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the Read")
	}
}
