package compat

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// TestPHPLaravelLock runs Laravel's Redis cache lock (Debian's
// php-illuminate-cache and php-illuminate-redis over the phpredis extension)
// through the proxy.
func TestPHPLaravelLock(t *testing.T) {
	need(t, "/usr/bin/php")
	need(t, "/usr/share/php/Illuminate/Cache/autoload.php")
	need(t, "/usr/share/php/Illuminate/Redis/autoload.php")
	s := startStack(t)
	run(t, s, "php", "/usr/bin/php", "laravel_lock_test.php")
}

// TestPHPLaravelCache runs Laravel's cache (Repository over RedisStore: put,
// get, many, putMany, add, increment, forever, forget, remember, tags,
// flush), its RateLimiter and its lock on the same connection, the same
// script once against a plain redis-server and once through the proxy, and
// compares what the two print line for line. Configurations: every key a
// lock key on a backend of the proxy's own (scripts/run.sh's), locks on the
// cache's own connection as Laravel sets them up by default; and lock_keys
// ["lock:*"], the locks on a connection of their own prefixed "lock:".
func TestPHPLaravelCache(t *testing.T) {
	need(t, "/usr/bin/php")
	need(t, "/usr/share/php/Illuminate/Cache/autoload.php")
	need(t, "/usr/share/php/Illuminate/Redis/autoload.php")
	for _, tc := range []struct {
		name       string
		lockKeys   []string // nil: startStack's, every key a lock key
		lockPrefix string
		db         int
	}{
		{name: "every key a lock key, database 0"},
		{name: "every key a lock key, database 1", db: 1},
		{name: "lock keys lock:*, database 0", lockKeys: []string{"lock:*"}, lockPrefix: "lock:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s stack
			if tc.lockKeys == nil {
				s = startStack(t)
			} else {
				s = startStackLockKeys(t, tc.lockKeys...)
			}
			plain := redistest.Start(t)
			env := func(target string, voters []string) []string {
				return []string{"REDIS_TARGET=" + target, "REDIS_VOTERS=" + strings.Join(voters, ","),
					"REDIS_DB=" + strconv.Itoa(tc.db), "LOCK_PREFIX=" + tc.lockPrefix, "RUN=laravel-cache"}
			}
			want, code := output(t, "php", env(plain.Addr, []string{plain.Addr}), "/usr/bin/php", "laravel_cache_test.php")
			if code != 0 {
				t.Fatalf("against a plain Redis: exit %d", code)
			}
			got, code := output(t, "php", env(s.Addr, redistest.Addrs(s.Masters)), "/usr/bin/php", "laravel_cache_test.php")
			if code != 0 {
				t.Fatalf("through the proxy: exit %d\n%s", code, got)
			}
			sameLines(t, "laravel_cache_test.php", want, got)
		})
	}
}

// TestPHPRedisInfoSelect: phpredis's info() (every section, and each one)
// parses the proxy's INFO, and select(0) leaves the connection serving data
// and locks, on a backend of the proxy's own with every key a lock key.
func TestPHPRedisInfoSelect(t *testing.T) {
	need(t, "/usr/bin/php")
	s := startStack(t)
	run(t, s, "php", "/usr/bin/php", "phpredis_info_test.php")
}

// TestPHPSymfonyLock runs Symfony Lock's RedisStore (Debian's
// php-symfony-lock, sorted-set read/write locks) over phpredis through the
// proxy.
func TestPHPSymfonyLock(t *testing.T) {
	need(t, "/usr/bin/php")
	need(t, "/usr/share/php/Symfony/Component/Lock/autoload.php")
	s := startStack(t)
	run(t, s, "php", "/usr/bin/php", "symfony_lock_test.php")
}

// TestPHPSymfonyLockNoQuorum: with two of three masters down, Symfony's
// operations fail with an exception rather than a refusal, and nothing is
// left behind.
func TestPHPSymfonyLockNoQuorum(t *testing.T) {
	need(t, "/usr/bin/php")
	need(t, "/usr/share/php/Symfony/Component/Lock/autoload.php")
	s := startStack(t)
	s.Masters[1].Kill()
	s.Masters[2].Kill()
	run(t, s, "php", "/usr/bin/php", "symfony_lock_test.php", "noquorum")
}

// symfonyScripts returns the scripts the installed Symfony Lock sends, by
// operation ("save", "save.argv", …).
func symfonyScripts(t *testing.T) map[string]string {
	t.Helper()
	need(t, "/usr/bin/php")
	need(t, "/usr/share/php/Symfony/Component/Lock/autoload.php")
	cmd := exec.Command("/usr/bin/php", "symfony_scripts.php")
	cmd.Dir = "php"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("symfony_scripts.php: %v", err)
	}
	m := map[string]string{}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("symfony_scripts.php: %v: %s", err, out)
	}
	return m
}

