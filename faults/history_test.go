package faults

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"net"
	"slices"
	"sort"
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

// The randomized history test. Clients of two proxy processes in front of
// three masters (each persisting every write, each behind a fault relay)
// run a random mix of what lock clients do — SET NX with the unlock script
// and extend scripts (replacing and adding to the TTL), LOCK.ACQUIRE with
// WAIT and REENTRANT, LOCK.EXTEND, leases held while their connection
// answers, RESET, disconnects in the middle of a request, FLUSHALL through
// the proxy — while a schedule drawn from the same seed wipes masters'
// data, switches their AOF off before a crash, restarts them, stalls them,
// delays and resets their connections, fails them over to their replicas,
// makes them evict keys (failover_test.go), and restarts the proxies. Every
// lock a client is told it holds becomes an interval on one monotonic
// clock, from the reply to the end of the validity the client may rely on
// (pushed out by each extend that succeeded, cut at its release); the
// checker fails on any two intervals of one key held by different tokens
// that overlap.
//
// What a client may rely on, lock by lock:
//   - SET … NX PX ttl sent at s: s + ttl − drift (what node-redlock and
//     redsync compute);
//   - an extend that replaced the TTL with ttl', sent at s': s' + ttl' −
//     drift; one that added a to it: the previous end + a. One answered
//     with an error (NOQUORUM) may have taken effect on the masters that
//     answered: after a replacing one, the earlier of the previous end and
//     s' + ttl' − drift; one answered "not held" ends the lock;
//   - LOCK.ACQUIRE and LOCK.EXTEND sent at s, answered with validity v:
//     s + v;
//   - a lease: from its grant, s + v, then, for each PING on its
//     connection sent at s and answered, s + lease_ttl/3 (the proxy
//     answers nothing on a connection whose lease has less than that
//     left), until the connection is closed or RESET.
//
// The proxies' backend — the first master (a voting backend, the default)
// or a redis-server of their own — and their lock keys — every key, or
// those under a prefix — are drawn from the seed and printed.
//
// Beside the clients, an adversary drawn from the same seed sends what no
// lock client would (adversary_test.go); what it may legitimately do to a
// client's lock — what would end the lock on one Redis — ends the
// client's interval at that command's send. A prober per proxy measures
// how long the proxy served no lock operation at all; the run also fails
// when that exceeds maxDenial.
//
// One command runs it for as long as wanted, with its seed printed and
// reusable (the same seed draws the same choices; timings differ):
//
//	bash scripts/faults.sh 10m [seed] [adversary actions per second]
//
// CI runs a short schedule, and each negative control: the same test with
// one guard switched off, which must make the checker report a violation.

var (
	historyLog      = flag.String("history.log", "error", "log level of the proxies in the history test (their lines go to stderr)")
	historySeed     = flag.Int64("history.seed", 0, "seed of the randomized history test (0: from the clock)")
	historyDuration = flag.Duration("history.duration", 0, "how long the randomized history test runs (0: the short schedule)")
	historyAdverse  = flag.Float64("history.adversary", -1, "the adversary's actions per second in the randomized history test (-1: the schedule's)")
	historyFaults   = flag.String("history.faults", "", "weights of faults of the full schedule to change, as kind=weight,… (e.g. failover=4,evict=4)")
)

const (
	guardWindow = 3 * time.Second         // restart_guard_window
	leaseTTL    = 1500 * time.Millisecond // proxy.lease_ttl
	// maxLife bounds what is left of a lock after any write (but with
	// schedule.longExtends): below the guard window, as the proxies'
	// documentation asks of every client.
	maxLife = 2 * time.Second
)

// drift is the drift allowance of a TTL, as the proxies' configuration has
// it (drift_factor 0.01).
func drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*0.01) + 2*time.Millisecond
}

// holding is one lock a client was told it holds: [start, end) on the
// history's clock, for token holder.
type holding struct {
	key, holder, kind string
	client            int           // -1: the adversary's (adversarySpec.relies)
	action            int           // the adversary's: the action that took it
	sent, start, end  time.Duration // sent: when the grant was asked for
	steps             []string      // what the client did and was told, for a violation's report
}

// history records what the clients were told and what the schedule did.
type history struct {
	mu sync.Mutex
	// disrupts counts the adversary's actions that may flush or swap the
	// backend's databases (a script's SWAPDB or FLUSHALL included): the
	// data client does not hold its keys against them.
	disrupts atomic.Int64
	// kills counts the adversary's CLIENT KILLs: through a proxy they
	// close the proxy's clients, the data client's among them.
	kills    atomic.Int64
	epoch    time.Time
	holds    []*holding
	outcome  map[string]int
	faults   []string
	adverses map[string][]*adverse // per key: the adversary's commands that may end its locks
	actions  []advLog              // everything the adversary did
	probes   [][]probe             // per proxy
	// The data client's (data_test.go): operations and commands checked,
	// and the replies that broke its model.
	dataOps, dataCmds int
	dataBad           []string
}

// probe is one lock operation of a prober (prober): answered (granted or
// refused as held) or not (NOQUORUM, an error, no reply).
type probe struct {
	at       time.Duration
	answered bool
}

func newHistory() *history {
	return &history{epoch: time.Now(), outcome: map[string]int{}, adverses: map[string][]*adverse{}}
}

func (h *history) now() time.Duration { return time.Since(h.epoch) }

func (h *history) count(what string) {
	h.mu.Lock()
	h.outcome[what]++
	h.mu.Unlock()
}

