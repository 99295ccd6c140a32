package proxy_test

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// The randomized differential test of transparency: the same random
// command sequences — every data type, key-space commands, transactions,
// scripts, expiries, SELECT, and lock operations on lock keys; a third of
// the sequences in pipelines of up to 12 commands — are sent to a
// plain redis-server and through the proxy, and compared reply for reply
// (raw RESP, so types count too; the members of unordered replies as sets,
// TTLs within the time the two runs are apart). A sequence never sends a
// command that is not a lock operation to a lock key: what the proxy
// refuses there is tested on its own (boundary_test.go).
//
// With a Redis Cluster as the backend (the cluster_backend
// configurations) the reference is still one plain redis-server, not a
// Redis Cluster: what the proxy promises is to answer as one Redis does,
// and a cluster as the reference would need a cluster-aware client in
// between, with redirects and pipelines of its own. For the comparison to
// be fair, nothing the cluster itself refuses is drawn: half the sequences
// confine their keys to one slot with a {hash tag} in each (every command
// then runs as on one Redis, transactions and commands on several keys
// among them), the other half spread their keys over the slots and draw
// no command on several keys but those the proxy splits by slot (MGET,
// MSET, DEL, UNLINK, EXISTS, TOUCH), and no transaction; SELECT is never
// drawn. What the cluster refuses (CROSSSLOT, SELECT n) is compared in
// TestClusterBackend.
//
// Seed printed and replayable; a short form in the suite, a long one with
// -transparency.duration:
//
//	go test -run TestTransparency -v ./proxy -args -transparency.duration=10m [-transparency.seed=N]
var (
	transparencySeed     = flag.Int64("transparency.seed", 0, "seed of the differential transparency test (0: from the clock)")
	transparencyDuration = flag.Duration("transparency.duration", 0, "how long the differential transparency test runs (0: the short form)")
)

// shortSequences is the short form's length: about 2,000 commands a
// configuration.
const shortSequences = 20

func TestTransparency(t *testing.T) {
	seed := *transparencySeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1e9
	}
	for _, c := range []struct {
		name    string
		voting  bool
		every   bool // every key a lock key: locks taken on data keys too
		cluster bool // the backend a Redis Cluster of three primaries
	}{
		{"prefix_voting_backend", true, false, false},
		{"prefix_own_backend", false, false, false},
		{"every_key_own_backend", false, true, false},
		{"prefix_cluster_backend", false, false, true},
		{"every_key_cluster_backend", false, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var own string
			switch {
			case c.cluster:
				own = "cluster://" + strings.Join(redistest.StartCluster(t, 3, 0).Addrs(), ",")
			case !c.voting:
				own = ownBackend(t)
			}
			keys := []string{"lock:*"}
			if c.every {
				keys = []string{"*"}
			}
			e := newEnv(t, 3, func(cfg *proxy.Config) { cfg.Proxy.LockKeys, cfg.Proxy.Backend = keys, own })
			plain := startPlain(t)
			rng := rand.New(rand.NewSource(seed))
			t.Logf("seed %d (replay: -args -transparency.seed=%d)", seed, seed)
			deadline := time.Now().Add(*transparencyDuration)
			sequences, commands, allowed := 0, 0, map[string]int{}
			names := map[string]bool{}
			for sequences == 0 || time.Now().Before(deadline) || sequences < shortSequences {
				g := gen{prefix: fmt.Sprintf("%s:%d", c.name, sequences), dual: c.every, voting: c.voting}
				if c.cluster {
					// Half the sequences in one slot, half across slots.
					g.cluster = true
					if sequences%2 == 0 {
						g.prefix = "{" + g.prefix + "}"
					} else {
						g.slots = true
					}
				}
				seq := newSequence(rng, g)
				n, why := compareSequence(t, e.addr, plain, seq, c.voting)
				if why != "" {
					allowed[why]++
				}
				for _, cmd := range seq.cmds[:n] {
					names[strings.ToLower(cmd[0])] = true
				}
				commands += n
				sequences++
				if t.Failed() {
					t.Fatalf("seed %d, sequence %d differs (replay: -args -transparency.seed=%d)", seed, sequences-1, seed)
				}
				if *transparencyDuration == 0 && sequences >= shortSequences {
					break
				}
			}
			t.Logf("%d sequences, %d commands, %d command names, no difference but those allowed: %v", sequences, commands, len(names), allowed)
		})
	}
}

