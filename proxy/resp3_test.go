package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// readRESP reads one whole reply (RESP2 or RESP3) from r, as raw bytes.
func readRESP(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading a reply: %v (so far %q)", err, line)
	}
	out := line
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	switch line[0] {
	case '$', '=', '!':
		if n >= 0 {
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(r, buf); err != nil {
				t.Fatal(err)
			}
			out += string(buf)
		}
	case '*', '~', '>', '%':
		if line[0] == '%' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			out += readRESP(t, r)
		}
	}
	return out
}

// A RESP3 connection through the proxy gets, command by command, the reply
// a plain Redis gives in RESP3, type for type: nulls, maps, sets, doubles,
// verbatim strings, from the lock path (SET NX, GET, the unlock script), from
// commands the proxy answers itself and from passthrough; HELLO 2 goes back
// to RESP2 byte for byte.
func TestRESP3LikeRedis(t *testing.T) {
	own := ownBackend(t) // the application's data beside the locks
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = own })
	plain := startPlain(t)
	k := e.key("lock")
	unlock := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	// shape: a reply that differs by nature (ids, versions, timings, the
	// proxy's own INFO), compared by type and shape only.
	type command struct {
		args  []string
		shape bool
	}
	cmds := []command{
		{[]string{"HELLO", "3"}, true},
		{[]string{"SET", k, "t", "NX", "PX", "10000"}, false},
		{[]string{"SET", k, "u", "NX", "PX", "10000"}, false},
		{[]string{"GET", k}, false},
		{[]string{"GET", k + ":missing"}, false},
		{[]string{"PTTL", k}, true},
		{[]string{"EXISTS", k, k + ":missing"}, false},
		{[]string{"SET", k + ":2", "t", "NX", "PX", "10000", "GET"}, false},
		{[]string{"EVAL", unlock, "1", k, "t"}, false},
		{[]string{"GETDEL", k + ":missing"}, false},
		// A recognised script whose refusal is nil (go-zero's reentrant
		// acquire, its wire text), on a key another id holds.
		{[]string{"SET", k + ":gz", "other", "NX", "PX", "10000"}, false},
		{[]string{"EVAL", goZeroAcquire, "1", k + ":gz", "me", "10000"}, false},
		{[]string{"HSET", k + ":h", "a", "1"}, false},
		{[]string{"HGETALL", k + ":h"}, false},
		{[]string{"ZADD", k + ":z", "1.5", "m"}, false},
		{[]string{"ZSCORE", k + ":z", "m"}, false},
		{[]string{"SADD", k + ":s", "x"}, false},
		{[]string{"SMEMBERS", k + ":s"}, false},
		{[]string{"LPOP", k + ":list"}, false},
		{[]string{"CLIENT", "GETNAME"}, false},
		{[]string{"CLIENT", "ID"}, true},
		{[]string{"CLIENT", "INFO"}, true},
		{[]string{"INFO", "server"}, true},
		{[]string{"CONFIG", "GET", "maxmemory"}, false},
		{[]string{"EVAL", "return redis.call('ping')", "0"}, false},
		{[]string{"PING"}, false},
		{[]string{"HELLO", "4"}, false},
		{[]string{"HELLO", "1"}, false},
		{[]string{"HELLO", "x"}, false},
		{[]string{"HELLO", "3", "SETNAME", "app"}, true},
		{[]string{"CLIENT", "GETNAME"}, false},
		{[]string{"HELLO", "2"}, true},
		{[]string{"GET", k + ":missing"}, false},
		{[]string{"HGETALL", k + ":h"}, false},
		{[]string{"HELLO"}, true},
	}
	args := make([][]string, len(cmds))
	for i, cmd := range cmds {
		args[i] = cmd.args
	}
	run := func(addr string) []string { return rawReplies(t, addr, args...) }
	want, got := run(plain), run(e.addr)
	for i, cmd := range cmds {
		w, g := want[i], got[i]
		verbatim := strings.HasPrefix(w, "=")
		switch {
		case cmd.shape && verbatim:
			if !strings.HasPrefix(g, "=") || !strings.Contains(g, "txt:") {
				t.Errorf("%v: proxy %q is not a verbatim text, as Redis's %q", cmd.args, g, w)
			}
		case cmd.shape:
			if g[0] != w[0] || strings.Count(g, "\r\n") != strings.Count(w, "\r\n") {
				t.Errorf("%v: proxy %q, Redis %q: not the same type and shape", cmd.args, g, w)
			}
		case g != w:
			t.Errorf("%v:\nproxy %q\nRedis %q", cmd.args, g, w)
		}
	}
	for i, cmd := range cmds {
		if cmd.args[0] != "HELLO" || !strings.HasPrefix(want[i], "%") && !strings.HasPrefix(want[i], "*") {
			continue
		}
		for _, key := range []string{"server", "version", "proto", "id", "mode", "role", "modules"} {
			if !strings.Contains(got[i], "$"+strconv.Itoa(len(key))+"\r\n"+key+"\r\n") {
				t.Errorf("%v: reply %q lacks %q", cmd.args, got[i], key)
			}
		}
	}
}

