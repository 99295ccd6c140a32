package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
)

// lockPairAllocs counts the allocations of the whole test process (the
// proxy, and the go-redis clients to the masters inside it) per SET NX PX +
// unlock script pair, sent by a raw client that allocates nothing, depth
// pairs per write: 1 is a client that waits for each reply, more a
// pipelining one whose operations run concurrently.
func lockPairAllocs(t *testing.T, e *env, depth int) float64 {
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var batch, want bytes.Buffer
	for i := 0; i < depth; i++ {
		k := e.key(fmt.Sprintf("allocs:%d:%d", depth, i))
		fmt.Fprintf(&batch, "*6\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$3\r\ntok\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n10000\r\n", len(k), k)
		fmt.Fprintf(&batch, "*5\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n1\r\n$%d\r\n%s\r\n$3\r\ntok\r\n",
			len(unlockSpellings[0]), unlockSpellings[0], len(k), k)
		want.WriteString("+OK\r\n:1\r\n")
	}
	got := make([]byte, want.Len())
	round := func() {
		if _, err := nc.Write(batch.Bytes()); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(nc, got); err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("replies %q %v", got, err)
		}
	}
	for i := 0; i < 100; i++ { // warm up: connections, pools, the script cache
		round()
	}
	rounds := 4000 / depth
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 0; i < rounds; i++ {
		round()
	}
	runtime.ReadMemStats(&m1)
	return float64(m1.Mallocs-m0.Mallocs) / float64(rounds*depth)
}

// Lock operations allocate no more when they run concurrently than they did
// when a connection's commands ran one after another: 50.8 allocations per
// lock+unlock pair with a pair per write and 47.2 with 16 pairs a write,
// measured with this test before operations ran concurrently (the test
// process's other activity, health probes among them, adds a little).
func TestLockPairAllocations(t *testing.T) {
	e := newEnv(t, 3, nil)
	for _, c := range []struct {
		depth int
		most  float64
	}{{1, 51}, {16, 47.5}} {
		per := lockPairAllocs(t, e, c.depth)
		t.Logf("%d pairs a write: %.1f allocations per lock+unlock pair", c.depth, per)
		if per > c.most {
			t.Errorf("%d pairs a write: %.1f allocations per lock+unlock pair, more than %.1f", c.depth, per, c.most)
		}
	}
}
