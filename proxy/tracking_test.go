package proxy_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// Client-side caching in RESP3, byte for byte as a plain Redis: CLIENT
// TRACKING ON (default and OPTIN, BCAST), invalidations of keys the client
// read when another client of the proxy or of the backend writes them, the
// OPTIN sequence a client-side cache sends (CLIENT CACHING YES, MULTI, PTTL,
// GET, EXEC), TRACKINGINFO, GETREDIR, CLIENT CACHING refused when not
// opted in, OFF, and tracking together with a subscription.
func TestTrackingLikeRedis(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	plain := startPlain(t)
	scenarios := map[string][]psStep{
		"default mode": {
			{"sub", []string{"CLIENT TRACKING ON", "SET trk:a 1", "GET trk:a", "MGET trk:b trk:c", "CLIENT TRACKINGINFO", "CLIENT GETREDIR"}},
			{"direct", []string{"SET trk:a 2"}},
			{"pub", []string{"SET trk:b 3", "SET trk:a 4"}},
			{"sub", []string{"GET trk:a", "CLIENT CACHING YES", "PING"}},
			{"pub", []string{"DEL trk:a"}},
			{"sub", []string{"CLIENT TRACKING OFF", "GET trk:a", "CLIENT TRACKINGINFO"}},
			{"direct", []string{"SET trk:a 5"}},
			{"sub", []string{"PING"}},
		},
		"optin, as a client-side cache reads": {
			{"sub", []string{"CLIENT TRACKING ON OPTIN", "GET trk:o1", "CLIENT CACHING YES", "MULTI", "PTTL trk:o2", "GET trk:o2", "EXEC"}},
			{"direct", []string{"SET trk:o1 x", "SET trk:o2 y"}},
			{"sub", []string{"WATCH trk:o3", "MULTI", "SET trk:o3 z", "EXEC", "DISCARD", "EXEC"}},
			{"pub", []string{"SET trk:o3 w"}},
			{"sub", []string{"RESET", "GET trk:o3"}},
			{"pub", []string{"SET trk:o3 v"}},
		},
		"bcast with prefixes": {
			{"sub", []string{"CLIENT TRACKING ON BCAST PREFIX trk:p: NOLOOP", "SET trk:p:1 a"}},
			{"pub", []string{"SET trk:p:2 b", "SET trk:q c"}},
			{"sub", []string{"CLIENT TRACKING ON BCAST PREFIX trk:p: PREFIX trk:p:x"}},
		},
		"tracking and a subscription": {
			{"sub", []string{"CLIENT TRACKING ON", "SUBSCRIBE ch", "GET trk:s"}},
			{"pub", []string{"PUBLISH ch m", "SET trk:s 1"}},
			{"sub", []string{"UNSUBSCRIBE ch", "GET trk:s"}},
			{"direct", []string{"SET trk:s 2"}},
			{"sub", []string{"CLIENT TRACKING OFF", "SUBSCRIBE ch2"}},
			{"pub", []string{"SET trk:s 3", "PUBLISH ch2 n"}},
		},
		"bad options": {
			{"sub", []string{"CLIENT TRACKING ON OPTIN OPTOUT", "CLIENT TRACKING MAYBE", "CLIENT TRACKING", "CLIENT TRACKING ON PREFIX a", "CLIENT CACHING YES", "CLIENT TRACKINGINFO", "GET trk:x"}},
			{"pub", []string{"SET trk:x 1"}},
			{"sub", []string{"PING"}},
		},
	}
	for name, steps := range scenarios {
		t.Run(name, func(t *testing.T) { comparePubSub(t, e, plain, "HELLO 3", steps) })
	}
}

