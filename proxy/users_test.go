package proxy_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// noPermKeys is Redis 7.0's answer to a command that names a key its user
// may not access (checked against redis-server in TestUserKeysLikeRedis).
const noPermKeys = "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n"

// usersEnv is a proxy with a backend of its own and locks under "lock:":
// the default user (password "dpw"), u ("p"), allowed app:* and
// lock:app:*, and the users reader ("r"), whose keys are lock:* and who
// may not take locks, and all ("a"), with every key, as users were before
// they had permissions.
func usersEnv(t *testing.T, cfg *proxy.Config) *env {
	no := false
	return newEnv(t, 3, func(c *proxy.Config) {
		c.Proxy.Backend = ownBackend(t)
		c.Proxy.LockKeys = []string{"lock:*"}
		c.Proxy.Password = "dpw"
		c.Proxy.Users = []proxy.UserConfig{
			{Name: "u", Password: "p", Keys: []string{"~app:*", "~lock:app:*"}},
			{Name: "reader", Password: "r", Keys: []string{"~lock:*"}, Locks: &no},
			{Name: "all", Password: "a"},
		}
		if cfg != nil {
			*cfg = *c
		}
	})
}

// userClient is a go-redis client of the proxy authenticated as user.
func (e *env) userClient(user, pass string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: e.addr, Username: user, Password: pass, MaxRetries: -1, Protocol: 2})
	e.t.Cleanup(func() { c.Close() })
	return c
}

// A user's key patterns are checked as a Redis ACL user's are, with the
// same answers, wherever a key is among the arguments: quorum commands,
// passthrough, scripts' declared keys, commands whose keys move with
// their arguments, MULTI, SORT's patterns. The same commands go to a plain
// redis-server with the equivalent ACL user, and the replies are compared
// byte for byte.
func TestUserKeysLikeRedis(t *testing.T) {
	e := usersEnv(t, nil)
	plain := startPlain(t)
	for _, cmd := range [][]string{
		{"ACL", "SETUSER", "u", "on", ">p", "~app:*", "~lock:app:*", "&*", "+@all"},
		{"CONFIG", "SET", "requirepass", "dpw"},
	} {
		if r := rawReplies(t, plain, cmd)[0]; r != "+OK\r\n" {
			t.Fatalf("%v on the plain Redis: %q", cmd, r)
		}
	}
	admin := []string{"AUTH", "dpw"}
	setup := [][]string{admin, {"DEL", "app:l", "app:x"}, {"RPUSH", "app:l", "3", "1", "2"}, {"SET", "app:x", "v"}}
	rawReplies(t, plain, setup...)
	rawReplies(t, e.addr, append(setup, []string{"SET", "lock:held", "other", "NX", "PX", "60000"})...) // on the backend and the quorum

	unlock := unlockSpellings[0]
	cmds := [][]string{
		{"AUTH", "u", "p"},
		{"ACL", "WHOAMI"},
		{"GET", "app:x"},
		{"SET", "app:y", "1"},
		{"GET", "other:x"},
		{"SET", "other:x", "1"},
		{"MSET", "app:a", "1", "other:b", "2"},
		{"EXISTS", "app:x", "other:y"},
		{"DEL", "other:x"},
		{"OBJECT", "ENCODING", "other:x"},
		{"ZUNIONSTORE", "app:z", "2", "app:a", "other:b"},
		{"ZUNIONSTORE", "app:z", "1", "app:a"},
		{"XREAD", "STREAMS", "other:s", "0"},
		{"BLPOP", "other:l", "0.01"},
		{"WATCH", "other:x"},
		{"EVAL", "return 1", "1", "other:x"},
		{"EVAL", "return 1", "1", "app:x"},
		{"FCALL", "nosuchfunction", "1", "other:x"},
		{"SORT", "app:l"},
		{"SORT", "app:l", "BY", "w_*"},
		{"SORT", "app:l", "BY", "nosort"},
		{"SORT", "app:l", "BY", "nosort", "GET", "#"},
		{"SORT", "app:l", "LIMIT", "0", "x", "GET", "#"},
		{"SORT", "app:l", "ALPHA", "GET", "app:*"},
		{"SORT", "app:l", "STORE", "other:x"},
		{"SORT_RO", "app:l", "BY", "w_*"},
		{"SORT", "app:l", "NOSUCHOPTION", "GET", "#"},
		{"PUBLISH", "other:ch", "m"},
		{"NOSUCHCOMMAND", "other:x"},
		// Lock keys: the quorum's commands, and the lock scripts.
		{"SET", "lock:app:1", "t", "NX", "PX", "60000"},
		{"SET", "lock:held", "t", "NX", "PX", "60000"},
		{"SETNX", "lock:held", "t"},
		{"DEL", "lock:held"},
		{"PEXPIRE", "lock:held", "10"},
		{"GETEX", "lock:held", "PX", "10"},
		{"GETDEL", "lock:held"},
		{"EVAL", unlock, "1", "lock:held", "other"},
		{"EVAL", unlock, "1", "lock:app:1", "t"},
		{"GET", "lock:app:1"},
		// A transaction with a key it may not name is aborted.
		{"MULTI"},
		{"SET", "app:t", "1"},
		{"GET", "other:x"},
		{"EXEC"},
		{"GET", "app:t"},
		{"ACL", "WHOAMI", "extra"},
	}
	want := rawReplies(t, plain, cmds...)
	got := rawReplies(t, e.addr, cmds...)
	for i := range cmds {
		if got[i] != want[i] {
			t.Errorf("%q: proxy %q, Redis %q", cmds[i], got[i], want[i])
		}
	}
	if !strings.Contains(strings.Join(got, ""), "NOPERM") {
		t.Fatal("no command was refused")
	}
	// The lock u could not release is still held, on every master.
	mustEqual(t, "copies of lock:held", count(e.onMasters("lock:held"), "other"), 3)
}

