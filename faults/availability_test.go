package faults

import (
	"fmt"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// Availability of data. With a backend of its own (the application's
// Redis, not a voter), the application's data lives there alone: reads
// and writes of keys that no quorum holds as a lock must answer as a plain
// Redis would, whatever state the masters are in. Each case below starts
// three masters, a backend, the proxy binary and a plain redis-server,
// puts the masters in one state and runs the same data commands through
// the proxy and on the plain Redis: every reply must be the same, and
// none may wait for the passthrough timeout.

const (
	availNodeTimeout = 100 * time.Millisecond
	// availPassthrough is proxy.passthrough_timeout in these cases. A
	// command that waits on a master for it has waited far longer than
	// any quorum operation may (the node timeout, a few times over):
	// availBound sits between the two.
	availPassthrough = 5 * time.Second
	availBound       = availPassthrough / 2
	// availGuardWindow keeps a restarted master guarded for the whole
	// case.
	availGuardWindow = 120 * time.Second
)

// masterState is a state of the masters that a case puts them in, after
// the data and the lock were written: apply returns once the proxy sees
// it (a restarted master is under its restart guard).
type masterState struct {
	name string
	// quorum: a quorum of masters can still vote.
	quorum bool
	apply  func(t *testing.T, ms []*redistest.Server, p *redistest.Proxy)
}

var masterStates = []masterState{
	{"all up", true, func(*testing.T, []*redistest.Server, *redistest.Proxy) {}},
	{"one down", true, func(_ *testing.T, ms []*redistest.Server, _ *redistest.Proxy) { ms[2].Kill() }},
	{"two down", false, func(_ *testing.T, ms []*redistest.Server, _ *redistest.Proxy) { ms[1].Kill(); ms[2].Kill() }},
	{"one stalled", true, func(t *testing.T, ms []*redistest.Server, _ *redistest.Proxy) { stall(t, ms[2]) }},
	{"all stalled", false, func(t *testing.T, ms []*redistest.Server, _ *redistest.Proxy) {
		for _, m := range ms {
			stall(t, m)
		}
	}},
	{"one guarded", true, func(t *testing.T, ms []*redistest.Server, p *redistest.Proxy) {
		ms[2].Wipe()
		waitGuarded(t, p, 1)
	}},
	{"all guarded", false, func(t *testing.T, ms []*redistest.Server, p *redistest.Proxy) {
		for _, m := range ms {
			m.Wipe()
		}
		waitGuarded(t, p, 3)
	}},
}

// stall freezes m (SIGSTOP) until the test ends.
func stall(t *testing.T, m *redistest.Server) {
	m.Stop()
	t.Cleanup(m.Cont)
}

// waitGuarded waits until the proxy has n masters under the restart
// guard (INFO redlock's masters_guarded).
func waitGuarded(t *testing.T, p *redistest.Proxy, n int) {
	t.Helper()
	want := fmt.Sprintf("masters_guarded:%d\r", n)
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		rs, err := sendRaw(p.Addr, [][]string{{"INFO", "redlock"}}, 5*time.Second)
		if err == nil && len(rs) == 1 {
			if last = rs[0].str; strings.Contains(last, want) {
				return
			}
		}
	}
	t.Fatalf("the proxy does not see %d masters guarded:\n%s", n, last)
}

// availProxy starts the proxy binary in front of masters, with backend
// (empty: the first master votes and is the backend) and lockKeys; extra
// lines go to [proxy].
func availProxy(t *testing.T, masters []string, backend, lockKeys, extra string) *redistest.Proxy {
	if backend != "" {
		extra += fmt.Sprintf("backend = %q\n", backend)
	}
	config := func(listen string) string {
		return fmt.Sprintf(`[proxy]
listen = %q
lock_keys = [%q]
passthrough_timeout = %q
%s[redlock]
masters = [%s]
node_timeout = %q
retry_count = 2
retry_delay = "30ms"
restart_guard = true
restart_guard_window = %q
[log]
level = "error"
format = "json"
`, listen, lockKeys, availPassthrough, extra, redistest.Quote(masters), availNodeTimeout, availGuardWindow)
	}
	// A new deployment: the masters vote at once.
	first := redistest.StartProxy(t, binary, config)
	first.Kill()
	initMasters(t, binary, first.Config)
	p := redistest.StartProxy(t, binary, config)
	waitGuarded(t, p, 0)
	return p
}

