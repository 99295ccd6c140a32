package faults

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// relay is a TCP fault relay in front of one master: it can add latency to
// every chunk it forwards and reset every connection through it.
type relay struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds added before each forwarded chunk
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

func newRelay(t *testing.T, target string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go r.serve()
	t.Cleanup(func() { ln.Close(); r.reset() })
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		go r.pipe(c)
	}
}

func (r *relay) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", r.target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	r.track(c, up)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if d := r.delay.Load(); d > 0 {
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
	go cp(up, c)
	go cp(c, up)
	<-done // either side ended: close both
	c.Close()
	up.Close()
	r.untrack(c, up)
}

func (r *relay) track(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
}

func (r *relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
	}
}

// reset closes every connection through the relay at once.
func (r *relay) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		c.Close()
	}
}