// sequence is one run of commands on one connection to each side.
type sequence struct {
	resp3 bool
	cmds  [][]string
	// chunks, when not nil: the commands go in pipelines of these many
	// (one write each), their replies read in order.
	chunks []int
}

// newSequence draws a sequence over keys unique to it (data keys "t:…"
// and lock keys "lock:…"), with the options of g.
func newSequence(rng *rand.Rand, g gen) sequence {
	g.rng = rng
	s := sequence{resp3: rng.Intn(3) == 0}
	for range 60 + rng.Intn(60) {
		s.cmds = append(s.cmds, g.commands()...)
	}
	if rng.Intn(3) == 0 {
		for n := 0; n < len(s.cmds); {
			k := min(1+rng.Intn(12), len(s.cmds)-n)
			s.chunks = append(s.chunks, k)
			n += k
		}
	}
	return s
}

// compareSequence runs seq against the proxy and the plain Redis and
// reports a difference; it returns how many commands it ran, and, when it
// stopped at an allowed difference (after which the two sides' keys may
// differ), why that difference is allowed.
func compareSequence(t *testing.T, proxyAddr, plainAddr string, seq sequence, voting bool) (int, string) {
	t.Helper()
	p, r := dialRESP(t, proxyAddr), dialRESP(t, plainAddr)
	defer p.close()
	defer r.close()
	if seq.resp3 {
		p.do(t, "HELLO", "3")
		r.do(t, "HELLO", "3")
	}
	var queued [][]string    // the commands of the transaction open, for EXEC's reply
	var gots, wants []string // replies read ahead: the rest of a pipeline
	chunks := seq.chunks
	for i, cmd := range seq.cmds {
		if len(gots) == 0 {
			k := 1
			if len(chunks) > 0 {
				k, chunks = chunks[0], chunks[1:]
			}
			gots, wants = p.pipeline(t, seq.cmds[i:i+k]...), r.pipeline(t, seq.cmds[i:i+k]...)
		}
		got, want := gots[0], wants[0]
		gots, wants = gots[1:], wants[1:]
		switch name := strings.ToLower(cmd[0]); {
		case name == "multi":
			queued = [][]string{}
		case name == "exec" || name == "discard":
		case queued != nil:
			queued = append(queued, cmd)
		}
		same := sameReply(cmd, got, want)
		if !same && strings.EqualFold(cmd[0], "exec") && len(got) > 0 && got[0] == '*' && len(want) > 0 && want[0] == '*' {
			same = sameElements(t, queued, got, want)
		}
		if strings.EqualFold(cmd[0], "exec") || strings.EqualFold(cmd[0], "discard") {
			queued = nil
		}
		if same {
			continue
		}
		if why := allowedDifference(cmd, got, want, voting); why != "" {
			return i + 1, why
		}
		t.Errorf("command %d %q (resp3 %v, pipelined %v):\nproxy %q\nRedis %q\nthe sequence's commands on its key before it:%s\nthe commands just before it: %q", i, cmd, seq.resp3, seq.chunks != nil, got, want, before(seq.cmds[:i], cmd), seq.cmds[max(0, i-6):i])
		return i + 1, ""
	}
	return len(seq.cmds), ""
}

// before lists the commands of cmds that name one of cmd's arguments (its
// keys among them), one a line.
func before(cmds [][]string, cmd []string) string {
	var b strings.Builder
	for _, c := range cmds {
		for _, a := range c[1:] {
			if len(cmd) > 1 && slices.Contains(cmd[1:], a) && strings.HasPrefix(a, "t:") || strings.HasPrefix(a, "lock:") && slices.Contains(cmd[1:], a) {
				fmt.Fprintf(&b, "\n  %q", c)
				break
			}
		}
	}
	return b.String()
}

func hasNXArg(cmd []string) bool {
	for _, a := range cmd[min(3, len(cmd)):] {
		if strings.EqualFold(a, "nx") {
			return true
		}
	}
	return false
}

// sameElements compares the replies of EXEC element by element, each as
// the reply to its queued command.
func sameElements(t *testing.T, queued [][]string, got, want string) bool {
	g, w := rawElements(t, got), rawElements(t, want)
	if len(g) != len(w) || len(g) != len(queued) {
		return false
	}
	for i := range g {
		if !sameReply(queued[i], g[i], w[i]) {
			return false
		}
	}
	return true
}