// dataBefore is written before the masters change state: data the
// commands after it read and change.
var dataBefore = [][]string{
	{"SET", "d:pre", "kept"}, {"HSET", "d:preh", "f", "1"}, {"RPUSH", "d:prel", "x", "y"}, {"SET", "d:pret", "t", "EX", "1000"},
	{"INCR", "d:pren"},
}

// dataCommands is the data workload, run once the masters are in their
// state: each command on plain data keys, and reads of keys that are
// absent (which, where every key is a lock key, the quorum is asked
// about too).
var dataCommands = [][]string{
	{"GET", "d:pre"}, {"MGET", "d:pre", "d:pren", "d:absent"}, {"EXISTS", "d:pre", "d:preh", "d:absent"},
	{"SET", "d:s", "v"}, {"GET", "d:s"}, {"SET", "d:s", "w", "XX", "GET"}, {"GET", "d:s"},
	{"INCR", "d:n"}, {"INCR", "d:n"}, {"INCRBY", "d:pren", "10"}, {"GET", "d:n"},
	{"MSET", "d:m1", "a", "d:m2", "b"}, {"MGET", "d:m1", "d:m2", "d:s", "d:n", "d:absent"},
	{"EXPIRE", "d:s", "100"}, {"TTL", "d:s"}, {"PTTL", "d:s"}, {"TTL", "d:pret"}, {"PERSIST", "d:pret"}, {"TTL", "d:pret"},
	{"PEXPIRE", "d:m1", "100000"}, {"PTTL", "d:m1"}, {"EXPIREAT", "d:m2", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)},
	{"HSET", "d:h", "a", "1", "b", "2"}, {"HGET", "d:h", "a"}, {"HINCRBY", "d:preh", "f", "5"}, {"HGETALL", "d:preh"},
	{"LPUSH", "d:l", "a", "b"}, {"LRANGE", "d:l", "0", "-1"}, {"LPOP", "d:prel"}, {"LRANGE", "d:prel", "0", "-1"},
	{"SETEX", "d:se", "100", "v"}, {"TTL", "d:se"}, {"GETEX", "d:se", "PERSIST"}, {"TTL", "d:se"}, {"GETDEL", "d:se"}, {"GET", "d:se"},
	{"SETNX", "d:pre", "other"}, {"GET", "d:pre"},
	{"EXISTS", "d:s", "d:n", "d:h", "d:l", "d:absent"}, {"TYPE", "d:h"},
	// Keys that are absent: the reads, the writes that find nothing.
	{"GET", "d:absent"}, {"TTL", "d:absent"}, {"PTTL", "d:absent"}, {"EXISTS", "d:absent"}, {"GETDEL", "d:absent"},
	{"EXPIRE", "d:absent", "10"}, {"PERSIST", "d:absent"}, {"DEL", "d:absent"}, {"UNLINK", "d:absent"},
	{"HGET", "d:absent", "f"}, {"GET", "d:absent"},
	// Deletes, expiries and what follows them.
	{"DEL", "d:s", "d:absent"}, {"GET", "d:s"}, {"UNLINK", "d:m1", "d:m2"}, {"EXISTS", "d:m1", "d:m2"},
	{"EXPIRE", "d:n", "0"}, {"GET", "d:n"}, {"DEL", "d:h", "d:l"}, {"EXISTS", "d:h", "d:l"},
	{"DEL", "d:pre", "d:preh", "d:prel", "d:pret", "d:pren"}, {"GET", "d:pre"}, {"DBSIZE"},
	// A key written again after it was deleted.
	{"SET", "d:s", "again"}, {"GET", "d:s"}, {"DEL", "d:s"},
}