func (h *history) fault(format string, args ...any) {
	h.mu.Lock()
	h.faults = append(h.faults, fmt.Sprintf("%8s ", h.now().Round(time.Millisecond))+fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

// begin records a grant asked for at sent, answered at start, relied on
// until end.
func (h *history) begin(key, token, kind string, client int, sent, start, end time.Duration) *holding {
	g := &holding{key: key, holder: token, kind: kind, client: client, sent: sent, start: start, end: end}
	h.mu.Lock()
	h.holds = append(h.holds, g)
	h.mu.Unlock()
	return g
}

// setEnd moves a holding's end (an extend that succeeded).
func (h *history) setEnd(g *holding, end time.Duration) {
	h.mu.Lock()
	g.end = end
	h.mu.Unlock()
}

// step notes what the client of g did, sent at sent.
func (h *history) step(g *holding, sent time.Duration, format string, args ...any) {
	h.mu.Lock()
	g.steps = append(g.steps, fmt.Sprintf("sent %s: ", sent.Round(time.Millisecond))+fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

// end reads a holding's end.
func (h *history) endOf(g *holding) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return g.end
}

// cut ends a holding at at, if it had not ended before (a release).
func (h *history) cut(g *holding, at time.Duration) {
	h.mu.Lock()
	g.end = min(g.end, at)
	h.mu.Unlock()
}

// adverse records that a command sent at sent may end the locks of key
// (ownOnly: only the adversary's own), until settle says until when it may
// take effect.
func (h *history) adverse(key string, sent time.Duration, what string, ownOnly bool, action int) *adverse {
	a := &adverse{key: key, sent: sent, until: -1, what: what, ownOnly: ownOnly, action: action}
	h.mu.Lock()
	h.adverses[key] = append(h.adverses[key], a)
	h.mu.Unlock()
	return a
}

// settle records until when an adverse command may take effect (-2:
// never, it was not run).
func (h *history) settle(a *adverse, until time.Duration) {
	h.mu.Lock()
	a.until = until
	h.mu.Unlock()
}

// acted records an action of the adversary.
func (h *history) acted(l advLog) {
	h.mu.Lock()
	h.actions = append(h.actions, l)
	h.mu.Unlock()
}

// liveHolders lists the holders of key that an honest client may still
// rely on, or soon may have: holdings that have not ended a second ago.
func (h *history) liveHolders(key string) []string {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, g := range h.holds {
		if g.key == key && g.client >= 0 && g.end > now-time.Second {
			out = append(out, g.holder)
		}
	}
	return out
}

// probed records a prober's operation through proxy p.
func (h *history) probed(p int, answered bool) {
	at := h.now()
	h.mu.Lock()
	for len(h.probes) <= p {
		h.probes = append(h.probes, nil)
	}
	h.probes[p] = append(h.probes[p], probe{at: at, answered: answered})
	h.mu.Unlock()
}

// denials lists, per proxy, the longest time in which its prober got no
// answer (only NOQUORUM and errors, at least three of them), and when it
// began.
func (h *history) denials() (longest []time.Duration, from []time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ps := range h.probes {
		var best, bestFrom, last time.Duration
		failed := 0
		for _, p := range ps {
			if !p.answered {
				failed++
				continue
			}
			if failed >= 3 && p.at-last > best {
				best, bestFrom = p.at-last, last
			}
			last, failed = p.at, 0
		}
		if n := len(ps); n > 0 && failed >= 3 && ps[n-1].at-last > best {
			best, bestFrom = ps[n-1].at-last, last
		}
		longest, from = append(longest, best), append(from, bestFrom)
	}
	return longest, from
}

// endAt is when the checker takes holding g to end: its end, or the send
// of the first adversary command that may have ended it on one Redis
// while it was held or being granted (from its send: the lock may be
// written on the masters before the grant is answered).
func (h *history) endAt(g *holding, now time.Duration) time.Duration {
	end, _ := h.endedBy(g, now)
	return end
}

// endedBy is endAt, and the command that ended g early (nil if none).
func (h *history) endedBy(g *holding, now time.Duration) (time.Duration, *adverse) {
	end := g.end
	var by *adverse
	for _, a := range h.adverses[g.key] {
		if a.ownOnly && g.client >= 0 || a.action != 0 && a.action == g.action {
			continue
		}
		until := a.until
		switch {
		case until == -2:
			continue // not run
		case until < 0:
			until = now + lateBound // still in flight
		}
		if a.sent < end && until > g.sent {
			end, by = max(g.start, a.sent), a
		}
	}
	return end, by
}

// dataOp counts an operation of the data client, of n commands.
func (h *history) dataOp(n int) {
	h.mu.Lock()
	h.dataOps++
	h.dataCmds += n
	h.mu.Unlock()
}

// dataViolation records a data reply that is an error or differs from
// the data client's model where neither may happen, to an operation sent
// at sent.
func (h *history) dataViolation(sent time.Duration, s string) {
	at := h.now()
	h.mu.Lock()
	h.dataBad = append(h.dataBad, fmt.Sprintf("data: at %s, %s%s", at.Round(time.Millisecond), s, h.actionsBefore("data:", sent-time.Second, at, "the reply")))
	h.mu.Unlock()
}

// dataViolations lists what dataViolation recorded.
func (h *history) dataViolations() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.dataBad)
}

// held counts the locks the clients were told they hold.
func (h *history) held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.holds)
}