// rawElements splits a raw array reply into its elements' raw replies.
func rawElements(t *testing.T, raw string) []string {
	r := bufio.NewReader(strings.NewReader(raw))
	line, _ := r.ReadString('\n')
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	out := make([]string, 0, max(n, 0))
	for range n {
		out = append(out, readRESP(t, r))
	}
	return out
}

// allowedDifference names the reason a reply of the proxy may differ from
// Redis's (docs/commands.md lists each, "Replies that differ from a single
// Redis"), or "" when it may not.
func allowedDifference(cmd []string, got, want string, voting bool) string {
	name := strings.ToLower(cmd[0])
	switch {
	case (name == "set" && hasNXArg(cmd) || name == "setnx") && (got == "$-1\r\n" || got == "_\r\n" || got == ":0\r\n") &&
		(want == "+OK\r\n" || want == ":1\r\n"):
		return "an acquire refused where Redis grants it: a data command overwrote or renamed a lock's key, and the lock stays on the quorum until its TTL"
	case name == "eval" && len(cmd) > 3 && strings.HasPrefix(cmd[3], "t:") && got == ":0\r\n" && want == ":1\r\n":
		return "a lock's extend or release answered 'not held' where Redis finds the token: a data command renamed or copied a lock onto the key, and the quorum's lock did not move"
	case strings.HasPrefix(got, "-NOQUORUM"):
		return "NOQUORUM: fewer than a quorum of masters answered within the node timeout"
	case strings.Contains(got, "lock commands cannot be queued in MULTI"):
		return "a lock operation (SET NX, SETNX, a lock script) queued in MULTI"
	case voting && (name == "eval" || name == "evalsha" || name == "multi" || name == "exec") &&
		strings.Contains(got, "is not one the proxy knows, and the backend is a voting master"):
		return "a script the proxy does not recognise, on a voting backend"
	case voting && strings.Contains(got, "cannot be queued in MULTI while the backend is a voting master"),
		voting && name == "exec" && strings.HasPrefix(got, "-EXECABORT"):
		return "a script, SCAN, KEYS or RANDOMKEY queued in MULTI on a voting backend"
	}
	return ""
}

type respConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *respConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return &respConn{c: c, r: bufio.NewReader(c)}
}

func (c *respConn) close() { c.c.Close() }

func (c *respConn) do(t *testing.T, args ...string) string {
	t.Helper()
	_ = c.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.c.Write(respArgs(args...)); err != nil {
		t.Fatal(err)
	}
	return readRESP(t, c.r)
}

// unordered lists the commands whose replies hold members in no order.
var unordered = map[string]bool{
	"smembers": true, "sunion": true, "sinter": true, "sdiff": true, "hkeys": true, "hvals": true,
	"hgetall": true, "keys": true, "exec": true, "sscan": true, "hscan": true,
}

// sameReply compares two raw replies to cmd: exactly, but the members of
// an unordered reply as a set, and TTLs within a second of each other.
func sameReply(cmd []string, got, want string) bool {
	if got == want {
		return true
	}
	name := strings.ToLower(cmd[0])
	g, gerr := wire.ParseValue([]byte(got))
	w, werr := wire.ParseValue([]byte(want))
	if gerr != nil || werr != nil || got[0] != want[0] {
		return false
	}
	switch name {
	case "ttl", "pttl", "expiretime", "pexpiretime":
		gi, gok := g.(int64)
		wi, wok := w.(int64)
		tol := int64(1)
		if name == "pttl" || name == "pexpiretime" {
			tol = 1000
		}
		return gok && wok && (gi < 0) == (wi < 0) && (gi < 0 && gi == wi || gi >= 0 && abs(gi-wi) <= tol)
	}
	if unordered[name] {
		return fmt.Sprint(sortedDeep(g)) == fmt.Sprint(sortedDeep(w))
	}
	return false
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// sortedDeep sorts every array in v by its members' printed form.
func sortedDeep(v any) any {
	a, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = fmt.Sprint(sortedDeep(x))
	}
	slices.Sort(out)
	return out
}

// gen draws commands. Data commands go to data keys, lock operations to
// lock keys; some sequences use a lock key the way libraries do (acquire,
// read, extend, release), the rest are random.
type gen struct {
	rng    *rand.Rand
	prefix string
	dual   bool // lock operations on data keys too (every key a lock key)
	voting bool // a voting backend: scripts of its own are refused there, and seldom drawn
	// A Redis Cluster backend: no SELECT (the cluster refuses it); with
	// slots, keys in many slots (the prefix has no {hash tag}), so no
	// command on several keys but those split by slot, and no
	// transaction (what a cluster refuses there is in cluster_test.go).
	cluster, slots bool
}