// ACL LIST and ACL USERS answer for the proxy's users as a redis-server
// with equivalent users answers (and no password in the clear); ACL
// WHOAMI names the connection's user.
func TestACLListLikeRedis(t *testing.T) {
	e := usersEnv(t, nil)
	plain := startPlain(t)
	for _, cmd := range [][]string{
		{"ACL", "SETUSER", "u", "on", ">p", "~app:*", "~lock:app:*", "&*", "+@all"},
		{"ACL", "SETUSER", "reader", "on", ">r", "~lock:*", "&*", "+@all"},
		{"ACL", "SETUSER", "all", "on", ">a", "~*", "&*", "+@all"},
		{"CONFIG", "SET", "requirepass", "dpw"},
	} {
		if r := rawReplies(t, plain, cmd)[0]; r != "+OK\r\n" {
			t.Fatalf("%v on the plain Redis: %q", cmd, r)
		}
	}
	cmds := [][]string{{"AUTH", "dpw"}, {"ACL", "LIST"}, {"ACL", "USERS"}, {"ACL", "WHOAMI"}, {"acl", "list", "x"}, {"ACL", "users", "x"},
		{"AUTH", "reader", "r"}, {"ACL", "WHOAMI"}, {"ACL", "LIST"}}
	want := rawReplies(t, plain, cmds...)
	got := rawReplies(t, e.addr, cmds...)
	for i := range cmds {
		if got[i] != want[i] {
			t.Errorf("%q: proxy %q, Redis %q", cmds[i], got[i], want[i])
		}
	}
	for _, pw := range []string{"dpw", "\r\np\r\n", "\r\nr\r\n", "\r\na\r\n"} {
		if strings.Contains(got[1], pw) {
			t.Fatalf("ACL LIST shows a password: %q", got[1])
		}
	}
	// In MULTI it would be the backend's answer: refused.
	r := rawReplies(t, e.addr, []string{"AUTH", "dpw"}, []string{"MULTI"}, []string{"ACL", "WHOAMI"}, []string{"EXEC"})
	if !strings.HasPrefix(r[2], "-ERR redlock-proxy: ACL WHOAMI cannot be queued in MULTI") || !strings.HasPrefix(r[3], "-EXECABORT") {
		t.Fatalf("ACL WHOAMI in MULTI: %q", r)
	}
	// Other subcommands pass through to the backend, as before.
	if r := rawReplies(t, e.addr, []string{"AUTH", "dpw"}, []string{"ACL", "CAT", "keyspace"}); !strings.HasPrefix(r[1], "*") {
		t.Fatalf("ACL CAT: %q", r)
	}
}