// violations lists every two holdings of one key by different tokens that
// overlap.
func (h *history) violations() []string {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	type span struct {
		*holding
		end time.Duration
	}
	byKey := map[string][]span{}
	for _, g := range h.holds {
		if end := h.endAt(g, now); end > g.start {
			byKey[g.key] = append(byKey[g.key], span{g, end})
		}
	}
	var out []string
	for key, gs := range byKey {
		sort.Slice(gs, func(i, j int) bool { return gs[i].start < gs[j].start })
		for i := 1; i < len(gs); i++ {
			for j := 0; j < i; j++ {
				if gs[j].end > gs[i].start && gs[j].holder != gs[i].holder {
					out = append(out, fmt.Sprintf("%s: %s by client %d held [%s, %s] while %s by client %d was granted at %s\n    first: %s\n    second: %s%s",
						key, gs[j].kind, gs[j].client, gs[j].start.Round(time.Millisecond), gs[j].end.Round(time.Millisecond),
						gs[i].kind, gs[i].client, gs[i].start.Round(time.Millisecond),
						strings.Join(gs[j].steps, "; "), strings.Join(gs[i].steps, "; "),
						h.actionsBefore(key, gs[j].start-time.Second, gs[i].start, "the second grant")))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// actionsBefore lists the adversary's actions in [from, to] that name
// key (up to 12, the last ones), and the last 4 that do not (a write to
// the proxy's records or a script acts on every key), for a violation's
// report.
func (h *history) actionsBefore(key string, from, to time.Duration, before string) string {
	var lines []string
	naming, others := 0, 0
	for i := len(h.actions) - 1; i >= 0; i-- {
		l := h.actions[i]
		if l.at < from {
			break
		}
		if l.at > to {
			continue
		}
		mark := " "
		if strings.Contains(l.what, key) {
			if naming++; naming > 12 {
				continue
			}
			mark = "*"
		} else if others++; others > 4 {
			continue
		}
		ends := ""
		if len(l.ends) > 0 {
			ends = " (may end the locks of " + strings.Join(l.ends, ", ") + ")"
		}
		lines = append(lines, fmt.Sprintf("      %s%8s proxy %d, %s: %s -> %s%s", mark, l.at.Round(time.Millisecond), l.proxy, l.kind, clipLine(l.what, 300), clipLine(l.answer, 200), ends))
	}
	if len(lines) == 0 {
		return ""
	}
	slices.Reverse(lines)
	return "\n    the adversary's actions before " + before + " (* names the key; of the others, the last 4):\n" + strings.Join(lines, "\n")
}

func clipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// schedule is one run of the test: which guards are off, which faults the
// schedule draws and which operations the clients do, with their weights.
type schedule struct {
	name           string
	guardsOff      []string // REDLOCK_PROXY_UNSAFE_GUARDS_OFF
	noRestartGuard bool
	unknownScripts string // "passthrough": the guard backend-scripts off
	faults         map[string]int
	ops            map[string]int
	longExtends    bool             // every SET NX is extended, beyond the guard window
	pause          [2]time.Duration // between faults; default 300 ms to 1.5 s
	oneProxy       bool             // clients use proxy 0 only
	adversary      adversarySpec    // the adversarial client (adversary_test.go)
	// backend: "voting" (the first master, the default of proxy.backend)
	// or "own" (a redis-server of its own); lockKeys: proxy.lock_keys, "*"
	// or "lock:*". Empty: drawn from the seed.
	backend, lockKeys string
	// maxDenial, when set, bounds how long a prober may get no answer
	// through a proxy (denials): a longer denial fails the run.
	maxDenial time.Duration
	// data: goroutines of the data client (data_test.go); 0: none.
	data int
}

// fullSchedule is the schedule of the positive run: every fault and every
// operation.
var fullSchedule = schedule{
	name: "full",
	faults: map[string]int{"wipe": 2, "double-wipe": 1, "aof-off": 2, "restart": 2, "stall": 3, "long-stall": 1,
		"double-stall": 1, "delay": 3, "reset": 2, "proxy-restart": 2, "flush": 1, "split-flush": 1, "lose-backend": 1,
		"failover": 1, "failover-pause": 1, "evict": 1},
	ops:       map[string]int{"set-nx": 12, "native": 6, "lease": 4, "pipelined": 4, "redisson": 4, "disconnect": 1},
	adversary: adversarySpec{rate: adverseRate, attacks: fullAttacks},
	maxDenial: maxDenial,
	data:      3,
}

// maxDenial bounds how long a proxy may answer no lock operation at all
// (history.denials): the schedule's faults alone leave a proxy without a
// quorum for a few seconds at a time (two masters wiped are guarded for
// the window, two stalled for up to three seconds, one after the other).
const maxDenial = 20 * time.Second

func pick(rng *rand.Rand, weights map[string]int) string {
	keys := make([]string, 0, len(weights))
	total := 0
	for k, w := range weights {
		keys = append(keys, k)
		total += w
	}
	sort.Strings(keys)
	n := rng.Intn(total)
	for _, k := range keys {
		if n -= weights[k]; n < 0 {
			return k
		}
	}
	return keys[len(keys)-1]
}

func randDur(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int63n(int64(hi-lo)+1))
}

// world is one run: masters, relays, proxies, the history.
type world struct {
	t    *testing.T
	sch  schedule
	seed int64
	// faulter plays a fault of the schedule in place of fault (a world
	// whose voters are Redis Clusters: clusterWorld.fault).
	faulter func(rng *rand.Rand, kind string)
	masters []*redistest.Server // each voter's process now (mmu: a failover replaces it)
	mmu     sync.Mutex
	relays  []*redistest.Relay
	// Each voter's replica, and the relay it follows its primary through
	// (failover_test.go).
	replicas []*redistest.Server
	links    []*redistest.Relay
	addrs    []string
	proxies  []*redistest.Proxy
	h        *history
	keys     []string
	// The proxies' configuration: backend "voting" or "own" (own is
	// that backend), lock_keys.
	backend, lockKeys string
	own               *redistest.Server
	// Marks for the data client: lossGen counts the schedule's faults
	// that may lose master 0's data while it is the backend (odd while
	// one is under way), restarts each proxy's restarts (odd while one is
	// under way).
	lossGen   atomic.Int64
	lossMu    sync.Mutex
	lossDepth int // faults under way that may lose it
	restarts  []atomic.Int64
}

func newWorld(t *testing.T, sch schedule, seed int64) *world {
	w := &world{t: t, sch: sch, seed: seed, h: newHistory(), keys: []string{"lock:a", "lock:b", "lock:c", "lock:d", "lock:e", "lock:f"}}
	// The configuration, drawn from the seed where the schedule leaves it
	// open: the backend a voting master or one of its own, every key a lock
	// key or those under a prefix.
	draw := rand.New(rand.NewSource(seed ^ 0x5ca1ab1e))
	w.backend, w.lockKeys = sch.backend, sch.lockKeys
	if b := []string{"voting", "own"}[draw.Intn(2)]; w.backend == "" {
		w.backend = b
	}
	if k := []string{"*", "lock:*"}[draw.Intn(2)]; w.lockKeys == "" {
		w.lockKeys = k
	}
	w.masters = redistest.StartN(t, 3, redistest.Durable...)
	for _, m := range w.masters {
		r := redistest.NewRelay(t, m.Addr)
		w.relays = append(w.relays, r)
		w.addrs = append(w.addrs, r.Addr())
	}
	// Replicas only where the schedule fails voters over: each is a
	// process more, and a full resync after every restart of its primary,
	// which slows the schedules that restart masters often.
	if sch.faults["failover"] > 0 || sch.faults["failover-pause"] > 0 {
		w.startReplicas()
	} else {
		w.replicas, w.links = make([]*redistest.Server, len(w.masters)), make([]*redistest.Relay, len(w.masters))
	}
	backend := ""
	if w.backend == "own" {
		w.own = redistest.Start(t)
		backend = fmt.Sprintf("backend = %q\n", w.own.Addr)
	}
	t.Logf("configuration: backend %s, lock_keys [%q] (drawn from the seed unless the schedule sets them)", w.backendName(), w.lockKeys)
	config := func(listen string) string {
		return fmt.Sprintf(`[proxy]
listen = %q
%slock_keys = [%q]
lease_ttl = %q
lock_wait_poll = "100ms"
[redlock]
masters = [%s]
node_timeout = "100ms"
retry_count = 2
retry_delay = "30ms"
restart_guard = %v
restart_guard_window = %q
clock_check = "200ms"
[log]
level = %q
format = "json"
`, listen, backend, w.lockKeys, leaseTTL, redistest.Quote(w.addrs), !sch.noRestartGuard, guardWindow, *historyLog)
	}
	var env []string
	off := sch.guardsOff
	if sch.unknownScripts == "passthrough" {
		// Scripts the proxy does not know reach the voting backend.
		off = append(slices.Clone(off), "backend-scripts")
	}
	bin := binary
	if off = knownGuards(t, off); len(off) > 0 {
		// Only a binary built for tests reads the variable.
		bin = redistest.UnsafeProxy(t)
		env = append(env, "REDLOCK_PROXY_UNSAFE_GUARDS_OFF="+strings.Join(off, ","))
	}
	// A new deployment: the masters vote at once.
	first := redistest.StartProxy(t, bin, config, redistest.WithEnv(env...))
	first.Kill()
	initMasters(t, bin, first.Config)
	w.proxies = []*redistest.Proxy{
		redistest.StartProxy(t, bin, config, redistest.WithEnv(env...)),
		redistest.StartProxy(t, bin, config, redistest.WithEnv(env...)),
	}
	w.restarts = make([]atomic.Int64, len(w.proxies))
	if why := w.dataReason(); why != "" {
		t.Logf("data client: %s", why)
	} else {
		t.Logf("data client: %d goroutines, databases 0 and 1", sch.data)
	}
	return w
}

func (w *world) backendName() string {
	if w.backend == "own" {
		return "of its own (a fourth redis-server)"
	}
	return "voting (master 0)"
}

// knownGuards is the guards of off that this build can switch off: a
// control names the guard of a rule this build may not have yet, and
// then runs with nothing switched off for it (the rule is not there).
func knownGuards(t *testing.T, off []string) []string {
	var out []string
	for _, g := range off {
		if slices.Contains(proxy.Guards(), g) {
			out = append(out, g)
		} else {
			t.Logf("guard %q is not in this build: its rule is not there to switch off", g)
		}
	}
	return out
}

// run plays the schedule for d (or until the first violation, with
// stopAtViolation) and returns the violations.
func (w *world) run(d time.Duration, stopAtViolation bool) []string {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w.client(i, rand.New(rand.NewSource(w.seed+int64(i)+1)), stop)
		}(i)
	}
	for p := range w.proxies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.prober(p, stop)
		}()
	}
	if w.dataReason() == "" {
		for i := range w.sch.data {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.dataClient(i, stop)
			}()
		}
	}
	if w.sch.adversary.rate > 0 {
		adv := newAdversary(w, w.sch.adversary)
		j := &janitor{w: w, relies: adv.relies()}
		wg.Add(2)
		go func() {
			defer wg.Done()
			adv.run(stop)
		}()
		go func() {
			defer wg.Done()
			j.run(stop)
		}()
	}
	rng := rand.New(rand.NewSource(w.seed))
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		kind := pick(rng, w.sch.faults)
		w.h.count("fault drawn: " + kind)
		if w.faulter != nil {
			w.faulter(rng, kind)
		} else {
			w.fault(rng, kind)
		}
		pause := w.sch.pause
		if pause[1] == 0 {
			pause = [2]time.Duration{300 * time.Millisecond, 1500 * time.Millisecond}
		}
		time.Sleep(randDur(rng, pause[0], pause[1]))
		if stopAtViolation && len(w.failures()) > 0 {
			break
		}
	}
	close(stop)
	wg.Wait()
	return w.failures()
}

