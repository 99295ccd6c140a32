package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// lockedBuffer collects a process's log lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// The production binary has no switch for its safety guards: with
// REDLOCK_PROXY_UNSAFE_GUARDS_OFF set, the guard it names stays on (a key
// of the proxy's records is refused), its log says nothing of it, and the
// binary does not even hold the variable's name. The binary built for tests
// (the unsafeguards tag) switches the guard off and says so.
func TestGuardsOffOnlyInTestBinary(t *testing.T) {
	masters := redistest.StartN(t, 3)
	config := func(listen string) string {
		return fmt.Sprintf(`[proxy]
listen = %q
[redlock]
masters = [%s]
restart_guard = false
[log]
format = "json"
`, listen, redistest.Quote(redistest.Addrs(masters)))
	}
	const env = "REDLOCK_PROXY_UNSAFE_GUARDS_OFF=reserved-keys"
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		bin  string
		off  bool
	}{{"production", binary, false}, {"built for tests", redistest.UnsafeProxy(t), true}} {
		var log lockedBuffer
		p := redistest.StartProxy(t, tc.bin, config, redistest.WithEnv(env), redistest.WithStderr(&log))
		c := p.Client()
		err := c.Set(ctx, "redlock-proxy:probe", "x", 0).Err()
		c.Close()
		p.Kill()
		switch {
		case !tc.off && (err == nil || !strings.Contains(err.Error(), "reserved for the proxy's own records")):
			t.Fatalf("%s binary: SET of the proxy's record: %v, want it refused", tc.name, err)
		case tc.off && err != nil:
			t.Fatalf("%s binary: SET of the proxy's record with the guard off: %v", tc.name, err)
		}
		unsafe := strings.Contains(log.String(), "UNSAFE")
		if unsafe != tc.off || !tc.off && (strings.Contains(log.String(), "GUARDS_OFF") || strings.Contains(log.String(), "guards_off")) {
			t.Fatalf("%s binary's log:\n%s", tc.name, log.String())
		}
	}
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("REDLOCK_PROXY_UNSAFE_GUARDS_OFF")) {
		t.Fatal("the production binary holds the name of the variable")
	}
	// What builds the binaries operators run builds the production one.
	for _, f := range []string{"../../Dockerfile", "../../scripts/run.sh"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		builds := 0
		for _, line := range strings.Split(string(src), "\n") {
			if strings.Contains(line, "go build") {
				builds++
				if strings.Contains(line, "-tags") || strings.Contains(line, "unsafeguards") {
					t.Fatalf("%s builds with tags: %s", f, line)
				}
			}
		}
		if builds == 0 {
			t.Fatalf("%s: no go build found", f)
		}
	}
}
