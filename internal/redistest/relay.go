package redistest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Relay is a TCP fault relay in front of one server: it can add latency to
// every chunk it forwards (Delay, in nanoseconds, read as each chunk
// arrives), or only to chunks that hold given bytes (DelayOnly), and reset
// every connection through it.
type Relay struct {
	ln     net.Listener
	target string
	Delay  atomic.Int64 // nanoseconds added before each forwarded chunk
	// DelayOnly, when set, limits Delay to the chunks that contain it:
	// a connection's handshake, say, then goes through at once.
	DelayOnly atomic.Pointer[[]byte]
	// ReplDelay, in nanoseconds, is added before each chunk the server
	// sends on a replication link through the relay (a connection whose
	// client sent PSYNC or SYNC: a replica of the server): it holds the
	// replication stream back while the server's clients are served.
	ReplDelay atomic.Int64
	// Chunks counts the reads forwarded towards the server: a client
	// that waits for each reply before it sends on writes (at least) one
	// chunk per request.
	Chunks atomic.Int64
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// NewRelay starts a relay to target on a free loopback port.
func NewRelay(t testing.TB, target string) *Relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go r.serve()
	t.Cleanup(func() { ln.Close(); r.Reset() })
	return r
}

// Addr is the relay's address.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

func (r *Relay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		go r.pipe(c)
	}
}

// SetTarget sends the connections made from now on to target, as a DNS
// name or a managed service's address moves to another server; those
// already made stay (Reset closes them).
func (r *Relay) SetTarget(target string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target = target
}

func (r *Relay) pipe(c net.Conn) {
	r.mu.Lock()
	target := r.target
	r.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	r.track(c, up)
	done := make(chan struct{}, 2)
	var replica atomic.Bool // c is a replica's link
	cp := func(dst, src net.Conn, chunks *atomic.Int64) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if chunks != nil {
					chunks.Add(1)
					if !replica.Load() && (bytes.Contains(buf[:n], []byte("PSYNC")) || bytes.Contains(buf[:n], []byte("SYNC\r\n"))) {
						replica.Store(true)
					}
				}
				if d := r.Delay.Load(); d > 0 && r.delays(buf[:n]) {
					time.Sleep(time.Duration(d))
				}
				if d := r.ReplDelay.Load(); d > 0 && chunks == nil && replica.Load() {
					time.Sleep(time.Duration(d))
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go cp(up, c, &r.Chunks)
	go cp(c, up, nil)
	<-done // either side ended: close both
	c.Close()
	up.Close()
	r.untrack(c, up)
}

func (r *Relay) delays(chunk []byte) bool {
	only := r.DelayOnly.Load()
	return only == nil || bytes.Contains(chunk, *only)
}

func (r *Relay) track(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
}

func (r *Relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
	}
}

// Reset closes every connection through the relay at once.
func (r *Relay) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		c.Close()
	}
}