// failures is the violations, and the denials longer than the schedule's
// maxDenial.
func (w *world) failures() []string {
	v := append(w.h.violations(), w.h.dataViolations()...)
	if w.sch.maxDenial == 0 {
		return v
	}
	longest, from := w.h.denials()
	for p, d := range longest {
		if d > w.sch.maxDenial {
			v = append(v, fmt.Sprintf("denial: proxy %d answered no lock operation of its prober for %s from %s (the bound is %s)",
				p, d.Round(time.Millisecond), from[p].Round(time.Millisecond), w.sch.maxDenial))
		}
	}
	return v
}

// prober takes and lets expire a key of its own through proxy p every
// 100 ms, recording whether the proxy answered (granted, or refused as
// held) or not (NOQUORUM, an error): how long a proxy gave no lock
// service at all.
func (w *world) prober(p int, stop <-chan struct{}) {
	c := redis.NewClient(&redis.Options{Addr: w.proxies[p].Addr, Protocol: 2, MaxRetries: -1, PoolSize: 1,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer c.Close()
	key := fmt.Sprintf("lock:probe:%d", p)
	for {
		select {
		case <-stop:
			return
		default:
		}
		err := c.SetNX(context.Background(), key, randToken(), 50*time.Millisecond).Err()
		w.h.probed(p, err == nil || err == redis.Nil)
		time.Sleep(100 * time.Millisecond)
	}
}

// fault plays one fault of the schedule.
func (w *world) fault(rng *rand.Rand, kind string) {
	i := rng.Intn(len(w.masters))
	m, r := w.masters[i], w.relays[i]
	switch kind {
	case "wipe":
		w.h.fault("master %d restarts with its data directory wiped", i)
		defer w.losing(i)()
		m.Wipe()
	case "aof-off":
		defer w.losing(i)()
		c := m.Client()
		c.ConfigSet(context.Background(), "appendonly", "no")
		c.Close()
		d := randDur(rng, 100*time.Millisecond, 400*time.Millisecond)
		w.h.fault("master %d: AOF switched off at runtime, crash and restart %s later", i, d)
		time.Sleep(d)
		m.Restart()
	case "double-wipe":
		j := (i + 1) % len(w.masters)
		w.h.fault("masters %d and %d restart with their data directories wiped", i, j)
		defer w.losing(i, j)()
		m.Wipe()
		w.masters[j].Wipe()
	case "restart":
		w.h.fault("master %d restarts, keeping its data", i)
		m.Restart()
	case "stall", "long-stall":
		d := randDur(rng, 150*time.Millisecond, 700*time.Millisecond)
		if kind == "long-stall" { // longer than a lease's margin
			d = randDur(rng, leaseTTL, 2*leaseTTL)
		}
		w.h.fault("master %d stalls for %s", i, d)
		m.Stop()
		time.Sleep(d)
		m.Cont()
	case "delay":
		lat, d := randDur(rng, 150*time.Millisecond, 300*time.Millisecond), randDur(rng, 300*time.Millisecond, 900*time.Millisecond)
		w.h.fault("master %d answers %s late for %s", i, lat, d)
		defer w.losingLate(i)
		r.Delay.Store(int64(lat))
		time.Sleep(d)
		r.Delay.Store(0)
		r.Reset()
	case "double-stall":
		j := (i + 1) % len(w.masters)
		d := randDur(rng, leaseTTL, 2*leaseTTL)
		w.h.fault("masters %d and %d stall for %s", i, j, d)
		m.Stop()
		w.masters[j].Stop()
		time.Sleep(d)
		m.Cont()
		w.masters[j].Cont()
	case "split-flush":
		// Writes to master 1 or 2 are held back, then dropped: locks
		// granted meanwhile are on master 0 and the other only. Then
		// FLUSHALL through a proxy, whose backend is master 0 (when it
		// votes).
		k := 1 + rng.Intn(2)
		p := rng.Intn(len(w.proxies))
		w.h.fault("master %d's writes held back and dropped, then FLUSHALL through proxy %d", k, p)
		w.relays[k].Delay.Store(int64(5 * time.Second)) // nothing sent meanwhile gets through
		time.Sleep(800 * time.Millisecond)
		w.relays[k].Delay.Store(0) // first: a connection made after the reset must not be held back
		w.relays[k].Reset()
		err := w.flushAll(p)
		w.h.fault("FLUSHALL through proxy %d: %v", p, err)
	case "reset":
		w.h.fault("master %d's connections reset", i)
		defer w.losingLate(i)
		r.Reset()
	case "lose-backend":
		// Locks granted while master 1 or 2 is stalled are on master 0
		// and the other only; master 0 (the backend, when it votes) then
		// loses its data, and a proxy restarts within its guard window:
		// it meets master 0 for the first time.
		k := 1 + rng.Intn(2)
		p := rng.Intn(len(w.proxies))
		w.h.fault("master %d stalls for 600ms, then master 0 restarts with its data directory wiped and proxy %d restarts", k, p)
		w.masters[k].Stop()
		time.Sleep(600 * time.Millisecond)
		w.masters[k].Cont()
		done := w.losing(0)
		w.masters[0].Wipe()
		done()
		time.Sleep(randDur(rng, 100*time.Millisecond, 500*time.Millisecond))
		w.restartProxy(p)
	case "failover", "failover-pause":
		w.failover(rng, i, kind == "failover-pause")
	case "evict":
		if w.backend == "voting" && i == 0 {
			// Master 0 holds the data client's keys, some with a TTL.
			i = 1 + rng.Intn(len(w.masters)-1)
		}
		w.evict(rng, i)
	case "proxy-restart":
		p := rng.Intn(len(w.proxies))
		w.h.fault("proxy %d restarts", p)
		w.restartProxy(p)
	case "flush":
		p := rng.Intn(len(w.proxies))
		err := w.flushAll(p)
		w.h.fault("FLUSHALL through proxy %d: %v", p, err)
	}
}

// flushEnds reports whether cmd, sent alone through a proxy, is a flush
// that ends the honest locks: FLUSHALL or FLUSHDB where the backend holds
// data beside the locks (proxy/flush.go).
func (w *world) flushEnds(cmd []string) bool {
	name := strings.ToLower(cmd[0])
	return w.backend == "own" && w.lockKeys == "*" && (name == "flushall" || name == "flushdb")
}

// flushAll sends FLUSHALL through proxy p. Where the backend holds data
// beside the locks (a backend of its own, every key a lock key), the flush
// ends the locks whose mirrors it erased, as it ends them on one Redis
// (proxy/flush.go): the checker takes every honest lock held meanwhile to
// end there, as it takes an adversary's DEL of it.
func (w *world) flushAll(p int) error {
	var ends []*adverse
	sent := w.h.now()
	if w.flushEnds([]string{"FLUSHALL"}) {
		for _, k := range w.keys {
			ends = append(ends, w.h.adverse(k, sent, fmt.Sprintf("FLUSHALL through proxy %d", p), false, 0))
		}
	}
	c := w.proxies[p].Client()
	err := c.FlushAll(context.Background()).Err()
	c.Close()
	until := w.h.now()
	if err != nil {
		until = max(until, sent+lateBound)
	}
	for _, a := range ends {
		w.h.settle(a, until)
	}
	return err
}

// losing marks, for the data client, a fault that may lose the data of
// masters ms: when master 0 is among them and is the backend, lossGen is
// odd until the returned function runs.
func (w *world) losing(ms ...int) func() {
	if w.backend != "voting" || !slices.Contains(ms, 0) {
		return func() {}
	}
	// Faults that may lose it can overlap (losingLate's tail): lossGen
	// turns odd when the first begins and even when the last ends.
	w.lossMu.Lock()
	if w.lossDepth++; w.lossDepth == 1 {
		w.lossGen.Add(1)
	}
	w.lossMu.Unlock()
	return func() {
		w.lossMu.Lock()
		if w.lossDepth--; w.lossDepth == 0 {
			w.lossGen.Add(1)
		}
		w.lossMu.Unlock()
	}
}

// losingLate marks, for the data client, a fault that cuts or slows
// master m's connections, and lateBound after it: with a voting backend,
// master 0's commands in flight through it may run or not, and land late;
// the data client checks no reply across it and starts again after it.
// (Seen with seeds 4 and 6: EXPIRE answered 1 and the TTL right after -1,
// just after master 0's connections were slowed and reset; not
// reproduced without the schedule.)
func (w *world) losingLate(m int) {
	done := w.losing(m)
	go func() {
		time.Sleep(lateBound)
		done()
	}()
}

// restartProxy restarts proxy p, marked for the data client.
func (w *world) restartProxy(p int) {
	w.restarts[p].Add(1)
	defer w.restarts[p].Add(1)
	w.proxies[p].Restart()
}

// client runs random lock sessions until stop.
func (w *world) client(id int, rng *rand.Rand, stop <-chan struct{}) {
	conns := make([]*redis.Client, len(w.proxies))
	for i, p := range w.proxies {
		conns[i] = redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: 2, MaxRetries: -1, PoolSize: 2,
			DialTimeout: 500 * time.Millisecond, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second})
		defer conns[i].Close()
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		p := rng.Intn(len(w.proxies))
		if w.sch.oneProxy {
			p = 0
		}
		key := w.keys[rng.Intn(len(w.keys))]
		switch op := pick(rng, w.sch.ops); op {
		case "set-nx":
			w.setNX(id, rng, conns[p], key)
		case "native":
			w.native(id, rng, conns[p], key)
		case "lease":
			w.lease(id, rng, w.proxies[p].Addr, key)
		case "pipelined":
			w.pipelined(id, rng, conns[p])
		case "redisson":
			w.redisson(id, rng, conns[p], key)
		case "disconnect":
			w.disconnect(rng, w.proxies[p].Addr, key)
		}
		time.Sleep(randDur(rng, 5*time.Millisecond, 40*time.Millisecond))
	}
}

