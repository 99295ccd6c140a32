package proxy

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/redcon"
)

// A client's input buffer grows for reads that fill it, up to
// readBufBatch, keeps its size through the short read of a pipeline's tail,
// and shrinks back to readBufMin once its reads are small, so that a client
// that pipelined once does not keep a big buffer while idle.
func TestInputBufferFollowsTheReads(t *testing.T) {
	var b bufSizer
	n := readBufMin
	for i := 0; i < 10; i++ {
		n = b.next(n, true)
	}
	if n != readBufBatch {
		t.Fatalf("after full reads: %d, want %d", n, readBufBatch)
	}
	for i := 0; i < 10; i++ {
		b.next(n, true)
		if m := b.next(40, false); m != readBufBatch {
			t.Fatalf("a pipeline's tail after a full read: %d, want it kept at %d", m, readBufBatch)
		}
	}
	for i := 0; i < 10*shrinkAfter; i++ {
		n = b.next(40, false)
	}
	if n != readBufMin {
		t.Fatalf("after small reads: %d, want %d", n, readBufMin)
	}
}

// A command that keeps its arguments past its batch still finds them there
// after the client's next read: the session reuses its input buffer only
// after batches of plain passthrough commands (keepInput).
func TestKeptArgumentsSurviveTheNextRead(t *testing.T) {
	// The command is in the table before the server's goroutines start,
	// and leaves it after the server's Close (a cleanup registered
	// before unreachableServer's runs after it) has ended its sessions.
	var mu sync.Mutex
	var kept [][]byte
	commands["test-keep"] = &command{name: "test-keep", h: func(_ *Server, c redcon.Conn, _ *client, args [][]byte) route {
		mu.Lock()
		kept = append(kept, args[1])
		mu.Unlock()
		c.WriteString("OK")
		return replied
	}}
	t.Cleanup(func() { delete(commands, "test-keep") })
	s := unreachableServer(t)
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()

	nc, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	send := func(cmd, want string) {
		t.Helper()
		if _, err := nc.Write([]byte(cmd)); err != nil {
			t.Fatal(err)
		}
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, want) {
			t.Fatalf("reply to %q: %q %v", cmd, line, err)
		}
	}
	x := strings.Repeat("x", 100)
	for i := 0; i < 3; i++ {
		send("*2\r\n$9\r\ntest-keep\r\n$3\r\nabc\r\n", "+OK")
		// Plain passthrough: the backend is unreachable, and its bytes
		// land where "abc" was if the buffer was reused.
		send("*2\r\n$3\r\nGET\r\n$100\r\n"+x+"\r\n", "-ERR redlock-proxy: passthrough backend")
	}
	mu.Lock()
	defer mu.Unlock()
	for i, k := range kept {
		if string(k) != "abc" {
			t.Fatalf("argument kept by command %d is now %q", i+1, k)
		}
	}
}