// Without AUTH (no password, no users) every client is the default user,
// as on a Redis without requirepass; the default user's ACL LIST line is
// Redis's.
func TestACLWhoamiWithoutAuth(t *testing.T) {
	e := newEnv(t, 3, nil)
	plain := startPlain(t)
	cmds := [][]string{{"ACL", "WHOAMI"}, {"ACL", "LIST"}, {"ACL", "USERS"}, {"CLIENT", "INFO"}}
	want := rawReplies(t, plain, cmds...)
	got := rawReplies(t, e.addr, cmds...)
	for i := range cmds[:3] {
		if got[i] != want[i] {
			t.Errorf("%q: proxy %q, Redis %q", cmds[i], got[i], want[i])
		}
	}
	if !strings.Contains(got[3], " user=default ") {
		t.Errorf("CLIENT INFO: %q", got[3])
	}
	// With users and no proxy.password, the default user cannot
	// authenticate: it is off.
	e2 := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Users = []proxy.UserConfig{{Name: "app", Password: "p"}} })
	r := rawReplies(t, e2.addr, []string{"AUTH", "app", "p"}, []string{"ACL", "LIST"}, []string{"ACL", "WHOAMI"}, []string{"CLIENT", "INFO"})
	if !strings.Contains(r[1], "user default off ~* &* +@all\r\n") || !strings.Contains(r[1], "user app on #") || r[2] != "$3\r\napp\r\n" ||
		!strings.Contains(r[3], " user=app ") {
		t.Fatalf("ACL LIST, WHOAMI, CLIENT INFO: %q", r)
	}
}

// A user that may not take locks is refused every lock operation with
// NOPERM (nothing reaches a master), and may still read locks. Its control:
// a user without permissions, as every user was before them, deletes a
// lock another client holds.
func TestUserMayNotTakeLocks(t *testing.T) {
	e := usersEnv(t, nil)
	ctx := context.Background()
	admin := e.userClient("default", "dpw")
	if ok, err := admin.SetNX(ctx, "lock:held", "owner", time.Minute).Result(); !ok || err != nil {
		t.Fatalf("default user's lock: %v %v", ok, err)
	}
	r := e.userClient("reader", "r")
	unlock := unlockSpellings[0]
	for _, cmd := range [][]any{
		{"SET", "lock:new", "t", "NX", "PX", 10000},
		{"SETNX", "lock:new", "t"},
		{"SET", "lock:held", "mine"},
		{"DEL", "lock:held"},
		{"UNLINK", "lock:held"},
		{"PEXPIRE", "lock:held", 10},
		{"PERSIST", "lock:held"},
		{"GETEX", "lock:held", "PX", 10},
		{"GETDEL", "lock:held"},
		{"EVAL", unlock, 1, "lock:held", "owner"},
		{"EVAL", extendScript, 1, "lock:held", "owner", 10},
		{"LOCK.ACQUIRE", "lock:new", 10000},
		{"LOCK.RELEASE", "lock:held", "owner"},
		{"LOCK.EXTEND", "lock:held", "owner", 10000},
	} {
		err := r.Do(ctx, cmd...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "NOPERM redlock-proxy: user 'reader' may not take locks") {
			t.Fatalf("%v: %v, want NOPERM", cmd, err)
		}
	}
	for _, k := range []string{"lock:new", "lock:held"} {
		want := map[string]int{"lock:new": 0, "lock:held": 3}[k]
		if n := count(e.onMasters(k), map[string]string{"lock:new": "t", "lock:held": "owner"}[k]); n != want {
			t.Fatalf("%s on %d masters, want %d", k, n, want)
		}
	}
	// Reads of locks.
	if v, err := r.Get(ctx, "lock:held").Result(); v != "owner" || err != nil {
		t.Fatalf("GET: %v %v", v, err)
	}
	if v, err := r.PTTL(ctx, "lock:held").Result(); v <= 0 || err != nil {
		t.Fatalf("PTTL: %v %v", v, err)
	}
	if v, err := r.Exists(ctx, "lock:held").Result(); v != 1 || err != nil {
		t.Fatalf("EXISTS: %v %v", v, err)
	}
	if err := r.Do(ctx, "LOCK.INFO", "lock:held").Err(); err != nil {
		t.Fatalf("LOCK.INFO: %v", err)
	}
	if err := r.Do(ctx, "GETEX", "lock:held").Err(); err != nil {
		t.Fatalf("GETEX without options: %v", err)
	}
	// The control: a user with every key and locks.
	all := e.userClient("all", "a")
	if n, err := all.Del(ctx, "lock:held").Result(); n != 1 || err != nil {
		t.Fatalf("DEL by a user without permissions: %v %v", n, err)
	}
	mustEqual(t, "copies of the lock after the control", count(e.onMasters("lock:held"), "owner"), 0)
}