// The scripts the clients send, as their libraries write them.
const (
	// An extend the proxy does not know, for the unknown-scripts control.
	unknownExtend = `local v = redis.call('get', KEYS[1])
if v == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]) return 1 end
return 0`
)

// holdFor sleeps a random part of what is left of g, and returns false
// when nothing is left to hold.
func (w *world) holdFor(rng *rand.Rand, g *holding, part float64) bool {
	left := w.h.endOf(g) - w.h.now()
	if left < 30*time.Millisecond {
		return false
	}
	time.Sleep(time.Duration(rng.Float64() * part * float64(left)))
	return true
}

// setNX is a session of a client of the transparent path.
func (w *world) setNX(id int, rng *rand.Rand, c *redis.Client, key string) {
	ctx := context.Background()
	tok := randToken()
	ttl := randDur(rng, 400*time.Millisecond, 1500*time.Millisecond)
	s := w.h.now()
	ok, err := c.SetNX(ctx, key, tok, ttl).Result()
	r := w.h.now()
	if err != nil || !ok {
		w.h.count(fmt.Sprintf("set-nx refused: %s", errKind(err)))
		return
	}
	w.h.count("set-nx granted")
	g := w.h.begin(key, tok, "SET NX", id, s, r, s+ttl-drift(ttl))
	w.h.step(g, s, "SET NX PX %d", ttl.Milliseconds())
	n := rng.Intn(3)
	if w.sch.longExtends {
		n = 1
	}
	for ; n > 0; n-- {
		if !w.holdFor(rng, g, 0.6) {
			return
		}
		ttl2 := randDur(rng, 300*time.Millisecond, 2*time.Second)
		if w.sch.longExtends {
			ttl2 = randDur(rng, guardWindow, 2*guardWindow)
		}
		s2 := w.h.now()
		// An addition keeps what is left of the lock within maxLife, as
		// every other write does: the restart guard window must cover the
		// longest a lock can live (the other proxy's guard knows of no TTL
		// this one wrote).
		add := maxLife - (w.h.endOf(g) - s2)
		var v int64
		var err error
		var kind string
		switch {
		case w.sch.unknownScripts == "passthrough" && rng.Intn(2) == 0:
			kind = "unknown"
			v, err = c.Eval(ctx, unknownExtend, []string{key}, tok, ttl2.Milliseconds()).Int64()
		case rng.Intn(2) == 0 || w.sch.longExtends || add < 100*time.Millisecond:
			kind = "replace"
			v, err = c.Eval(ctx, redistest.RedisPyExtend, []string{key}, tok, ttl2.Milliseconds(), "1").Int64()
		default:
			kind = "add"
			ttl2 = min(ttl2, add)
			v, err = c.Eval(ctx, redistest.RedisPyExtend, []string{key}, tok, ttl2.Milliseconds(), "0").Int64()
		}
		w.h.step(g, s2, "extend (%s) %d ms: %v %v at %s", kind, ttl2.Milliseconds(), v, err, w.h.now().Round(time.Millisecond))
		switch {
		case err != nil && kind != "add":
			// Not known whether it took effect: it may have set the TTL
			// on the masters that answered, shorter than before.
			w.h.setEnd(g, min(w.h.endOf(g), s2+ttl2-drift(ttl2)))
		case err == nil && v != 1:
			w.h.cut(g, s2) // not held: told so
		}
		if err != nil || v != 1 {
			w.h.count(fmt.Sprintf("extend (%s) not done: %s", kind, errKind(err)))
			break
		}
		w.h.count(fmt.Sprintf("extend (%s) done", kind))
		if kind == "add" {
			w.h.setEnd(g, w.h.endOf(g)+ttl2)
		} else {
			w.h.setEnd(g, s2+ttl2-drift(ttl2))
		}
	}
	if rng.Intn(4) == 0 {
		return // left to expire
	}
	if !w.holdFor(rng, g, 1) {
		return
	}
	u := w.h.now()
	w.h.cut(g, u)
	err = c.Eval(ctx, unlockScript, []string{key}, tok).Err()
	w.h.step(g, u, "unlock: %v", err)
}