func (g *gen) key(kind string) string {
	return fmt.Sprintf("t:%s:%s%d", g.prefix, kind, g.rng.Intn(4))
}

func (g *gen) lockKey() string {
	if g.dual && g.rng.Intn(2) == 0 {
		return g.key("s") // a key used both ways: a lock, then data, or data, then a lock
	}
	return fmt.Sprintf("lock:%s:%d", g.prefix, g.rng.Intn(3))
}

func (g *gen) n(max int) string { return strconv.Itoa(g.rng.Intn(max)) }

func (g *gen) val() string {
	vals := []string{"a", "b", "10", "-3", "1.5", "", "xyz", "0", "abc def"}
	return vals[g.rng.Intn(len(vals))]
}

func (g *gen) ttlMS() string { return strconv.Itoa(20000 + g.rng.Intn(40000)) }

// commands draws one command, or a few that go together.
func (g *gen) commands() [][]string {
	if g.rng.Intn(6) == 0 {
		return g.lockCommands()
	}
	if g.rng.Intn(15) == 0 && !g.slots {
		return g.transaction()
	}
	if g.rng.Intn(30) == 0 && !g.cluster {
		return [][]string{{"SELECT", strconv.Itoa(g.rng.Intn(4))}}
	}
	return [][]string{g.dataCommand()}
}

// splitByProxy are the commands the proxy splits by slot on a cluster
// backend (clusterroute.go).
var splitByProxy = map[string]bool{"MGET": true, "MSET": true, "DEL": true, "UNLINK": true, "EXISTS": true, "TOUCH": true}

// manySlots reports whether cmd names data keys that may be in different
// slots and is not split by the proxy.
func manySlots(cmd []string) bool {
	if splitByProxy[cmd[0]] {
		return false
	}
	var keys []string
	for _, a := range cmd[1:] {
		if strings.HasPrefix(a, "t:") && !slices.Contains(keys, a) {
			keys = append(keys, a)
		}
	}
	return len(keys) > 1
}

func (g *gen) lockCommands() [][]string {
	k, tok := g.lockKey(), "tok"+g.n(3)
	unlock := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	extend := redistest.RedisPyExtend
	choices := [][][]string{
		{{"SET", k, tok, "NX", "PX", g.ttlMS()}},
		{{"SET", k, tok, "PX", g.ttlMS(), "NX"}},
		{{"set", k, tok, "nx", "ex", strconv.Itoa(20 + g.rng.Intn(40))}},
		{{"GET", k}},
		{{"PTTL", k}},
		{{"TTL", k}},
		{{"EXISTS", k, g.key("s")}},
		{{"DEL", k}},
		{{"EVAL", unlock, "1", k, tok}},
		{{"EVAL", extend, "1", k, tok, g.ttlMS(), "1"}},
		{{"PEXPIRE", k, g.ttlMS()}},
	}
	return choices[g.rng.Intn(len(choices))]
}

func (g *gen) transaction() [][]string {
	out := [][]string{}
	if g.rng.Intn(2) == 0 {
		out = append(out, []string{"WATCH", g.key("s")})
	}
	out = append(out, []string{"MULTI"})
	for range 1 + g.rng.Intn(3) {
		out = append(out, g.dataCommand())
	}
	if g.rng.Intn(5) == 0 {
		return append(out, []string{"DISCARD"})
	}
	return append(out, []string{"EXEC"})
}