// A tracking client caches nothing about a lock: every reply about a lock
// key (served by the quorum, never read on the backend connection whose
// invalidations reach the client) is followed by an invalidation of the
// key, and lock keys in MULTI, where a client-side cache reads, are refused
// as for every client. Without that invalidation a cached "not held" (nil)
// would outlive the lock's grant to another client. Plain keys of the same
// client keep their cached reads until written.
func TestTrackingCachesNoLock(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(cmds ...string) string {
		t.Helper()
		if _, err := c.Write(resp(cmds...)); err != nil {
			t.Fatal(err)
		}
		return string(quietRead(t, c, 200*time.Millisecond))
	}
	send("HELLO 3")
	mustEqual(t, "tracking on", send("CLIENT TRACKING ON OPTIN"), "+OK\r\n")
	inv := ">2\r\n$10\r\ninvalidate\r\n*1\r\n$6\r\nlock:a\r\n"
	mustEqual(t, "GET of a free lock", send("GET lock:a"), "_\r\n"+inv)
	mustEqual(t, "PTTL", send("PTTL lock:a"), ":-2\r\n"+inv)
	mustEqual(t, "SET NX", send("SET lock:a t1 NX PX 10000"), "+OK\r\n"+inv)
	mustEqual(t, "EXISTS of two", send("EXISTS lock:a trk:plain"), ":1\r\n"+inv)
	mustEqual(t, "a plain key read", send("CLIENT CACHING YES", "GET trk:plain"), "+OK\r\n_\r\n")
	got := send("CLIENT CACHING YES", "MULTI", "PTTL lock:a", "GET lock:a", "EXEC")
	if !strings.HasPrefix(got, "+OK\r\n+OK\r\n-ERR redlock-proxy: lock commands cannot be queued in MULTI") ||
		!strings.HasSuffix(got, "-EXECABORT Transaction discarded because of previous errors.\r\n") {
		t.Fatalf("a cached read of a lock key: %q", got)
	}
	// Another client writes the plain key: its invalidation comes, and
	// the connection still works in order.
	if err := e.c.Set(t.Context(), "trk:plain", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "after a write of the plain key", send("PING"),
		">2\r\n$10\r\ninvalidate\r\n*1\r\n$9\r\ntrk:plain\r\n+PONG\r\n")
	// A lock key refused in MULTI among plain commands: the replies in
	// order, and the backend aborts the transaction (nothing was set).
	mustEqual(t, "MULTI with a lock key among plain commands", send("MULTI", "SET trk:m 1", "PTTL lock:a", "GET trk:m", "EXEC", "GET trk:m"),
		"+OK\r\n+QUEUED\r\n-ERR redlock-proxy: lock commands cannot be queued in MULTI; the transaction will be aborted"+
			" (a client-side cache reads in MULTI, and lock keys cannot be cached: read them uncached, rueidis: Do, not DoCache)\r\n+QUEUED\r\n"+
			"-EXECABORT Transaction discarded because of previous errors.\r\n_\r\n")
	mustEqual(t, "tracking off", send("CLIENT TRACKING OFF", "GET lock:a"), "+OK\r\n$2\r\nt1\r\n")
}

// The control: with the invalidation of lock keys off, a tracking client
// that read a free lock is told nothing when another client is granted it,
// so a client-side cache keeps answering "not held" for a held lock.
func TestTrackingCachesNoLockControl(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Proxy.LockKeys = []string{"lock:*"}
		c.GuardsOff = []string{"lock-cache-invalidation"}
	})
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(resp("HELLO 3", "CLIENT TRACKING ON", "GET lock:b")); err != nil {
		t.Fatal(err)
	}
	if got := string(quietRead(t, c, 200*time.Millisecond)); !strings.HasSuffix(got, "+OK\r\n_\r\n") {
		t.Fatalf("the read of a free lock: %q", got)
	}
	if ok, err := e.c.SetNX(t.Context(), "lock:b", "other", 10*time.Second).Result(); err != nil || !ok {
		t.Fatalf("another client's SET NX: %v %v", ok, err)
	}
	if got := quietRead(t, c, 500*time.Millisecond); len(got) != 0 {
		t.Fatalf("with the guard off, the tracking client was told %q", got)
	}
}

// Where the proxy's answer differs from Redis's, and why: RESP2 tracking
// needs REDIRECT to a connection whose id is the backend's, and the proxy
// relays invalidations only on the client's own RESP3 connection; both are
// refused with an error naming what to do instead, and nothing stays
// pinned.
func TestTrackingRefusedWhereNotRelayed(t *testing.T) {
	e := newEnv(t, 3, nil)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(cmds ...string) string {
		t.Helper()
		if _, err := c.Write(resp(cmds...)); err != nil {
			t.Fatal(err)
		}
		return string(quietRead(t, c, 200*time.Millisecond))
	}
	hint := "use RESP3 (HELLO 3), where invalidations come on the client's own connection, or turn client-side caching off in the client (rueidis: ClientOption.DisableCache = true)"
	mustEqual(t, "RESP2", send("CLIENT TRACKING ON"), "-ERR redlock-proxy: CLIENT TRACKING is not supported through the proxy in RESP2; "+hint+"\r\n")
	mustEqual(t, "RESP2 off", send("CLIENT TRACKING OFF"), "+OK\r\n")
	send("HELLO 3")
	mustEqual(t, "REDIRECT", send("CLIENT TRACKING ON REDIRECT 7"), "-ERR redlock-proxy: CLIENT TRACKING REDIRECT is not supported through the proxy; "+hint+"\r\n")
	got := send("MULTI", "CLIENT TRACKING ON", "EXEC", "CLIENT TRACKINGINFO")
	if !strings.Contains(got, "CLIENT TRACKING cannot be queued in MULTI") || !strings.Contains(got, "EXECABORT") ||
		!strings.Contains(got, "$3\r\noff\r\n") {
		t.Fatalf("tracking in MULTI: %q", got)
	}
}