// redisson is a session of Redisson's RLock (the scripts of 3.24 and
// later, by EVAL) on the same keys as the string locks: a lock with a
// lease, maybe taken again by its holder (reentrant) or renewed by the
// watchdog's script, then unlocked as many times as it was taken.
func (w *world) redisson(id int, rng *rand.Rand, c *redis.Client, key string) {
	ctx := context.Background()
	holder := randToken() + ":1" // <client id>:<thread id>
	ttl := randDur(rng, 400*time.Millisecond, 1500*time.Millisecond)
	s := w.h.now()
	err := c.Eval(ctx, redistest.RedissonAcquireGe319, []string{key}, ttl.Milliseconds(), holder).Err()
	r := w.h.now()
	if err != redis.Nil { // nil: taken; an integer: the PTTL of another's lock
		why := "held by another"
		if err != nil {
			why = errKind(err)
		}
		w.h.count("redisson lock refused: " + why)
		return
	}
	w.h.count("redisson lock granted")
	g := w.h.begin(key, holder, "Redisson lock", id, s, r, s+ttl-drift(ttl))
	w.h.step(g, s, "Redisson lock, lease %d ms", ttl.Milliseconds())
	holds := 1
	for n := rng.Intn(3); n > 0; n-- {
		if !w.holdFor(rng, g, 0.6) {
			return
		}
		ttl2 := randDur(rng, 300*time.Millisecond, maxLife)
		s2 := w.h.now()
		if rng.Intn(3) == 0 {
			err := c.Eval(ctx, redistest.RedissonAcquireGe319, []string{key}, ttl2.Milliseconds(), holder).Err()
			w.h.step(g, s2, "Redisson lock again, lease %d ms: %v at %s", ttl2.Milliseconds(), err, w.h.now().Round(time.Millisecond))
			switch {
			case err == redis.Nil:
				holds++
				w.h.setEnd(g, s2+ttl2-drift(ttl2))
				w.h.count("redisson lock reentered")
			case err == nil: // another's PTTL: not held
				w.h.cut(g, s2)
				w.h.count("redisson lock again: held by another")
				return
			default: // it may have set the shorter lease where it ran
				w.h.setEnd(g, min(w.h.endOf(g), s2+ttl2-drift(ttl2)))
				w.h.count(fmt.Sprintf("redisson lock again: %s", errKind(err)))
			}
			continue
		}
		v, err := c.Eval(ctx, redistest.RedissonRenewLe343, []string{key}, ttl2.Milliseconds(), holder).Int64()
		w.h.step(g, s2, "Redisson renewal %d ms: %v %v at %s", ttl2.Milliseconds(), v, err, w.h.now().Round(time.Millisecond))
		switch {
		case err != nil:
			w.h.setEnd(g, min(w.h.endOf(g), s2+ttl2-drift(ttl2)))
			w.h.count(fmt.Sprintf("redisson renewal not done: %s", errKind(err)))
		case v != 1:
			w.h.cut(g, s2)
			w.h.count("redisson renewal not done: not held")
			return
		default:
			w.h.setEnd(g, s2+ttl2-drift(ttl2))
			w.h.count("redisson renewal done")
		}
	}
	if rng.Intn(4) == 0 {
		return // left to expire
	}
	if !w.holdFor(rng, g, 1) {
		return
	}
	w.h.cut(g, w.h.now())
	channel := "redisson_lock__channel:{" + key + "}"
	for ; holds > 0; holds-- {
		latch := "redisson_unlock_latch:{" + key + "}:" + randToken()
		// A hold given back while others remain sets the lease again:
		// ttl, within maxLife.
		err := c.Eval(ctx, redistest.RedissonUnlockGe324, []string{key, channel, latch}, 0, ttl.Milliseconds(), holder, "publish", 5000).Err()
		w.h.step(g, w.h.now(), "Redisson unlock: %v", err)
		_ = c.Del(ctx, latch).Err()
	}
}

