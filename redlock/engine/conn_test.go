package engine

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// oneMaster starts a Redis and a Client of it alone (restart guard off, a
// 2 s node timeout, then opts), and returns the Client's node and a go-redis
// client of the same Redis; both are closed when the test ends.
func oneMaster(t *testing.T, opts ...Option) (*node, *redis.Client) {
	t.Helper()
	m := redistest.Start(t)
	c, err := New([]string{m.Addr}, append([]Option{WithRestartGuard(0), WithNodeTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rdb := m.Client()
	t.Cleanup(func() { rdb.Close() })
	return c.nodes[0], rdb
}

// The workers' own connections read every kind of reply into the same
// values and errors as go-redis does, on a real Redis: the callers parse
// both with the same *redis.Cmd methods.
func TestWorkerConnRepliesMatchGoRedis(t *testing.T) {
	n, rdb := oneMaster(t)
	ctx := context.Background()

	big := strings.Repeat("x", 100<<10) // longer than the reader's buffer
	longErr := "return redis.error_reply('" + strings.Repeat("e", 40<<10) + "')"
	cmds := [][]any{
		{"set", "s", "v"},
		{"set", "s", "w", "nx"}, // nil bulk
		{"get", "s"},
		{"get", "absent"},
		{"incr", "n"},
		{"decrby", "n", int64(10)}, // negative integer
		{"set", "big", big},
		{"get", "big"},
		{"set", "bin", []byte("a\r\nb\x00c")},
		{"get", "bin"},
		{"eval", "return {1, 'two', false, {3, redis.error_reply('ERR inner')}, {}}", 0},
		{"eval", "return redis.error_reply('WRONGTYPE custom')", 0},
		{"eval", longErr, 0},
		{"lrange", "absent", 0, -1}, // empty array
		{"blpop", "absent", 0.01},   // nil array after the timeout
		{"hset", "h", "f", 1.5, "g", true},
		{"hgetall", "h"},
		{"nosuchcommand"},
		{"set", "d", time.Duration(42)},
		{"get", "d"},
	}
	for _, args := range cmds {
		want := rdb.Do(ctx, args...)
		// Undo what the first run changed, so both see the same state.
		switch args[0] {
		case "incr", "decrby":
			rdb.Del(ctx, "n")
			if args[0] == "decrby" {
				rdb.Incr(ctx, "n")
			}
		case "set":
			if len(args) == 3 {
				rdb.Del(ctx, args[1].(string))
			}
		case "hset":
			rdb.Del(ctx, "h")
		}
		got := n.do(ctx, args...)
		if !reflect.DeepEqual(errorsAsText(got.Val()), errorsAsText(want.Val())) {
			t.Errorf("%.60v: value %#.200v, go-redis %#.200v", args, got.Val(), want.Val())
		}
		if (got.Err() == nil) != (want.Err() == nil) || got.Err() != nil && got.Err().Error() != want.Err().Error() {
			t.Errorf("%.60v: error %.200v, go-redis %.200v", args, got.Err(), want.Err())
		}
	}
	// Still in step after every kind of reply, and after an argument it
	// cannot encode (which is not sent).
	if err := n.do(ctx, "set", "bad", struct{}{}).Err(); err == nil || !strings.Contains(err.Error(), "can't marshal") {
		t.Errorf("unencodable argument: %v", err)
	}
	if v, err := n.do(ctx, "echo", "after").Text(); v != "after" || err != nil {
		t.Errorf("echo after the others: %q %v", v, err)
	}
}

// A worker whose connection broke (the master closed it) dials again for
// the next batch, and the new connection's run_id check runs first.
func TestWorkerConnRedialsAfterBreak(t *testing.T) {
	n, rdb := oneMaster(t, WithPipelines(1))
	ctx := context.Background()
	if err := n.do(ctx, "ping").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "client", "kill", "type", "normal", "skipme", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	// The first command after the kill may fail with the broken connection;
	// the next one is sent on a new one.
	_ = n.do(ctx, "ping").Err()
	if err := n.do(ctx, "ping").Err(); err != nil {
		t.Fatalf("after the connection was killed: %v", err)
	}
}

// errorsAsText replaces error elements of a reply by their messages: an
// error inside an array is go-redis's own error type there and replyError
// here, which callers write back to clients the same way.
func errorsAsText(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = errorsAsText(e)
		}
		return out
	case error:
		return "error: " + v.Error()
	}
	return v
}

// Masters that close idle connections (their timeout setting) do not cost
// the first operation after a pause its votes: a connection closed while
// idle is replaced before a batch is sent on it. Without the check, every
// vote of that acquire fails.
func TestIdleConnectionsClosedByMastersAreReplaced(t *testing.T) {
	ms := redistest.StartN(t, 3, "--timeout", "1")
	c, err := New(redistest.Addrs(ms), WithRestartGuard(0), WithNodeTimeout(time.Second), WithRetry(0, 0), WithMarkDown(0, 0), WithPipelines(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Acquire(ctx, "idle1", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	// Redis closes clients idle for more than a second, checking about
	// ten times a second.
	time.Sleep(2500 * time.Millisecond)
	if _, err := c.Acquire(ctx, "idle2", "v", time.Minute); err != nil {
		t.Fatalf("first acquire after the masters closed the idle connections: %v", err)
	}
	for _, m := range ms {
		cl := m.Client()
		v, _ := cl.Get(ctx, "idle2").Result()
		for deadline := time.Now().Add(time.Second); v != "v" && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			v, _ = cl.Get(ctx, "idle2").Result()
		}
		cl.Close()
		if v != "v" {
			t.Errorf("%s did not take the lock: %q", m.Addr, v)
		}
	}
}