// dataCommand draws one command on data keys, of every type.
func (g *gen) dataCommand() []string {
	s, l, h, z, st, x := g.key("s"), g.key("l"), g.key("h"), g.key("z"), g.key("set"), g.key("x")
	b := g.key("bits")
	all := [][]string{
		// strings
		{"SET", s, g.val()}, {"GET", s}, {"GETSET", s, g.val()}, {"MSET", s, g.val(), g.key("s"), g.val()},
		{"MGET", s, g.key("s"), g.key("s")}, {"MSETNX", s, g.val(), g.key("s"), g.val()}, {"INCR", s},
		{"INCRBY", s, g.n(10)}, {"DECR", s}, {"DECRBY", s, g.n(5)}, {"INCRBYFLOAT", s, "0.5"},
		{"APPEND", s, g.val()}, {"STRLEN", s}, {"GETRANGE", s, "0", "-1"}, {"SETRANGE", s, g.n(4), g.val()},
		{"SETEX", s, "100", g.val()}, {"PSETEX", s, "100000", g.val()}, {"SETNX", s, g.val()}, {"GETDEL", s},
		{"GETEX", s, "EX", "100"}, {"SET", s, g.val(), "XX"}, {"SET", s, g.val(), "KEEPTTL"}, {"SET", s, g.val(), "GET"},
		{"LCS", s, g.key("s")},
		// keys
		{"DEL", s, g.key("l")}, {"UNLINK", s}, {"EXISTS", s, l, h}, {"EXPIRE", s, "100"}, {"PEXPIRE", h, "100000"},
		{"EXPIREAT", s, "4102444800"}, {"PERSIST", s}, {"TTL", s}, {"PTTL", s}, {"TYPE", s}, {"TYPE", z},
		{"RENAME", s, g.key("s")}, {"RENAMENX", s, g.key("s")}, {"COPY", s, g.key("s")}, {"TOUCH", s, l},
		{"OBJECT", "ENCODING", s}, {"EXPIRETIME", s}, {"PEXPIRETIME", s}, {"KEYS", "t:" + g.prefix + ":*"},
		// lists
		{"LPUSH", l, g.val(), g.val()}, {"RPUSH", l, g.val()}, {"LPOP", l}, {"RPOP", l}, {"LLEN", l},
		{"LRANGE", l, "0", "-1"}, {"LINDEX", l, g.n(3)}, {"LSET", l, "0", g.val()}, {"LREM", l, "0", g.val()},
		{"LTRIM", l, "0", g.n(5)}, {"LINSERT", l, "BEFORE", g.val(), g.val()}, {"LPOS", l, g.val()},
		{"LMOVE", l, g.key("l"), "LEFT", "RIGHT"}, {"RPOPLPUSH", l, g.key("l")}, {"LPUSHX", l, g.val()},
		{"RPUSHX", l, g.val()}, {"LMPOP", "2", l, g.key("l"), "LEFT"}, {"LPOP", l, "2"},
		// hashes
		{"HSET", h, "f" + g.n(3), g.val()}, {"HGET", h, "f" + g.n(3)}, {"HMGET", h, "f0", "f1"}, {"HGETALL", h},
		{"HDEL", h, "f" + g.n(3)}, {"HEXISTS", h, "f" + g.n(3)}, {"HINCRBY", h, "n", g.n(5)},
		{"HINCRBYFLOAT", h, "f", "1.25"}, {"HKEYS", h}, {"HVALS", h}, {"HLEN", h}, {"HSETNX", h, "f" + g.n(3), g.val()},
		{"HSTRLEN", h, "f" + g.n(3)}, {"HMSET", h, "a", g.val(), "b", g.val()},
		// sets
		{"SADD", st, g.val(), g.val()}, {"SREM", st, g.val()}, {"SMEMBERS", st}, {"SCARD", st},
		{"SISMEMBER", st, g.val()}, {"SMISMEMBER", st, "a", "b"}, {"SINTER", st, g.key("set")}, {"SUNION", st, g.key("set")},
		{"SDIFF", st, g.key("set")}, {"SINTERSTORE", g.key("set"), st, g.key("set")},
		{"SUNIONSTORE", g.key("set"), st, g.key("set")}, {"SDIFFSTORE", g.key("set"), st, g.key("set")},
		{"SMOVE", st, g.key("set"), g.val()}, {"SINTERCARD", "2", st, g.key("set")},
		// sorted sets
		{"ZADD", z, g.n(10), "m" + g.n(4)}, {"ZREM", z, "m" + g.n(4)}, {"ZSCORE", z, "m" + g.n(4)},
		{"ZINCRBY", z, "2", "m" + g.n(4)}, {"ZRANGE", z, "0", "-1", "WITHSCORES"}, {"ZRANGEBYSCORE", z, "-inf", "+inf"},
		{"ZREVRANGE", z, "0", "-1"}, {"ZRANK", z, "m" + g.n(4)}, {"ZREVRANK", z, "m" + g.n(4)}, {"ZCARD", z},
		{"ZCOUNT", z, "0", "5"}, {"ZLEXCOUNT", z, "-", "+"}, {"ZPOPMIN", z}, {"ZPOPMAX", z},
		{"ZUNIONSTORE", g.key("z"), "2", z, g.key("z")}, {"ZINTERSTORE", g.key("z"), "2", z, g.key("z")},
		{"ZMSCORE", z, "m0", "m1"}, {"ZRANGESTORE", g.key("z"), z, "0", "-1"}, {"ZREMRANGEBYSCORE", z, "0", "3"},
		{"ZREMRANGEBYRANK", z, "0", "0"}, {"ZUNION", "2", z, g.key("z")}, {"ZINTER", "2", z, g.key("z")},
		{"ZDIFF", "2", z, g.key("z")}, {"ZRANGEBYLEX", z, "-", "+"},
		// streams, with ids of their own
		{"XADD", x, strconv.Itoa(1+g.rng.Intn(1000)) + "-1", "f", g.val()}, {"XLEN", x}, {"XRANGE", x, "-", "+"},
		{"XREVRANGE", x, "+", "-"}, {"XDEL", x, "1-1"}, {"XTRIM", x, "MAXLEN", g.n(4)},
		// bitmaps and HyperLogLog
		{"SETBIT", b, g.n(64), g.n(2)}, {"GETBIT", b, g.n(64)}, {"BITCOUNT", b}, {"BITPOS", b, "1"},
		{"BITOP", "OR", g.key("bits"), b, g.key("bits")}, {"PFADD", g.key("hll"), g.val(), g.val()},
		{"PFCOUNT", g.key("hll")}, {"PFMERGE", g.key("hll"), g.key("hll"), g.key("hll")},
		// geo
		{"GEOADD", g.key("geo"), "13.36", "38.11", "m" + g.n(3)}, {"GEOPOS", g.key("geo"), "m0"},
		{"GEODIST", g.key("geo"), "m0", "m1"},
		// scripts on data keys, and the connection
		{"EVAL", "return redis.call('incrby', KEYS[1], ARGV[1])", "1", s, g.n(5)},
		{"EVAL", "return {KEYS[1], ARGV[1]}", "1", s, g.val()}, {"PING"}, {"ECHO", g.val()},
		// more of each type: scans of small keys (one call answers all,
		// in the order both sides keep), blocking pops with a short
		// timeout, consumer groups, sorts, bitfields
		{"SUBSTR", s, "0", "2"}, {"DUMP", s}, {"HSCAN", h, "0"}, {"SSCAN", st, "0"}, {"ZSCAN", z, "0"},
		{"BLPOP", l, "0.01"}, {"BRPOP", l, g.key("l"), "0.01"}, {"BZPOPMIN", z, "0.01"},
		{"BLMOVE", l, g.key("l"), "RIGHT", "LEFT", "0.01"}, {"XREAD", "COUNT", "2", "STREAMS", x, "0"},
		{"XGROUP", "CREATE", x, "g", "0", "MKSTREAM"}, {"XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", x, ">"},
		{"XACK", x, "g", "1-1"}, {"XPENDING", x, "g"}, {"GEOHASH", g.key("geo"), "m0"},
		{"GEOSEARCH", g.key("geo"), "FROMLONLAT", "13.36", "38.11", "BYRADIUS", "100", "km", "ASC"},
		{"SORT", l, "ALPHA"}, {"SORT_RO", l, "ALPHA", "LIMIT", "0", "2"},
		{"BITFIELD", b, "INCRBY", "u8", "0", g.n(5)}, {"BITFIELD_RO", b, "GET", "u8", "0"},
		{"ZREVRANGEBYSCORE", z, "+inf", "-inf"}, {"ZREVRANGEBYLEX", z, "+", "-"}, {"ZREMRANGEBYLEX", z, "-", "[m1"},
		{"ZDIFFSTORE", g.key("z"), "2", z, g.key("z")}, {"ZINTERCARD", "2", z, g.key("z")}, {"ZMPOP", "1", z, "MIN"},
		// bad input
		{"INCR"}, {"GET", s, s}, {"SET", s}, {"HSET", h, "f"}, {"LPUSH", l}, {"ZADD", z, "x", "m"},
		{"EXPIRE", s, "notanumber"}, {"SET", s, "v", "EX", "0"}, {"NOSUCHCOMMAND", s},
	}
	for {
		cmd := all[g.rng.Intn(len(all))]
		if g.slots && manySlots(cmd) {
			continue
		}
		if !g.voting || cmd[0] != "EVAL" || g.rng.Intn(10) == 0 {
			return cmd
		}
	}
}