// native is a session of LOCK.* commands: acquire (maybe with WAIT), maybe
// reentered, maybe extended, released.
func (w *world) native(id int, rng *rand.Rand, c *redis.Client, key string) {
	ctx := context.Background()
	tok := randToken()
	ttl := randDur(rng, 400*time.Millisecond, 1500*time.Millisecond)
	args := []any{"LOCK.ACQUIRE", key, ttl.Milliseconds(), "TOKEN", tok}
	if rng.Intn(2) == 0 {
		args = append(args, "WAIT", randDur(rng, 10*time.Millisecond, 200*time.Millisecond).Milliseconds())
	}
	s := w.h.now()
	v, err := c.Do(ctx, args...).Result()
	r := w.h.now()
	validity, ok := grantValidity(v, err)
	if !ok {
		w.h.count(fmt.Sprintf("lock.acquire refused: %s", errKind(err)))
		return
	}
	w.h.count("lock.acquire granted")
	g := w.h.begin(key, tok, "LOCK.ACQUIRE", id, s, r, s+validity)
	w.h.step(g, s, "%v: validity %s", args, validity)
	holds := 1
	if rng.Intn(3) == 0 && w.holdFor(rng, g, 0.5) {
		args := []any{"LOCK.ACQUIRE", key, ttl.Milliseconds(), "TOKEN", tok, "REENTRANT"}
		if rng.Intn(2) == 0 {
			args = append(args, "WAIT", 100)
		}
		s2 := w.h.now()
		v, err := c.Do(ctx, args...).Result()
		if v2, ok := grantValidity(v, err); ok {
			holds++
			w.h.setEnd(g, max(w.h.endOf(g), s2+v2))
			w.h.count("lock.acquire reentered")
		}
	}
	if rng.Intn(2) == 0 && w.holdFor(rng, g, 0.6) {
		ttl3 := randDur(rng, 300*time.Millisecond, 2*time.Second)
		s3 := w.h.now()
		v, err := c.Do(ctx, "LOCK.EXTEND", key, tok, ttl3.Milliseconds()).Int64()
		w.h.step(g, s3, "LOCK.EXTEND %d ms: %v %v", ttl3.Milliseconds(), v, err)
		switch {
		case err == nil && v > 0:
			w.h.setEnd(g, s3+time.Duration(v)*time.Millisecond)
			w.h.count("lock.extend done")
		case err == nil:
			w.h.cut(g, s3) // not held: told so
			w.h.count("lock.extend not done: not held")
		default:
			// Not known whether it took effect: it may have set a
			// shorter TTL on the masters that answered.
			w.h.setEnd(g, min(w.h.endOf(g), s3+ttl3-drift(ttl3)))
			w.h.count(fmt.Sprintf("lock.extend not done: %s", errKind(err)))
		}
	}
	if !w.holdFor(rng, g, 1) {
		return
	}
	for ; holds > 0; holds-- {
		if holds == 1 {
			w.h.cut(g, w.h.now())
		}
		_ = c.Do(ctx, "LOCK.RELEASE", key, tok).Err()
	}
}

// grantValidity reads LOCK.ACQUIRE's reply.
func grantValidity(v any, err error) (time.Duration, bool) {
	a, ok := v.([]any)
	if err != nil || !ok || len(a) != 3 {
		return 0, false
	}
	ms, _ := a[2].(int64)
	return time.Duration(ms) * time.Millisecond, true
}

// lease holds a lease on a connection of its own for a while, checking
// with PING that its connection still answers, then closes it or RESETs.
func (w *world) lease(id int, rng *rand.Rand, addr, key string) {
	ctx := context.Background()
	var dials atomic.Int32
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, PoolSize: 1,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second,
		OnConnect: func(context.Context, *redis.Conn) error { dials.Add(1); return nil }})
	defer c.Close()
	tok := randToken()
	s := w.h.now()
	v, err := c.Do(ctx, "LOCK.ACQUIRE", key, "LEASE", "TOKEN", tok).Result()
	r := w.h.now()
	validity, ok := grantValidity(v, err)
	if !ok {
		w.h.count(fmt.Sprintf("lease refused: %s", errKind(err)))
		return
	}
	w.h.count("lease granted")
	g := w.h.begin(key, tok, "LEASE", id, s, r, s+validity)
	w.h.step(g, s, "LEASE: validity %s", validity)
	until := time.Now().Add(randDur(rng, leaseTTL/2, 3*leaseTTL))
	for time.Now().Before(until) {
		sp := w.h.now()
		err := c.Ping(ctx).Err()
		if err != nil || dials.Load() > 1 {
			w.h.count("lease connection closed by the proxy")
			w.h.cut(g, w.h.now())
			return
		}
		w.h.setEnd(g, max(w.h.endOf(g), sp+leaseTTL/3))
		time.Sleep(50 * time.Millisecond)
	}
	w.h.cut(g, w.h.now())
	if rng.Intn(2) == 0 {
		_ = c.Do(ctx, "RESET").Err()
		w.h.count("lease ended by RESET")
	} else {
		w.h.count("lease ended by close")
	}
}

// pipelined takes a few keys at once, as a multiplexing client does: SET
// NX of each in one pipeline on one connection (the proxy runs them
// concurrently), holds those granted, and releases them in one pipeline.
func (w *world) pipelined(id int, rng *rand.Rand, c *redis.Client) {
	ctx := context.Background()
	keys := rng.Perm(len(w.keys))[:2+rng.Intn(2)]
	ttl := randDur(rng, 400*time.Millisecond, 1500*time.Millisecond)
	toks := make([]string, len(keys))
	p := c.Pipeline()
	cmds := make([]*redis.BoolCmd, len(keys))
	for i, k := range keys {
		toks[i] = randToken()
		cmds[i] = p.SetNX(ctx, w.keys[k], toks[i], ttl)
	}
	s := w.h.now()
	_, _ = p.Exec(ctx)
	r := w.h.now()
	var held []*holding
	var unlock []int
	for i, k := range keys {
		if ok, err := cmds[i].Result(); err != nil || !ok {
			w.h.count(fmt.Sprintf("pipelined set-nx refused: %s", errKind(err)))
			continue
		}
		w.h.count("pipelined set-nx granted")
		g := w.h.begin(w.keys[k], toks[i], "pipelined SET NX", id, s, r, s+ttl-drift(ttl))
		w.h.step(g, s, "pipelined SET NX PX %d", ttl.Milliseconds())
		held = append(held, g)
		unlock = append(unlock, i)
	}
	if len(held) == 0 {
		return
	}
	if !w.holdFor(rng, held[0], 1) {
		return
	}
	u := w.h.now()
	p = c.Pipeline()
	for j, i := range unlock {
		w.h.cut(held[j], u)
		p.Eval(ctx, unlockScript, []string{w.keys[keys[i]]}, toks[i])
	}
	_, _ = p.Exec(ctx)
}

// disconnect sends a lock request and closes its connection without
// reading the reply: the proxy must leave nothing locked for nobody.
func (w *world) disconnect(rng *rand.Rand, addr, key string) {
	nc, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return
	}
	req := fmt.Sprintf("SET %s %s NX PX 300\r\n", key, randToken())
	if rng.Intn(2) == 0 {
		req = fmt.Sprintf("LOCK.ACQUIRE %s 300 WAIT 300\r\n", key)
	}
	_, _ = nc.Write([]byte(req))
	nc.Close()
	w.h.count("disconnect")
}

// errKind is a short name of a reply error.
func errKind(err error) string {
	switch {
	case err == nil:
		return "nil"
	case err == redis.Nil:
		return "nil"
	}
	f := strings.Fields(err.Error())
	if len(f) == 0 {
		return "?"
	}
	if strings.HasPrefix(f[0], "ERR") || strings.Contains(err.Error(), "connect") || strings.Contains(err.Error(), "EOF") {
		return "error"
	}
	return f[0]
}