// sameData compares a reply of the proxy with the plain Redis's: exactly,
// but TTLs within a second, and HGETALL's pairs in any order.
func sameData(cmd []string, got, want reply) bool {
	if reflect.DeepEqual(got, want) {
		return true
	}
	switch strings.ToLower(cmd[0]) {
	case "ttl", "pttl":
		g, gok := got.int()
		w, wok := want.int()
		tol := int64(1)
		if strings.EqualFold(cmd[0], "pttl") {
			tol = 1000
		}
		return gok && wok && (g < 0) == (w < 0) && (g < 0 && g == w || g >= 0 && g-w <= tol && w-g <= tol)
	case "hgetall":
		return got.kind == want.kind && len(got.arr) == len(want.arr) && pairs(got) == pairs(want)
	}
	return false
}

func pairs(r reply) string {
	var ps []string
	for i := 0; i+1 < len(r.arr); i += 2 {
		ps = append(ps, r.arr[i].str+"="+r.arr[i+1].str)
	}
	return fmt.Sprint(sortStrings(ps))
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// timedDo runs one command on rc and returns its reply and how long it
// took; a connection error fails the test.
func timedDo(t *testing.T, rc *rawConn, cmd []string) (reply, time.Duration) {
	t.Helper()
	start := time.Now()
	rs, err := rc.do([][]string{cmd}, 12*availPassthrough)
	took := time.Since(start)
	if err != nil || len(rs) != 1 {
		t.Fatalf("%q: no reply after %s: %v", cmd, took.Round(time.Millisecond), err)
	}
	return rs[0], took
}

// setupDo sends a command of a test's setup, every master up: a NOQUORUM
// there means the masters did not answer in time on a loaded machine, not
// what the test is about, and the command is sent again (for up to 10 s).
//
// A SET NX tried again after a try that failed (here after a NOQUORUM,
// or within the proxy, which tries an acquire retry_count times) may
// answer nil: the failed try's writes are still on some masters (their
// rollback in flight or in doubt), or landed on a quorum after all, and
// the key holds the same value, as a SET NX repeated on one Redis answers
// nil. The key counts as set once a read shows the value; until then the
// SET is tried again.
func setupDo(t *testing.T, rc *rawConn, cmd []string) reply {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, _ := timedDo(t, rc, cmd)
		if r.null && strings.EqualFold(cmd[0], "SET") && slices.ContainsFunc(cmd, func(a string) bool { return strings.EqualFold(a, "NX") }) {
			if g, _ := timedDo(t, rc, []string{"GET", cmd[1]}); !g.isErr() && !g.null && g.str == cmd[2] {
				return g
			}
			if time.Now().After(deadline) {
				return r
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if !r.isErr() || !strings.HasPrefix(r.str, "NOQUORUM") || time.Now().After(deadline) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runData runs cmds through the proxy and on the plain Redis and fails on
// any reply that differs, and on any command that waited as long as
// availBound.
func runData(t *testing.T, proxyAddr, plainAddr string, cmds [][]string) {
	t.Helper()
	p, err := dialRaw(proxyAddr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r, err := dialRaw(plainAddr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var slowest time.Duration
	for i, cmd := range cmds {
		got, took := timedDo(t, p, cmd)
		want, _ := timedDo(t, r, cmd)
		if !sameData(cmd, got, want) {
			t.Errorf("command %d %q:\n  proxy %s\n  Redis %s", i, cmd, got.short(), want.short())
		}
		if took >= availBound {
			t.Errorf("command %d %q took %s: it waited on the masters (passthrough timeout %s)", i, cmd, took.Round(time.Millisecond), availPassthrough)
		}
		slowest = max(slowest, took)
	}
	t.Logf("%d data commands, each as on a plain Redis; the slowest took %s", len(cmds), slowest.Round(time.Millisecond))
}

// TestDataAvailableWithOwnBackend: with a backend of its own, data
// commands answer as on a plain Redis, without waiting, in every state
// of the masters: down, stalled, restarted under the restart guard, with
// a quorum left and without one. In mixed mode (every key a lock key, or
// lock keys under a prefix with proxy.lock_key_commands = "backend") and
// with lock keys under a prefix alone.
func TestDataAvailableWithOwnBackend(t *testing.T) {
	configs := []struct{ name, lockKeys, extra string }{
		{"mixed_every_key", "*", ""},
		{"lock_prefix", "lock:*", ""},
		{"lock_prefix_mixed", "lock:*", "lock_key_commands = \"backend\"\n"},
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			for _, st := range masterStates {
				t.Run(strings.ReplaceAll(st.name, " ", "_"), func(t *testing.T) {
					ms := redistest.StartN(t, 3, redistest.Durable...)
					be, plain := redistest.Start(t), redistest.Start(t)
					p := availProxy(t, redistest.Addrs(ms), be.Addr, cfg.lockKeys, cfg.extra)
					runData(t, p.Addr, plain.Addr, dataBefore)
					st.apply(t, ms, p)
					runData(t, p.Addr, plain.Addr, dataCommands)
				})
			}
		})
	}
}

// TestLockKeysWithoutQuorumOwnBackend: in mixed mode (a backend of its
// own, every key a lock key), keys that a quorum holds as locks — taken by
// SET NX (with their mirror on the backend), by LOCK.ACQUIRE (without
// one), a rate limiter's SET NX EX then INCR — in each state of the
// masters. With a quorum they answer as on one Redis. Without one:
//   - reads answer from the backend, and where it holds nothing, nil (the
//     backend's "absent" stands: a read that says "not held" never leads
//     to a second holder, since an acquire needs the quorum);
//   - DEL, GETDEL and EXPIRE answer NOQUORUM where a master that answered
//     holds the key (two masters down: the third answers): "deleted"
//     would tell the client the key is free while the lock stays on the
//     masters. Where no master answers at all (every master stalled) or
//     none that counts holds it (every master restarted empty, guarded),
//     nothing shows a lock, and the backend's answer stands, as for data;
//   - in every state, the key is never granted to another client while
//     the lock may live.
func TestLockKeysWithoutQuorumOwnBackend(t *testing.T) {
	const noQuorum = "NOQUORUM"
	for _, st := range masterStates {
		t.Run(strings.ReplaceAll(st.name, " ", "_"), func(t *testing.T) {
			ms := redistest.StartN(t, 3, redistest.Durable...)
			be := redistest.Start(t)
			p := availProxy(t, redistest.Addrs(ms), be.Addr, "*", "")
			rc, err := dialRaw(p.Addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			for _, cmd := range [][]string{{"SET", "held", "tok", "NX", "PX", "60000"}, {"SET", "held2", "tok", "NX", "PX", "60000"},
				{"SET", "held3", "tok", "NX", "PX", "60000"}, {"SET", "rl", "0", "EX", "60", "NX"}, {"INCR", "rl"},
				{"LOCK.ACQUIRE", "nm", "60000", "TOKEN", "ntok"}} {
				if r := setupDo(t, rc, cmd); r.isErr() || r.null {
					t.Fatalf("%q: %s", cmd, r.short())
				}
			}
			st.apply(t, ms, p)
			// What a command answers in this state: with a quorum, as on
			// one Redis; without one, lockAnswer where a master that
			// answers holds the locks (two down), the backend's answer
			// where none does.
			noneAnswers := !st.quorum && st.name != "two down"
			pick := func(redis, lockAnswer, backend string) string {
				switch {
				case st.quorum:
					return redis
				case noneAnswers:
					return backend
				}
				return lockAnswer
			}
			for _, c := range []struct {
				cmd  []string
				want string
			}{
				{[]string{"GET", "held"}, `"tok"`},
				{[]string{"GET", "nm"}, pick(`"ntok"`, "nil", "nil")},
				{[]string{"EXISTS", "held", "nm", "rl"}, pick(`"3"`, `"2"`, `"2"`)},
				{[]string{"PTTL", "nm"}, pick("ttl", `"-2"`, `"-2"`)},
				{[]string{"GET", "rl"}, `"1"`},
				{[]string{"DEL", "held"}, pick(`"1"`, noQuorum, `"1"`)},
				{[]string{"EXPIRE", "held2", "100"}, pick(`"1"`, noQuorum, `"1"`)},
				{[]string{"GETDEL", "held3"}, pick(`"tok"`, noQuorum, `"tok"`)},
				{[]string{"DEL", "rl"}, pick(`"1"`, noQuorum, `"1"`)},
				{[]string{"DEL", "nm"}, pick(`"1"`, noQuorum, `"0"`)},
				// Free on one Redis; here, while the lock may live, never
				// granted to another holder.
				{[]string{"SET", "held", "other", "NX", "PX", "10000"}, pick(`"OK"`, noQuorum, noQuorum)},
				{[]string{"SET", "nm", "other", "NX", "PX", "10000"}, pick(`"OK"`, noQuorum, noQuorum)},
			} {
				r, took := timedDo(t, rc, c.cmd)
				got := r.short()
				ok := got == c.want || c.want == noQuorum && r.isErr() && strings.HasPrefix(r.str, noQuorum)
				if c.want == "ttl" {
					n, isInt := r.int()
					ok = isInt && n > 0
				}
				if !ok {
					t.Errorf("%q: %s, want %s", c.cmd, got, c.want)
				}
				if took >= availBound {
					t.Errorf("%q took %s", c.cmd, took.Round(time.Millisecond))
				}
			}
		})
	}
}

// TestDataWithVotingBackend: with a voting backend (proxy.backend empty:
// the first master holds the data too; lock keys under a prefix), data
// lives on one master and shares its fate; docs/operations.md has the
// table ("Data when masters fail"). The other masters down: data answers
// as on one Redis. The first master down: every data command answers an
// error at once. Stalled: each waits for proxy.passthrough_timeout, then
// answers an error. Restarted: a command on a connection the restart
// closed answers an error once; then data is served, as the master kept it
// (all of it with appendfsync always, none when it restarted empty).
// errorsOrRefusedEach runs cmds through the proxy and wants an error for
// each, each within bound.
func errorsOrRefusedEach(t *testing.T, addr string, cmds [][]string, bound time.Duration) {
	t.Helper()
	rc, err := dialRaw(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for _, cmd := range cmds {
		r, took := timedDo(t, rc, cmd)
		if !r.isErr() {
			t.Errorf("%q: %s, want an error", cmd, r.short())
		}
		if took >= bound {
			t.Errorf("%q took %s (bound %s)", cmd, took.Round(time.Millisecond), bound)
		}
	}
}

func TestDataWithVotingBackend(t *testing.T) {
	const backendErr = "ERR redlock-proxy: passthrough backend"
	few := [][]string{{"GET", "d:pre"}, {"SET", "d:s", "v"}, {"INCR", "d:n"}, {"GET", "d:absent"}, {"HSET", "d:h", "f", "1"}, {"DEL", "d:pre"}}
	// errorsEach runs cmds through the proxy and wants an error of the
	// backend's for each, each within bound.
	errorsEach := func(t *testing.T, addr string, cmds [][]string, bound time.Duration) {
		rc, err := dialRaw(addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		for _, cmd := range cmds {
			r, took := timedDo(t, rc, cmd)
			if !r.isErr() || !strings.HasPrefix(r.str, backendErr) {
				t.Errorf("%q: %s, want %s …", cmd, r.short(), backendErr)
			}
			if took >= bound {
				t.Errorf("%q took %s (bound %s)", cmd, took.Round(time.Millisecond), bound)
			}
		}
	}
	start := func(t *testing.T) ([]*redistest.Server, *redistest.Proxy) {
		ms := redistest.StartN(t, 3, redistest.Durable...)
		p := availProxy(t, redistest.Addrs(ms), "", "lock:*", "")
		rc, err := dialRaw(p.Addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		for _, cmd := range append(append([][]string{}, dataBefore...), []string{"SET", "lock:a", "tok", "NX", "PX", "60000"}) {
			if r := setupDo(t, rc, cmd); r.isErr() {
				t.Fatalf("%q: %s", cmd, r.short())
			}
		}
		return ms, p
	}
	t.Run("others_down", func(t *testing.T) {
		ms, p := start(t)
		plain := redistest.Start(t)
		if _, err := sendRaw(plain.Addr, dataBefore, time.Second); err != nil {
			t.Fatal(err)
		}
		ms[1].Kill()
		ms[2].Kill()
		runData(t, p.Addr, plain.Addr, votingData())
	})
	t.Run("first_down", func(t *testing.T) {
		ms, p := start(t)
		ms[0].Kill()
		errorsEach(t, p.Addr, few, availBound)
	})
	t.Run("first_stalled", func(t *testing.T) {
		ms, p := start(t)
		stall(t, ms[0])
		// Each waits for the passthrough timeout; a generous bound above
		// it (the wait is the backend's, not the masters').
		errorsEach(t, p.Addr, few[:3], 4*availPassthrough)
	})
	t.Run("first_stalled_before_the_proxy_started", func(t *testing.T) {
		// The proxy has not read where commands' keys are (the backend's
		// COMMAND) when the backend stalls: a command whose keys the
		// boundary looks up several times waits for the backend once,
		// not once a lookup.
		ms := redistest.StartN(t, 3, redistest.Durable...)
		p := availProxy(t, redistest.Addrs(ms), "", "lock:*", "")
		p.Kill()
		stall(t, ms[0])
		p.Start()
		errorsOrRefusedEach(t, p.Addr, [][]string{{"INCR", "d:n"}, {"HSET", "d:h", "f", "1"}, {"LPUSH", "d:l", "x"}}, 2*availPassthrough)
	})
	for _, restart := range []struct {
		name string
		do   func(*redistest.Server)
		kept bool
	}{{"first_restarted_empty", (*redistest.Server).Wipe, false}, {"first_restarted_with_its_data", (*redistest.Server).Restart, true}} {
		t.Run(restart.name, func(t *testing.T) {
			ms, p := start(t)
			plain := redistest.Start(t)
			if restart.kept {
				if _, err := sendRaw(plain.Addr, dataBefore, time.Second); err != nil {
					t.Fatal(err)
				}
			}
			restart.do(ms[0])
			// Each backend connection the restart closed answers an error
			// once (a command on it may have run before the restart: it
			// is not sent again); the proxy holds a handful.
			failed := 0
			for i, inRow := 0, 0; inRow < 10; i++ {
				// GET goes on a shared connection, EXISTS on a pooled one.
				cmd := [][]string{{"GET", "d:absent"}, {"EXISTS", "d:absent"}}[i%2]
				rs, err := sendRaw(p.Addr, [][]string{cmd}, availBound)
				switch {
				case err != nil || len(rs) != 1:
					t.Fatal(err)
				case !rs[0].isErr():
					inRow++
					continue
				case !strings.HasPrefix(rs[0].str, backendErr) || failed == 100:
					t.Fatalf("after the restart, %d errors, then: %s", failed, rs[0].short())
				}
				failed++
				inRow = 0
			}
			t.Logf("after the restart, %d commands answered an error", failed)
			runData(t, p.Addr, plain.Addr, votingData())
		})
	}
}

// votingData is dataCommands but DBSIZE: on a voting backend the locks
// and the proxy's records are keys of the same database.
func votingData() [][]string {
	var out [][]string
	for _, c := range dataCommands {
		if c[0] != "DBSIZE" {
			out = append(out, c)
		}
	}
	return out
}

// initMasters runs the binary's -init-masters on the configuration, again
// (up to three times) when a master did not answer in time: a loaded
// machine can keep one past the connect timeout while the suites run.
func initMasters(t *testing.T, bin, config string) {
	t.Helper()
	for try := 1; ; try++ {
		out, err := exec.Command(bin, "-config", config, "-init-masters").CombinedOutput()
		if err == nil {
			return
		}
		if try == 3 || !strings.Contains(string(out), "i/o timeout") {
			t.Fatalf("-init-masters (try %d): %v\n%s", try, err, out)
		}
		t.Logf("-init-masters (try %d): %v: %s", try, err, out)
	}
}