// Pipelined lock operations run concurrently (pipeline.go), and each is
// checked: the one on a key its user may not name is refused in its turn.
func TestUserKeysPipelined(t *testing.T) {
	e := usersEnv(t, nil)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var b []byte
	for _, cmd := range [][]string{{"AUTH", "u", "p"}, {"SET", "lock:app:a", "t", "NX", "PX", "10000"},
		{"SET", "lock:b", "t", "NX", "PX", "10000"}, {"SET", "lock:app:c", "t", "NX", "PX", "10000"},
		{"DEL", "lock:app:a", "lock:b"}, {"GET", "lock:app:c"}} {
		b = append(b, respArgs(cmd...)...)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	var got []string
	for range 6 {
		got = append(got, readRESP(t, r))
	}
	want := []string{"+OK\r\n", "+OK\r\n", noPermKeys, "+OK\r\n", noPermKeys, "$1\r\nt\r\n"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pipelined replies %q, want %q", got, want)
		}
	}
	mustEqual(t, "lock:b on the masters", count(e.onMasters("lock:b"), ""), 3)
}

// A RESP2 client that subscribed is answered as Redis answers it: a
// command that names a key its user may not access is refused with
// NOPERM, before subscribed mode refuses it.
func TestUserKeysSubscribedLikeRedis(t *testing.T) {
	e := usersEnv(t, nil)
	plain := startPlain(t)
	if r := rawReplies(t, plain, []string{"ACL", "SETUSER", "u", "on", ">p", "~app:*", "~lock:app:*", "&*", "+@all"})[0]; r != "+OK\r\n" {
		t.Fatal(r)
	}
	cmds := [][]string{{"AUTH", "u", "p"}, {"SUBSCRIBE", "ch"}, {"GET", "other:x"}, {"GET", "app:x"},
		{"SET", "lock:x", "t", "NX", "PX", "1000"}, {"PING"}, {"UNSUBSCRIBE", "ch"}, {"GET", "other:x"}}
	want := rawReplies(t, plain, cmds...)
	got := rawReplies(t, e.addr, cmds...)
	for i := range cmds {
		if got[i] != want[i] {
			t.Errorf("%q: proxy %q, Redis %q", cmds[i], got[i], want[i])
		}
	}
}

// A RESP3 client that tracks keys or subscribes has a backend connection
// of its own; its commands are checked there too.
func TestUserKeysOnOwnConnection(t *testing.T) {
	e := usersEnv(t, nil)
	for _, first := range [][]string{{"CLIENT", "TRACKING", "ON"}, {"SUBSCRIBE", "ch"}} {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		do := func(args ...string) string {
			if _, err := c.Write(respArgs(args...)); err != nil {
				t.Fatal(err)
			}
			return readRESP(t, r)
		}
		do("HELLO", "3", "AUTH", "u", "p")
		do(first...)
		for _, cmd := range [][]string{{"GET", "other:x"}, {"SET", "lock:x", "t", "NX", "PX", "1000"}, {"WATCH", "other:x"}} {
			if got := do(cmd...); got != noPermKeys {
				t.Fatalf("after %v, %v: %q", first, cmd, got)
			}
		}
		if got := do("SET", "app:x", "1"); got != "+OK\r\n" {
			t.Fatalf("after %v, SET app:x: %q", first, got)
		}
		do("MULTI")
		if got := do("GET", "other:x"); got != noPermKeys {
			t.Fatalf("after %v, GET in MULTI: %q", first, got)
		}
		if got := do("EXEC"); !strings.HasPrefix(got, "-EXECABORT") {
			t.Fatalf("after %v, EXEC: %q", first, got)
		}
		c.Close()
	}
}

// A reload changes what connected users may do from their next command;
// a connection whose user it removed is closed, as Redis closes those of a
// deleted user.
func TestUserPermissionsFollowReload(t *testing.T) {
	var cfg proxy.Config
	e := usersEnv(t, &cfg)
	ctx := context.Background()
	u := e.userClient("u", "p")
	if err := u.SetNX(ctx, "lock:x", "t", time.Minute).Err(); err == nil || err.Error()+"\r\n" != noPermKeys[1:] {
		t.Fatalf("before the reload: %v", err)
	}
	// Each reload gets a list of its own, as one read from the file.
	next := cfg
	users := func(first proxy.UserConfig) []proxy.UserConfig {
		return append([]proxy.UserConfig{first}, cfg.Proxy.Users[1:]...)
	}
	next.Proxy.Users = users(proxy.UserConfig{Name: "u", Password: "p"}) // every key
	if changed, err := e.srv.Reload(next); err != nil || len(changed) != 1 {
		t.Fatal(changed, err)
	}
	if ok, err := u.SetNX(ctx, "lock:x", "t", time.Minute).Result(); !ok || err != nil {
		t.Fatalf("after the reload: %v %v", ok, err)
	}
	f := false
	next.Proxy.Users = users(proxy.UserConfig{Name: "u", Password: "p", Keys: []string{"~app:*"}, Locks: &f})
	if changed, err := e.srv.Reload(next); err != nil || len(changed) != 1 {
		t.Fatal(changed, err)
	}
	if err := u.Del(ctx, "lock:x").Err(); err == nil || err.Error()+"\r\n" != noPermKeys[1:] {
		t.Fatalf("after the second reload: %v", err)
	}
	// Removed: the connection is closed at its next command.
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	c.Write(respArgs("AUTH", "u", "p"))
	if got := readRESP(t, br); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	next.Proxy.Users = cfg.Proxy.Users[1:]
	if changed, err := e.srv.Reload(next); err != nil || len(changed) != 1 {
		t.Fatal(changed, err)
	}
	c.Write(respArgs("GET", "app:x"))
	if line, err := br.ReadString('\n'); err == nil {
		t.Fatalf("the removed user's connection answered %q", line)
	}
}

