package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// clusterEnv is a proxy whose backend is a Redis Cluster of three
// primaries (every key a lock key: data beside locks, mixed.go).
func clusterEnv(t *testing.T, mutate func(*proxy.Config)) (*env, *redistest.Cluster) {
	t.Helper()
	cl := redistest.StartCluster(t, 3, 0)
	e := newEnv(t, 3, func(cfg *proxy.Config) {
		cfg.Proxy.Backend = "cluster://" + strings.Join(cl.Addrs(), ",")
		if mutate != nil {
			mutate(cfg)
		}
	})
	return e, cl
}

// One cluster for every part: each starts from a flushed keyspace.
func TestClusterBackend(t *testing.T) {
	e, cl := clusterEnv(t, nil)
	flush := func(t *testing.T) {
		if err := e.c.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("routes_by_slot", func(t *testing.T) { flush(t); clusterRoutesBySlot(t, e, cl) })
	t.Run("like_redis", func(t *testing.T) { flush(t); clusterLikeRedis(t, e, cl) })
	t.Run("refusals", func(t *testing.T) { clusterRefusals(t, e) })
	t.Run("lock_mirror_by_slot", func(t *testing.T) { flush(t); clusterLockMirror(t, e, cl) })
	t.Run("info_of_every_primary", func(t *testing.T) { flush(t); clusterInfoSummed(t, e, cl) })
	t.Run("pipelined_clients", func(t *testing.T) { flush(t); clusterPipelined(t, e) })
	t.Run("refused_then_moved_tx", func(t *testing.T) { flush(t); clusterRefusedThenMoved(t, e, cl) })
	t.Run("tx_on_a_migrating_slot", func(t *testing.T) { flush(t); clusterTxMigrating(t, e, cl) })
	t.Run("resharding", func(t *testing.T) { flush(t); clusterResharding(t, e, cl) }) // last: it moves slots
}

// Single-key commands reach the primary of their slot, and multi-key
// commands across slots are split, through a client that knows nothing
// of the cluster.
func clusterRoutesBySlot(t *testing.T, e *env, cl *redistest.Cluster) {
	ctx := context.Background()
	keys := []string{"a", "b", "c", "d", "e", "f", "{t}1", "{t}2"}
	for _, k := range keys {
		if err := e.c.Set(ctx, k, "v"+k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	owners := map[string]bool{}
	for _, k := range keys {
		owner := cl.Owner(k)
		owners[owner.Addr] = true
		rc := owner.Client()
		v, err := rc.Get(ctx, k).Result()
		rc.Close()
		if err != nil || v != "v"+k {
			t.Fatalf("%s on its owner %s: %q %v", k, owner.Addr, v, err)
		}
	}
	if len(owners) < 3 {
		t.Fatalf("the keys landed on %d primaries", len(owners))
	}
	got, err := e.c.MGet(ctx, append(keys, "nope")...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got[i] != "v"+k {
			t.Fatalf("MGET %s: %v", k, got[i])
		}
	}
	if got[len(keys)] != nil {
		t.Fatalf("MGET of a missing key: %v", got[len(keys)])
	}
	if n, err := e.c.DBSize(ctx).Result(); err != nil || n != int64(len(keys)) {
		t.Fatalf("DBSIZE: %d %v", n, err)
	}
	// SCAN through every primary, COUNT 2: many pages, each key once.
	var seen []string
	var cursor uint64
	for {
		page, next, err := e.c.Scan(ctx, cursor, "*", 2).Result()
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, page...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	slices.Sort(seen)
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Fatalf("SCAN saw %q, want %q", seen, want)
	}
	if _, err := e.do("SELECT", "1"); err == nil || err.Error() != "ERR SELECT is not allowed in cluster mode" {
		t.Fatalf("SELECT 1: %v", err)
	}
}

// clusterCrossSlot are the commands a single Redis runs and the proxy
// answers CROSSSLOT when their keys are in different slots, as Redis
// Cluster does (docs/commands.md, "A Redis Cluster as the backend").
var clusterCrossSlot = map[string]string{
	"msetnx":      "all or none: it cannot be split and stay atomic",
	"rename":      "the key moves between slots",
	"sunionstore": "reads and writes keys of several slots",
	"sinter":      "reads keys of several slots",
	"rpoplpush":   "moves an element between slots",
	"eval":        "a script's keys must be in one slot",
	"set":         "in MULTI: a transaction's keys must be in one slot",
	"exec":        "EXECABORT: a command of the transaction was refused CROSSSLOT",
}

// The same commands, one by one and pipelined, in RESP2 and RESP3, sent
// to a plain Redis and through the proxy in front of the cluster, reply
// for reply; where Redis answers and the cluster refuses (CROSSSLOT), the
// difference is allowed, and the keys it named are deleted on both sides.
func clusterLikeRedis(t *testing.T, e *env, cl *redistest.Cluster) {
	rc := cl.Nodes[0].Client()
	defer rc.Close()
	slot := func(k string) int64 { return rc.ClusterKeySlot(context.Background(), k).Val() }
	for _, pair := range [][2]string{{"d:a", "d:b"}, {"d:m1", "d:m2"}, {"d:x1", "d:x2"}, {"d:s", "d:{u}s1"}, {"d:l", "d:x5"}, {"d:{v}", "d:{w}"}} {
		if slot(pair[0]) == slot(pair[1]) {
			t.Fatalf("%s and %s share a slot: choose other keys", pair[0], pair[1])
		}
	}
	seq := [][]string{
		{"SET", "d:a", "1"}, {"GET", "d:a"}, {"INCR", "d:a"}, {"INCRBY", "d:a", "5"}, {"APPEND", "d:b", "hello"},
		{"STRLEN", "d:b"}, {"GETRANGE", "d:b", "0", "2"}, {"SETEX", "d:c", "100", "x"}, {"TTL", "d:c"},
		{"PEXPIRE", "d:c", "50000"}, {"PTTL", "d:c"}, {"PERSIST", "d:c"}, {"TTL", "d:c"}, {"SET", "d:e", "v", "EX", "100"},
		{"EXPIRE", "d:e", "200"}, {"GETDEL", "d:e"}, {"GETEX", "d:b", "EX", "100"}, {"TTL", "d:b"}, {"TYPE", "d:b"},
		{"HSET", "d:h", "f1", "v1", "f2", "v2"}, {"HGET", "d:h", "f1"}, {"HGETALL", "d:h"}, {"HINCRBY", "d:h", "n", "3"},
		{"HDEL", "d:h", "f2"}, {"HLEN", "d:h"}, {"HEXISTS", "d:h", "f1"},
		{"RPUSH", "d:l", "1", "2", "3"}, {"LPUSH", "d:l", "0"}, {"LRANGE", "d:l", "0", "-1"}, {"LPOP", "d:l"},
		{"RPOP", "d:l"}, {"LLEN", "d:l"}, {"LINDEX", "d:l", "0"},
		{"SADD", "d:s", "a", "b", "c"}, {"SMEMBERS", "d:s"}, {"SISMEMBER", "d:s", "a"}, {"SREM", "d:s", "b"}, {"SCARD", "d:s"},
		{"ZADD", "d:z", "1", "a", "2", "b", "3", "c"}, {"ZRANGE", "d:z", "0", "-1", "WITHSCORES"}, {"ZSCORE", "d:z", "b"},
		{"ZINCRBY", "d:z", "5", "a"}, {"ZRANK", "d:z", "a"}, {"ZREM", "d:z", "c"}, {"ZCARD", "d:z"},
		// Across slots: split and merged.
		{"MSET", "d:m1", "1", "d:m2", "2", "d:m3", "3", "d:m4", "4"}, {"MGET", "d:m1", "d:m2", "d:nope", "d:m3", "d:m4"},
		{"EXISTS", "d:m1", "d:m2", "d:nope", "d:m1"}, {"TOUCH", "d:m1", "d:m2", "d:nope"}, {"DEL", "d:m1", "d:m2", "d:nope"},
		{"UNLINK", "d:m3", "d:m4"}, {"MGET", "d:m1", "d:m3"}, {"DBSIZE"}, {"KEYS", "d:*"},
		// Hash tags: one slot.
		{"MSET", "d:{u}1", "a", "d:{u}2", "b"}, {"MSETNX", "d:{u}3", "c", "d:{u}4", "d"}, {"SADD", "d:{u}s1", "x", "y"},
		{"SADD", "d:{u}s2", "y", "z"}, {"SINTER", "d:{u}s1", "d:{u}s2"}, {"SUNIONSTORE", "d:{u}s3", "d:{u}s1", "d:{u}s2"},
		{"SMEMBERS", "d:{u}s3"}, {"RENAME", "d:{u}1", "d:{u}5"}, {"GET", "d:{u}5"},
		{"EVAL", "return redis.call('get', KEYS[1]) .. redis.call('get', KEYS[2])", "2", "d:{u}2", "d:{u}5"},
		{"MULTI"}, {"SET", "d:{u}t", "1"}, {"INCR", "d:{u}t"}, {"GET", "d:{u}t"}, {"EXEC"},
		{"DBSIZE"}, {"KEYS", "d:*"},
	}
	// Keys in different slots, refused as Redis Cluster refuses them: one
	// by one, and the keys each named deleted on both sides after it (what
	// Redis did, the cluster did not).
	cross := [][]string{
		{"MSETNX", "d:x1", "1", "d:x2", "2"}, {"SUNIONSTORE", "d:x3", "d:s", "d:{u}s1"}, {"RENAME", "d:a", "d:b"},
		{"SINTER", "d:s", "d:{u}s1"}, {"EVAL", "return redis.call('get', KEYS[1])", "2", "d:a", "d:b"},
		{"RPOPLPUSH", "d:l", "d:x5"}, {"MULTI"}, {"SET", "d:{v}", "1"}, {"SET", "d:{w}", "2"}, {"EXEC"},
		{"DBSIZE"}, {"KEYS", "d:*"},
	}
	plain := startPlain(t)
	for _, mode := range []struct {
		name  string
		resp3 bool
		chunk int
	}{{"resp2", false, 1}, {"resp2_pipelined", false, 7}, {"resp3", true, 1}, {"resp3_pipelined", true, 5}} {
		t.Run(mode.name, func(t *testing.T) {
			p, r := dialRESP(t, e.addr), dialRESP(t, plain)
			defer p.close()
			defer r.close()
			p.do(t, "FLUSHALL")
			r.do(t, "FLUSHALL")
			if mode.resp3 {
				p.do(t, "HELLO", "3")
				r.do(t, "HELLO", "3")
			}
			var queued [][]string
			compare := func(cmd []string, got, want string) bool {
				name := strings.ToLower(cmd[0])
				same := sameReply(cmd, got, want)
				if !same && name == "exec" && got[0] == '*' && want[0] == '*' {
					same = sameElements(t, queued, got, want)
				}
				switch {
				case name == "multi":
					queued = [][]string{}
				case name == "exec":
					queued = nil
				case queued != nil:
					queued = append(queued, cmd)
				}
				return same
			}
			for i := 0; i < len(seq); i += mode.chunk {
				cmds := seq[i:min(i+mode.chunk, len(seq))]
				gots, wants := p.pipeline(t, cmds...), r.pipeline(t, cmds...)
				for j, cmd := range cmds {
					if !compare(cmd, gots[j], wants[j]) {
						t.Fatalf("command %d %q:\nproxy %q\nRedis %q", i+j, cmd, gots[j], wants[j])
					}
				}
			}
			allowed := 0
			var named, txKeys []string
			for _, cmd := range cross {
				got, want := p.do(t, cmd...), r.do(t, cmd...)
				name := strings.ToLower(cmd[0])
				if queued != nil {
					txKeys = append(txKeys, cmd[1:]...) // an EXECABORT undoes them all
				}
				if compare(cmd, got, want) {
					continue
				}
				if name == "exec" {
					named = append(named, txKeys...)
				}
				crossSlot := strings.HasPrefix(got, "-CROSSSLOT") || name == "exec" && strings.HasPrefix(got, "-EXECABORT")
				if _, ok := clusterCrossSlot[name]; !ok || !crossSlot {
					t.Fatalf("%q:\nproxy %q\nRedis %q", cmd, got, want)
				}
				allowed++
				for _, a := range cmd[1:] {
					if strings.HasPrefix(a, "d:") {
						named = append(named, a)
					}
				}
				if queued == nil {
					txKeys = nil
					for _, k := range named {
						p.do(t, "DEL", k)
						r.do(t, "DEL", k)
					}
					named = nil
				}
			}
			if allowed != 8 {
				t.Fatalf("%d allowed differences, want the 8 CROSSSLOT cases", allowed)
			}
		})
	}
}

// With every key a lock key, a lock's mirror (mixed.go) is written to the
// primary of its slot, and taken back from there on release.
func clusterLockMirror(t *testing.T, e *env, cl *redistest.Cluster) {
	ctx := context.Background()
	for _, k := range []string{"lk:a", "lk:b", "lk:c", "lk:d"} {
		if ok, err := e.c.SetNX(ctx, k, "tok-"+k, 10*time.Second).Result(); err != nil || !ok {
			t.Fatalf("SET %s NX: %v %v", k, ok, err)
		}
		rc := cl.Owner(k).Client()
		v, err := rc.Get(ctx, k).Result()
		rc.Close()
		if err != nil || v != "tok-"+k {
			t.Fatalf("the mirror of %s on its owner: %q %v", k, v, err)
		}
		if v, err := e.c.Get(ctx, k).Result(); err != nil || v != "tok-"+k {
			t.Fatalf("GET %s: %q %v", k, v, err)
		}
		n, err := e.c.Eval(ctx, "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end", []string{k}, "tok-"+k).Int()
		if err != nil || n != 1 {
			t.Fatalf("release %s: %d %v", k, n, err)
		}
		rc = cl.Owner(k).Client()
		x, err := rc.Exists(ctx, k).Result()
		rc.Close()
		if err != nil || x != 0 {
			t.Fatalf("the mirror of %s after release: %d %v", k, x, err)
		}
	}
}

// Slots move from one primary to another while clients send commands
// through the proxy, one at a time and pipelined: no MOVED or ASK reaches
// them, no command fails, and every value is kept.
func clusterResharding(t *testing.T, e *env, cl *redistest.Cluster) {
	ctx := context.Background()
	const n = 300
	for i := range n {
		if err := e.c.Set(ctx, fmt.Sprintf("r:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := e.c.Set(ctx, fmt.Sprintf("rp:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	from, to := cl.Owner("r:0"), cl.Owner("r:1")
	if from == to {
		to = cl.Nodes[(slices.Index(cl.Nodes, from)+1)%3]
	}
	before := map[string]string{}
	for i := range n {
		before[fmt.Sprintf("r:%d", i)] = cl.Owner(fmt.Sprintf("r:%d", i)).Addr
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var ops atomic.Int64
	errs := make(chan error, 16)
	// A fifth client pipelines INCR, GET and DECR of eight keys of its
	// own (rp:…, in many slots) at a time: each reply in its order.
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := e.client()
		defer c.Close()
		for i := 0; !stop.Load(); i = (i + 8) % n {
			pipe := c.Pipeline()
			var incrs []*redis.IntCmd
			var gets []*redis.StringCmd
			for j := range 8 {
				k := fmt.Sprintf("rp:%d", (i+j)%n)
				incrs = append(incrs, pipe.Incr(ctx, k))
				gets = append(gets, pipe.Get(ctx, k))
				pipe.Decr(ctx, k)
			}
			_, err := pipe.Exec(ctx)
			for j := range 8 {
				if want := (i+j)%n + 1; err == nil && (incrs[j].Val() != int64(want) || gets[j].Val() != fmt.Sprint(want)) {
					err = fmt.Errorf("pipelined INCR, GET of rp:%d: %d, %q, want %d", (i+j)%n, incrs[j].Val(), gets[j].Val(), want)
				}
			}
			if err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			ops.Add(24)
		}
	}()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.client()
			defer c.Close()
			for i := w; !stop.Load(); i = (i + 4) % n {
				k := fmt.Sprintf("r:%d", i)
				var err error
				switch i % 4 {
				case 0:
					err = c.Incr(ctx, k).Err()
					if err == nil {
						err = c.Decr(ctx, k).Err()
					}
				case 1:
					var v int
					if v, err = c.Get(ctx, k).Int(); err == nil && v != i {
						err = fmt.Errorf("GET %s = %d", k, v)
					}
				case 2:
					var vs []any
					if vs, err = c.MGet(ctx, k, fmt.Sprintf("r:%d", (i+1)%n), fmt.Sprintf("r:%d", (i+2)%n)).Result(); err == nil && vs[0] != fmt.Sprint(i) {
						err = fmt.Errorf("MGET %s = %v", k, vs)
					}
				case 3:
					pipe := c.TxPipeline()
					pipe.Incr(ctx, k)
					pipe.Decr(ctx, k)
					_, err = pipe.Exec(ctx)
				}
				if err != nil {
					select {
					case errs <- fmt.Errorf("%s: %w", k, err):
					default:
					}
					return
				}
				ops.Add(1)
			}
		}()
	}
	cl.Reshard(from, to, 1000)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	moved := 0
	for k, owner := range before {
		if cl.Owner(k).Addr != owner {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no key changed primary: the resharding moved none of the keys used")
	}
	for i := range n {
		if v, err := e.c.Get(ctx, fmt.Sprintf("r:%d", i)).Int(); err != nil || v != i {
			t.Fatalf("r:%d after the resharding: %d %v", i, v, err)
		}
		if v, err := e.c.Get(ctx, fmt.Sprintf("rp:%d", i)).Int(); err != nil || v != i {
			t.Fatalf("rp:%d after the resharding: %d %v", i, v, err)
		}
	}
	t.Logf("%d commands during the resharding; %d of %d keys moved to another primary", ops.Load(), moved, n)
}

// proxy.backend = "cluster://host:port[,host:port…]": its forms, and a
// master among its nodes refused.
func TestClusterBackendConfig(t *testing.T) {
	for _, c := range []struct {
		backend, err string
	}{
		{"cluster://127.0.0.1:7000,127.0.0.1:7001", ""},
		{"cluster://h1:7000", ""},
		{"cluster://", "names no node"},
		{"cluster://h1", "is not host:port"},
		{"cluster://h1:7000,h1:7000", "listed twice"},
		{"cluster://127.0.0.1:6379", "is one of redlock.masters"},
	} {
		cfg := proxy.DefaultConfig()
		cfg.Redlock.Masters = []string{"127.0.0.1:6379", "127.0.0.1:6380", "127.0.0.1:6381"}
		cfg.Proxy.Backend = c.backend
		err := cfg.Validate()
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: %v, want %q", c.backend, err, c.err)
		}
	}
}

// What a cluster backend does not serve is refused with an error that says
// so, and plain SUBSCRIBE on RESP2 works.
func clusterRefusals(t *testing.T, e *env) {
	for _, cmd := range [][]string{{"SSUBSCRIBE", "ch"}, {"CLIENT", "TRACKING", "on"}} {
		p := dialRESP(t, e.addr)
		if got := p.do(t, cmd...); !strings.Contains(got, "not supported with a Redis Cluster backend") {
			t.Errorf("%q: %q", cmd, got)
		}
		p.close()
	}
	p := dialRESP(t, e.addr)
	defer p.close()
	p.do(t, "HELLO", "3")
	p.do(t, "SUBSCRIBE", "ch")
	if got := p.do(t, "GET", "k"); !strings.Contains(got, "on a subscribed connection are not supported") {
		t.Errorf("GET on a subscribed RESP3 connection: %q", got)
	}
	sub := e.client().Subscribe(context.Background(), "news")
	defer sub.Close()
	if _, err := sub.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := e.c.Publish(context.Background(), "news", "hi").Result(); err != nil || n != 1 {
		t.Fatalf("PUBLISH: %d %v", n, err)
	}
	m, err := sub.ReceiveMessage(context.Background())
	if err != nil || m.Payload != "hi" {
		t.Fatalf("message: %v %v", m, err)
	}
}

// INFO's Keyspace and Stats through the proxy describe the whole cluster:
// each field summed over every primary, not the first primary's alone.
func clusterInfoSummed(t *testing.T, e *env, cl *redistest.Cluster) {
	ctx := context.Background()
	const n = 30
	for i := range n {
		var ttl time.Duration
		if i%3 == 0 {
			ttl = time.Hour
		}
		if err := e.c.Set(ctx, fmt.Sprintf("i:%d", i), "v", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		e.c.Get(ctx, fmt.Sprintf("i:%d", i))        // hits
		e.c.Exists(ctx, fmt.Sprintf("i:none%d", i)) // misses
	}
	field := func(info, name string) string {
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				return v
			}
		}
		return ""
	}
	info, err := e.c.Info(ctx, "keyspace", "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := field(info, "db0"); !strings.HasPrefix(got, fmt.Sprintf("keys=%d,expires=%d,", n, n/3)) {
		t.Fatalf("INFO keyspace through the proxy: db0:%s, want keys=%d,expires=%d", got, n, n/3)
	}
	for _, stat := range []string{"keyspace_hits", "keyspace_misses"} {
		sum, most := 0, 0
		for _, node := range cl.Nodes {
			v, _ := strconv.Atoi(node.InfoField("stats", stat))
			sum += v
			most = max(most, v)
		}
		got, _ := strconv.Atoi(field(info, stat))
		if got != sum || sum <= most {
			t.Fatalf("%s through the proxy: %d; summed over the primaries %d, the most of one %d", stat, got, sum, most)
		}
	}
}

// Many clients pipeline commands on keys of every slot at once: each gets
// its replies, in its order, as a single Redis would answer them.
func clusterPipelined(t *testing.T, e *env) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.client()
			defer c.Close()
			for round := range 20 {
				pipe := c.Pipeline()
				var cmds []redis.Cmder
				for i := range 24 {
					k := fmt.Sprintf("p:%d:%d", w, i/4) // the same in each four
					switch i % 4 {
					case 0:
						cmds = append(cmds, pipe.Set(ctx, k, fmt.Sprint(round, i), 0))
					case 1:
						cmds = append(cmds, pipe.Get(ctx, k))
					case 2:
						cmds = append(cmds, pipe.Incr(ctx, fmt.Sprintf("p:%d:n", w)))
					case 3:
						cmds = append(cmds, pipe.MGet(ctx, k, fmt.Sprintf("p:%d:%d", w, (i/4+1)%6)))
					}
				}
				if _, err := pipe.Exec(ctx); err != nil {
					errs <- err
					return
				}
				for i, cmd := range cmds {
					var err error
					switch i % 4 {
					case 1:
						if v := cmd.(*redis.StringCmd).Val(); v != fmt.Sprint(round, i-1) {
							err = fmt.Errorf("GET after SET in one pipeline: %q, want %q", v, fmt.Sprint(round, i-1))
						}
					case 2:
						if v := cmd.(*redis.IntCmd).Val(); v != int64(round*6+i/4+1) {
							err = fmt.Errorf("INCR %d in order: %d, want %d", i, v, round*6+i/4+1)
						}
					case 3:
						if v := cmd.(*redis.SliceCmd).Val(); len(v) != 2 || v[0] != fmt.Sprint(round, i-3) {
							err = fmt.Errorf("MGET after SET in one pipeline: %q", v)
						}
					}
					if err != nil {
						errs <- fmt.Errorf("client %d, round %d: %w", w, round, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A transaction in which the node refused to queue a command aborts at
// EXEC, as on Redis, also when a later command moves it to another
// primary, where it is sent again without the refused command; and an
// UNWATCH queued in it is sent again with it.
func clusterRefusedThenMoved(t *testing.T, e *env, cl *redistest.Cluster) {
	ctx := context.Background()
	first := slices.Min(cl.Addrs()) // where MULTI opens: the first primary by address
	k := ""
	for i := 0; k == ""; i++ {
		if c := fmt.Sprintf("tx:%d", i); cl.Owner(c).Addr != first {
			k = c
		}
	}
	p := dialRESP(t, e.addr)
	defer p.close()
	for _, step := range [][]string{
		{"MULTI", "+OK"}, {"INCR", "-ERR wrong number of arguments"}, {"SET", k, "v", "+QUEUED"},
		{"EXEC", "-EXECABORT"},
		{"MULTI", "+OK"}, {"UNWATCH", "+QUEUED"}, {"SET", k, "w", "+QUEUED"}, {"EXEC", "*2\r\n+OK\r\n+OK"},
	} {
		cmd, want := step[:len(step)-1], step[len(step)-1]
		if got := p.do(t, cmd...); !strings.HasPrefix(got, want) {
			t.Fatalf("%q: %q, want %q…", cmd, got, want)
		}
		if cmd[0] == "EXEC" && want == "-EXECABORT" {
			if n := e.c.Exists(ctx, k).Val(); n != 0 {
				t.Fatalf("the SET of the aborted transaction ran: EXISTS %s = %d", k, n)
			}
		}
	}
}

// A transaction on a key that has left its slot's primary while the slot
// is being migrated (the key MIGRATEd, the slot still MIGRATING on the old
// owner and IMPORTING on the new) runs on the importing node after
// ASKING, as a cluster client sends it. Without that the old owner
// answered the queued INCR with ASK until the proxy gave up, and EXEC
// with EXECABORT.
func clusterTxMigrating(t *testing.T, e *env, cl *redistest.Cluster) {
	ctx := context.Background()
	k := "txm"
	from := cl.Owner(k)
	var to *redistest.Server
	for _, n := range cl.Nodes {
		if n != from && to == nil && slices.Contains(cl.Addrs(), n.Addr) {
			to = n
		}
	}
	fc, tc := from.Client(), to.Client()
	defer fc.Close()
	defer tc.Close()
	slot, err := fc.ClusterKeySlot(ctx, k).Result()
	if err != nil {
		t.Fatal(err)
	}
	fromID, err := cl.ID(from)
	if err != nil {
		t.Fatal(err)
	}
	toID, err := cl.ID(to)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Set(ctx, k, "5", 0).Err(); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(to.Addr, ":")
	for _, step := range []struct {
		c    *redis.Client
		args []any
	}{
		{tc, []any{"cluster", "setslot", slot, "importing", fromID}},
		{fc, []any{"cluster", "setslot", slot, "migrating", toID}},
		{fc, []any{"migrate", host, port, "", 0, 5000, "keys", k}},
	} {
		if err := step.c.Do(ctx, step.args...).Err(); err != nil {
			t.Fatalf("%v: %v", step.args, err)
		}
	}
	defer func() {
		for _, n := range cl.Nodes {
			nc := n.Client()
			_ = nc.Do(ctx, "cluster", "setslot", slot, "node", toID).Err()
			nc.Close()
		}
	}()
	p := dialRESP(t, e.addr)
	defer p.close()
	for _, step := range [][]string{
		{"MULTI", "+OK\r\n"}, {"INCR", k, "+QUEUED\r\n"}, {"INCR", k, "+QUEUED\r\n"}, {"EXEC", "*2\r\n:6\r\n:7\r\n"},
		{"GET", k, "$1\r\n7\r\n"},
	} {
		cmd, want := step[:len(step)-1], step[len(step)-1]
		if got := p.do(t, cmd...); got != want {
			t.Fatalf("%q: %q, want %q", cmd, got, want)
		}
	}
}