// goZeroAcquire is the acquire script go-zero's RedisLock sends.
const goZeroAcquire = `if redis.call("GET", KEYS[1]) == ARGV[1] then
    redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
    return "OK"
else
    return redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2])
end`

// respArgs encodes one command given as its arguments.
func respArgs(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// rawReplies sends each command to addr on one connection, one after
// another, and returns each raw reply.
func rawReplies(t *testing.T, addr string, cmds ...[]string) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	out := make([]string, 0, len(cmds))
	for _, cmd := range cmds {
		if _, err := c.Write(respArgs(cmd...)); err != nil {
			t.Fatal(err)
		}
		out = append(out, readRESP(t, r))
	}
	return out
}

// startPlain starts a plain redis-server for comparisons.
func startPlain(t *testing.T) string {
	t.Helper()
	return redistest.Start(t).Addr
}

// A subscribed RESP3 connection may run any command: messages arrive as
// pushes, and the replies of commands the proxy serves itself (lock
// commands on the quorum) come in order with those of the subscription, as
// on a plain Redis.
func TestRESP3SubscribedLikeRedis(t *testing.T) {
	e := newEnv(t, 3, nil)
	k := e.key("lock")
	scenario := []psStep{
		{"sub", []string{"SUBSCRIBE news", "GET " + k, "PING", "SET " + k + " t NX PX 10000", "GET " + k, "PSUBSCRIBE n*"}},
		{"pub", []string{"PUBLISH news hello"}},
		{"direct", []string{"PUBLISH news again"}},
		{"sub", []string{"ECHO x", "UNSUBSCRIBE", "GET " + k, "PUNSUBSCRIBE", "DEL " + k, "GET " + k, "PING"}},
		{"pub", []string{"PUBLISH news gone"}},
	}
	comparePubSub(t, e, startPlain(t), "HELLO 3", scenario)
	if on := e.onMasters(k); count(on, "") != 3 {
		t.Fatalf("the lock released while subscribed is on %v", on)
	}
}

// LOCK.INFO answers field-value pairs as Redis answers HGETALL: a flat
// array in RESP2 (as before RESP3 was served), a map in RESP3, its nulls in
// the connection's protocol.
func TestLockInfoInBothProtocols(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("free")
	for _, c := range []struct{ hello, prefix string }{
		{"HELLO 2", "*10\r\n$5\r\ntoken\r\n$-1\r\n$5\r\nfence\r\n"},
		{"HELLO 3", "%5\r\n$5\r\ntoken\r\n_\r\n$5\r\nfence\r\n"},
	} {
		nc, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(nc)
		if _, err := nc.Write(respArgs(strings.Fields(c.hello)...)); err != nil {
			t.Fatal(err)
		}
		readRESP(t, r)
		if _, err := nc.Write(respArgs("LOCK.INFO", key)); err != nil {
			t.Fatal(err)
		}
		got := readRESP(t, r)
		nc.Close()
		if !strings.HasPrefix(got, c.prefix) || !strings.Contains(got, "masters\r\n*3\r\n") {
			t.Errorf("%s: LOCK.INFO %q, want it to begin %q", c.hello, got, c.prefix)
		}
	}
}