// proxy.users is checked at start and at reload.
func TestUsersConfigValidated(t *testing.T) {
	for _, tc := range []struct {
		users []proxy.UserConfig
		want  string
	}{
		{[]proxy.UserConfig{{Password: "p"}}, "name is missing"},
		{[]proxy.UserConfig{{Name: "default", Password: "p"}}, "proxy.password's"},
		{[]proxy.UserConfig{{Name: "a b", Password: "p"}}, "spaces"},
		{[]proxy.UserConfig{{Name: "a", Password: "p"}, {Name: "a", Password: "q"}}, "listed twice"},
		{[]proxy.UserConfig{{Name: "a", Keys: []string{"app:*"}}}, `"~pattern"`},
		{[]proxy.UserConfig{{Name: "a", Keys: []string{"%R~app:*"}}}, "not supported"},
		{[]proxy.UserConfig{{Name: "a", Keys: []string{"~a b"}}}, "spaces"},
		{[]proxy.UserConfig{{Name: "a", Keys: []string{"allkeys", "~app:*"}}}, "already allows every key"},
	} {
		cfg := proxy.DefaultConfig()
		cfg.Redlock.Masters = []string{"127.0.0.1:1"}
		cfg.Proxy.Users = tc.users
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "proxy.users[") {
			t.Errorf("%+v: %v, want an error with %q", tc.users, err, tc.want)
		}
	}
	cfg := proxy.DefaultConfig()
	cfg.Redlock.Masters = []string{"127.0.0.1:1"}
	cfg.Proxy.Users = []proxy.UserConfig{{Name: "a", Keys: []string{"~app:*", "~"}}, {Name: "b", Keys: []string{}}, {Name: "c", Keys: []string{"~*"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Where the backend holds data beside the locks (every key a lock key, a
// backend of its own: mixed.go), a user who may not take locks keeps its
// data there as any user does — SET, INCR, GET, DEL — and still takes no
// lock and ends none: its SET NX is refused, and its DEL of another's lock
// key deletes the key in the application's keyspace only; the lock stays
// held on the quorum, and no one else is granted it.
func TestUserWithoutLocksKeepsData(t *testing.T) {
	no := false
	own := ownBackend(t)
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Proxy.Backend, c.Proxy.Password = own, "dpw"
		c.Proxy.Users = []proxy.UserConfig{{Name: "app", Password: "p", Locks: &no}}
	})
	ctx := context.Background()
	admin, app := e.userClient("default", "dpw"), e.userClient("app", "p")
	mustEqual(t, "the default user's lock", admin.SetNX(ctx, "held", "owner", time.Minute).Val(), true)
	mustEqual(t, "SET", app.Set(ctx, "n", "1", 0).Val(), "OK")
	mustEqual(t, "INCR", app.Incr(ctx, "n").Val(), int64(2))
	mustEqual(t, "GET", app.Get(ctx, "n").Val(), "2")
	mustEqual(t, "DEL of data", app.Del(ctx, "n").Val(), int64(1))
	if err := app.SetNX(ctx, "mine", "t", time.Minute).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("SET NX of a user who may not take locks: %v", err)
	}
	mustEqual(t, "DEL of another's lock key: its mirror", app.Del(ctx, "held").Val(), int64(1))
	mustEqual(t, "the lock on every master", count(e.onMasters("held"), "owner"), 3)
	if ok, err := admin.SetNX(ctx, "held", "other", time.Minute).Result(); ok || err != nil {
		t.Fatalf("a second holder: %v %v", ok, err)
	}
}