// report logs what a run saw.
func (w *world) report(v []string) {
	h := w.h
	h.mu.Lock()
	outcomes := make([]string, 0, len(h.outcome))
	for k, n := range h.outcome {
		outcomes = append(outcomes, fmt.Sprintf("%s: %d", k, n))
	}
	holds, cut := len(h.holds), 0
	now := h.now()
	endedBy := map[string]int{}
	for _, g := range h.holds {
		if _, by := h.endedBy(g, now); g.client >= 0 && by != nil {
			cut++
			kind, _, _ := strings.Cut(by.what, ":")
			endedBy[kind]++
		}
	}
	for kind, n := range endedBy {
		outcomes = append(outcomes, fmt.Sprintf("holdings ended early by the adversary's %s: %d", kind, n))
	}
	faults, actions := len(h.faults), len(h.actions)
	dataOps, dataCmds, dataBad := h.dataOps, h.dataCmds, len(h.dataBad)
	h.mu.Unlock()
	sort.Strings(outcomes)
	longest, from := h.denials()
	var denied []string
	for p, d := range longest {
		denied = append(denied, fmt.Sprintf("proxy %d %s (from %s)", p, d.Round(time.Millisecond), from[p].Round(time.Millisecond)))
	}
	w.t.Logf("schedule %s, seed %d (backend %s, lock_keys %q): %s, %d faults, %d locks held (%d of them ended early by the adversary's commands), %d adversary actions, %d data operations (%d commands checked), %d violations (%d of kind data); longest time without lock service: %s\n  %s",
		w.sch.name, w.seed, w.backend, w.lockKeys, now.Round(time.Second), faults, holds, cut, actions, dataOps, dataCmds, len(v), dataBad, strings.Join(denied, ", "), strings.Join(outcomes, "\n  "))
}

func seed(t *testing.T) int64 {
	s := *historySeed
	if s == 0 {
		s = time.Now().UnixNano() % 1e9
	}
	t.Logf("seed %d (again: bash scripts/faults.sh <duration> %d)", s, s)
	return s
}

// TestHistory plays the full schedule (45 s; -history.duration for longer)
// and fails on any two holders of a lock at once.
func TestHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("history test skipped in -short mode")
	}
	d := *historyDuration
	if d == 0 {
		d = 45 * time.Second
	}
	sch := fullSchedule
	if *historyAdverse >= 0 {
		sch.adversary.rate = *historyAdverse
	}
	if *historyFaults != "" {
		sch.faults = maps.Clone(sch.faults)
		for _, kw := range strings.Split(*historyFaults, ",") {
			k, v, _ := strings.Cut(kw, "=")
			n, err := strconv.Atoi(v)
			if _, ok := sch.faults[k]; !ok || err != nil || n < 0 {
				t.Fatalf("-history.faults: %q is not kind=weight of a fault of the schedule", kw)
			}
			sch.faults[k] = n
		}
		t.Logf("fault weights: %v", sch.faults)
	}
	w := newWorld(t, sch, seed(t))
	v := w.run(d, false)
	w.report(v)
	for _, s := range v {
		t.Error("violation: " + s)
	}
	if len(v) > 0 {
		t.Logf("faults:\n  %s", strings.Join(w.h.faults, "\n  "))
	}
	if n := w.h.held(); n < 100 {
		t.Fatalf("only %d locks held: the run proves nothing", n)
	}
}

// The negative controls: the same test with one guard off, and a schedule
// that draws the faults that guard is for, must make the checker report a
// violation; otherwise the test could not catch what the guard prevents.
func TestHistoryControls(t *testing.T) {
	if testing.Short() {
		t.Skip("history test skipped in -short mode")
	}
	base := map[string]int{"set-nx": 6, "native": 2, "lease": 2}
	// The controls of the guards against faults run as they always did:
	// a voting backend, every key a lock key.
	controls := []schedule{
		{name: "restart_guard_off", noRestartGuard: true, faults: map[string]int{"wipe": 1}, ops: base},
		{name: "data_evidence_off", guardsOff: []string{"data-evidence"}, faults: map[string]int{"wipe": 1, "aof-off": 1}, ops: base},
		// Two masters wiped, guarded for the window; locks extended
		// beyond it (through one proxy, which knows those TTLs) were on
		// them.
		{name: "ttl_stretch_off", guardsOff: []string{"ttl-stretch"}, faults: map[string]int{"double-wipe": 1}, ops: map[string]int{"set-nx": 1},
			longExtends: true, oneProxy: true, pause: [2]time.Duration{guardWindow + 500*time.Millisecond, 2 * guardWindow}},
		{name: "lease_lapse_off", guardsOff: []string{"lease-lapse"}, faults: map[string]int{"double-stall": 1}, ops: map[string]int{"lease": 3, "set-nx": 1}},
		{name: "not_held_needs_quorum_and_lease_lapse_off", guardsOff: []string{"not-held-needs-quorum", "lease-lapse"},
			faults: map[string]int{"wipe": 1, "delay": 1}, ops: map[string]int{"lease": 3, "set-nx": 1}},
		// A FLUSHALL that gets through is also caught, within a check, by
		// the data evidence (the master's record changed without a
		// restart): both are off here.
		{name: "admin_commands_and_data_evidence_off", guardsOff: []string{"admin-commands", "data-evidence"}, faults: map[string]int{"split-flush": 1}, ops: base},
		{name: "unknown_scripts_passthrough", unknownScripts: "passthrough", faults: map[string]int{"reset": 1}, ops: map[string]int{"set-nx": 1}},
		// A replica older than the window promoted in place of a primary
		// that crashed; locks granted while its replication and a third
		// voter's writes were held back are on the old primary and one
		// other voter only: the promoted replica and the third grant them
		// again.
		{name: "promotion_off", guardsOff: []string{"promotion"}, faults: map[string]int{"failover": 1}, ops: base},
		// A lock on the evicting voter and one other only, evicted: that
		// voter and the third grant it again.
		{name: "eviction_off", guardsOff: []string{"eviction"}, faults: map[string]int{"evict": 1}, ops: base},
	}
	for i := range controls {
		controls[i].backend, controls[i].lockKeys = "voting", "*"
	}
	controls = append(controls, adversaryControls(base)...)
	for _, sch := range controls {
		t.Run(sch.name, func(t *testing.T) {
			w := newWorld(t, sch, seed(t))
			v := w.run(90*time.Second, true) // stops at the first violation
			w.report(v)
			if len(v) == 0 {
				t.Fatal("no violation with the guard off: the checker or the schedule cannot catch what it prevents")
			}
			t.Logf("first violation: %s\nfaults:\n  %s", v[0], strings.Join(w.h.faults, "\n  "))
		})
	}
}