// zholders counts the masters on which token is a member of the sorted set
// key, waiting up to a second for at least want of them.
func (s stack) zholders(key, token string, want int) int {
	deadline := time.Now().Add(time.Second)
	for {
		n := 0
		for _, m := range s.Masters {
			c := m.Client()
			if _, err := c.ZScore(context.Background(), key, token).Result(); err == nil {
				n++
			}
			c.Close()
		}
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Symfony 7.2 and later send the same scripts by EVALSHA, loading them only
// after NOSCRIPT: the proxy knows them by their true SHA1 and runs them on
// the quorum without a load. Both spellings (the masters' TIME, or the
// client's clock in ARGV[1]) are the same operations.
func TestSymfonyScriptsByEVALSHA(t *testing.T) {
	sc := symfonyScripts(t)
	s := startStack(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	ctx := context.Background()
	for _, sfx := range []string{"", ".argv"} {
		sha := func(op string) string {
			sum := sha1.Sum([]byte(sc[op+sfx]))
			return hex.EncodeToString(sum[:])
		}
		key := "symfony-evalsha" + sfx
		now := float64(time.Now().UnixMicro()) / 1e6
		evalsha := func(op string, args ...any) (any, error) {
			return c.EvalSha(ctx, sha(op), []string{key}, args...).Result()
		}
		expect := func(what string, v any, err error, want any) {
			t.Helper()
			if want == nil && err != redis.Nil || want != nil && (err != nil || v != want) {
				t.Fatalf("%s%s: %v, %v; want %v", what, sfx, v, err, want)
			}
		}
		v, err := evalsha("save", now, "tok", 10000)
		expect("save", v, err, int64(1))
		if n := s.zholders(key, "tok", 3); n < 2 {
			t.Fatalf("save%s: token on %d masters", sfx, n)
		}
		v, err = evalsha("save", now, "other", 10000)
		expect("save by another token", v, err, nil)
		v, err = evalsha("saveRead", now, "other", 10000)
		expect("saveRead by another token", v, err, nil)
		v, err = evalsha("exists", now, "tok")
		expect("exists", v, err, int64(1))
		v, err = evalsha("exists", now, "other")
		expect("exists by another token", v, err, nil)
		v, err = evalsha("putOffExpiration", now, "tok", 30000)
		expect("putOffExpiration", v, err, int64(1))
		v, err = evalsha("putOffExpiration", now, "other", 30000)
		expect("putOffExpiration by another token", v, err, nil)
		renewed := 0
		for _, m := range s.Masters {
			mc := m.Client()
			if p, _ := mc.PTTL(ctx, key).Result(); p > 25*time.Second {
				renewed++
			}
			mc.Close()
		}
		if renewed < 2 {
			t.Fatalf("putOffExpiration%s: renewed on %d masters", sfx, renewed)
		}
		v, err = evalsha("delete", "tok")
		expect("delete", v, err, int64(1))
		if n := s.zholders(key, "tok", 0); n != 0 {
			t.Fatalf("delete%s: token left on %d masters", sfx, n)
		}
		v, err = evalsha("delete", "tok")
		expect("second delete", v, err, nil)
	}
}

// Bad arguments to a recognised Symfony script get an error reply and leave
// nothing on any master.
func TestSymfonyScriptsBadInput(t *testing.T) {
	sc := symfonyScripts(t)
	s := startStack(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	ctx := context.Background()
	key := "symfony-bad"
	now := float64(time.Now().UnixMicro()) / 1e6
	for _, args := range [][]any{{now, "tok", "abc"}, {now, "tok"}, {now, "tok", 0}, {now, "tok", -5}, {now, "tok", "1e3"}, {now, "tok", "99999999999999999999"}} {
		for _, op := range []string{"save", "saveRead", "putOffExpiration"} {
			err := c.Eval(ctx, sc[op], []string{key}, args...).Err()
			if op == "putOffExpiration" && len(args) == 3 && (args[2] == 0 || args[2] == -5) {
				continue // a TTL of 0 or less ends a hold; nothing is held here
			}
			if err == nil || err == redis.Nil || !strings.HasPrefix(err.Error(), "ERR") {
				t.Fatalf("%s %v: %v, want an error", op, args, err)
			}
		}
	}
	for _, op := range []string{"delete", "exists"} {
		if err := c.Eval(ctx, sc[op], []string{key}).Err(); err == nil || err == redis.Nil {
			t.Fatalf("%s without ARGV: %v, want an error", op, err)
		}
	}
	for _, m := range s.Masters {
		mc := m.Client()
		n, _ := mc.Exists(ctx, key).Result()
		mc.Close()
		if n != 0 {
			t.Fatalf("bad input left the key on %s", m)
		}
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("proxy after bad input: %v", err)
	}
}

// TestPHPClientList reads the proxy's CLIENT LIST and CLIENT INFO with
// phpredis, and kills a client by its address.
func TestPHPClientList(t *testing.T) {
	need(t, "/usr/bin/php")
	s := startStack(t)
	run(t, s, "php", "/usr/bin/php", "client_list_test.php")
}
