package faults

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// The adversary: a client of the proxies that does not speak the lock
// protocol, or speaks it wrong on purpose. Drawn from the run's seed, it
// sends random commands of the whole command table (every command of the
// backend's COMMAND reply, and the proxy's LOCK.*) with random arguments,
// and attacks aimed at the boundary around lock state: writes to the
// honest clients' lock keys and to the proxy's own records, scripts and
// functions that write keys they do not declare, recognised lock scripts
// with code hidden where the proxy's reading of Lua and Lua's differ and
// with edge arguments, TTLs of centuries, payloads of megabytes,
// administrative commands, all of it in MULTI too. It reads the honest
// clients' tokens through the proxies (GET of a lock key answers it) and
// uses them.
//
// It does not rely on the locks it takes, so its grants are not holdings
// (but with adversarySpec.relies, for the controls that need it). What it
// may legitimately do to an honest client's lock — on one Redis, a DEL, a
// SET without NX or a release with the holder's token ends the lock — the
// oracle (oracle_test.go) tells apart from what it may not, and the
// checker ends, at the command's send, the holdings it may have ended: two
// holders left after that are the proxy's doing.

// adversarySpec is the adversary of a schedule.
type adversarySpec struct {
	rate    float64        // actions per second; 0: no adversary
	attacks map[string]int // the attacks it draws, with their weights
	// relies: the adversary relies on what it was told for the forms of
	// acquire a client could (MSETNX, GETSET, SET, and a SET NX PX from a
	// script or a function, answered as granted), and those grants are
	// checked as holdings. Only for schedules whose faults never lose a
	// master's data: those forms may have no TTL, which no restart guard
	// covers (safety.md, "Locks without a TTL").
	relies bool
}

// fullAttacks are the attacks of the full schedule.
var fullAttacks = map[string]int{
	"peek": 4, "command": 6, "write": 6, "script": 3, "function": 2, "hidden": 3, "edge": 4,
	"reserved": 3, "evidence": 1, "stretch": 1, "big": 1, "admin": 2, "multi": 2,
}

// adverseRate is the full schedule's adversary, in actions per second.
const adverseRate = 15

// lateBound bounds how late a command that was not answered, or answered
// NOQUORUM or that the backend failed, may still take effect on a master
// (a master stalled or slowed by the schedule runs what it had queued when
// it resumes).
const lateBound = 4 * time.Second

// adversary is the adversarial client of one run.
type adversary struct {
	w       *world
	spec    adversarySpec
	rng     *rand.Rand
	oracle  *oracle
	table   []cmdInfo
	learned map[string]string        // honest key → the token last read through a proxy
	heldAt  map[string]time.Duration // honest key → when it was last read held
	holders map[string]string        // honest key → a Redisson holder last read
	caught  map[string]string        // what it captured of the proxy's records
	dumps   []string                 // DUMP payloads of values of its own
	n       int
}

// cmdInfo is a command of the table, as COMMAND describes it.
type cmdInfo struct {
	name              string // lower case; "config|set" for a subcommand
	arity             int
	first, last, step int
	blocking          bool
}

func newAdversary(w *world, spec adversarySpec) *adversary {
	a := &adversary{w: w, spec: spec, rng: rand.New(rand.NewSource(w.seed + 100)),
		oracle: newOracle(w.t, w.keys), learned: map[string]string{}, heldAt: map[string]time.Duration{}, holders: map[string]string{},
		caught: map[string]string{}}
	a.table = commandTable(w.t, w.masters[0].Addr)
	// Payloads for RESTORE: values of its own, of three types.
	c := a.oracle.srv.Client()
	defer c.Close()
	ctx := context.Background()
	c.Set(ctx, "adv:dump", "adv-restored", 0)
	c.HSet(ctx, "adv:dumph", "adv-restored:1", 1)
	c.RPush(ctx, "adv:dumpl", "x")
	for _, k := range []string{"adv:dump", "adv:dumph", "adv:dumpl"} {
		if v, err := c.Dump(ctx, k).Result(); err == nil {
			a.dumps = append(a.dumps, v)
		}
	}
	c.Do(ctx, oracleFlush)
	return a
}

// commandTable reads COMMAND of a master, subcommands included, and adds
// the proxy's own commands (every other name in the proxy's table,
// proxy/table.go, is a Redis command).
func commandTable(t interface{ Fatalf(string, ...any) }, addr string) []cmdInfo {
	rs, err := sendRaw(addr, [][]string{{"command"}}, 5*time.Second)
	if err != nil || len(rs) != 1 {
		t.Fatalf("COMMAND: %v", err)
	}
	var out []cmdInfo
	var add func(e reply)
	add = func(e reply) {
		if len(e.arr) < 6 {
			return
		}
		ci := cmdInfo{name: strings.ToLower(e.arr[0].str)}
		ci.arity, _ = strconv.Atoi(e.arr[1].str)
		for _, f := range e.arr[2].arr {
			ci.blocking = ci.blocking || f.str == "blocking"
		}
		ci.first, _ = strconv.Atoi(e.arr[3].str)
		ci.last, _ = strconv.Atoi(e.arr[4].str)
		ci.step, _ = strconv.Atoi(e.arr[5].str)
		if len(e.arr) >= 10 && len(e.arr[9].arr) > 0 {
			for _, sub := range e.arr[9].arr {
				add(sub)
			}
			return
		}
		out = append(out, ci)
	}
	for _, e := range rs[0].arr {
		add(e)
	}
	out = append(out, []cmdInfo{
		{name: "lock.acquire", arity: -3, first: 1, last: 1, step: 1},
		{name: "lock.release", arity: 3, first: 1, last: 1, step: 1},
		{name: "lock.extend", arity: 4, first: 1, last: 1, step: 1},
		{name: "lock.info", arity: 2, first: 1, last: 1, step: 1},
	}...)
	slices.SortFunc(out, func(x, y cmdInfo) int { return strings.Compare(x.name, y.name) })
	return out
}

// advAction is one thing the adversary does: commands sent in one write on
// a connection of its own, read back in order.
type advAction struct {
	kind  string
	cmds  [][]string
	claim *advClaim
}

// advClaim is a grant the adversary relies on when the replies say so.
type advClaim struct {
	form, key, value string
	ttl              time.Duration // 0: none
	granted          func(rs []reply) bool
}

// run plays the adversary until stop.
func (a *adversary) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		a.play(a.next())
		time.Sleep(time.Duration(a.rng.ExpFloat64() / a.spec.rate * float64(time.Second)))
	}
}

// next draws the next action.
func (a *adversary) next() advAction {
	a.n++
	kind := pick(a.rng, a.spec.attacks)
	act := advAction{kind: kind}
	switch kind {
	case "peek":
		act.cmds = [][]string{a.peek()}
	case "command":
		act.cmds = [][]string{a.randomCommand()}
	case "write":
		act.cmds, act.claim = a.write()
	case "script":
		act.cmds, act.claim = a.script()
	case "function":
		act.cmds, act.claim = a.function()
	case "hidden":
		act.cmds = a.hidden()
	case "edge":
		act.cmds = [][]string{a.edge()}
	case "reserved":
		act.cmds = a.reserved()
	case "evidence":
		act.cmds = a.evidence()
	case "stretch":
		act.cmds = [][]string{a.stretch()}
	case "big":
		act.cmds = [][]string{a.big()}
	case "admin":
		act.cmds = [][]string{a.admin()}
	case "multi":
		act.cmds = [][]string{{"MULTI"}}
		for range 1 + a.rng.Intn(3) {
			var cs [][]string
			switch a.rng.Intn(4) {
			case 0:
				cs = a.reserved()
			case 1:
				cs = [][]string{a.edge()}
			case 2:
				cs, _ = a.script()
			default:
				cs, _ = a.write()
			}
			act.cmds = append(act.cmds, cs...)
		}
		act.cmds = append(act.cmds, []string{"EXEC"})
	}
	return act
}

// play asks the oracle which honest locks the action may end, marks them
// for the checker, sends it through a proxy and records what came back.
func (a *adversary) play(act advAction) {
	w := a.w
	failed := a.oracle.failed
	hit := a.oracle.destroys(act.cmds, a.learned, a.holders)
	if disrupts(act.cmds) {
		w.h.disrupts.Add(1)
	}
	for _, c := range act.cmds {
		if len(c) > 1 && strings.EqualFold(c[0], "client") && strings.EqualFold(c[1], "kill") {
			w.h.kills.Add(1)
		}
	}
	if len(act.cmds) == 1 && w.flushEnds(act.cmds[0]) {
		hit = append(hit, w.keys...) // proxy/flush.go: it ends the locks whose mirrors it erased
	}
	if a.oracle.failed > failed {
		w.h.count("adversary: actions the oracle did not judge in time (taken to end the locks they name)")
	}
	p := a.rng.Intn(len(w.proxies))
	timeout := 3 * time.Second
	sent := w.h.now()
	desc := describe(act.cmds)
	var wins []*adverse
	for _, k := range hit {
		wins = append(wins, w.h.adverse(k, sent, act.kind+": "+desc, false, a.n))
	}
	rs, err := sendRaw(w.proxies[p].Addr, act.cmds, timeout)
	done := w.h.now()
	// Unanswered, or answered NOQUORUM or that the backend failed: it may
	// still take effect where it was sent.
	late := err != nil
	var answer []string
	for _, r := range rs {
		late = late || r.isErr() && (r.errClass() == "NOQUORUM" || strings.Contains(r.str, "backend"))
		answer = append(answer, r.short())
	}
	if err != nil {
		answer = append(answer, "(no reply: "+errKind(err)+")")
	}
	until := done
	if late {
		until = max(done, sent+lateBound)
	}
	if len(hit) > 0 {
		w.h.count("adversary: actions that may end honest locks")
	}
	// Refused by the proxy before it sent anything (so it says), or a
	// transaction discarded: it ended nothing. (Were it sent all the
	// same, the proxy would have lied, and two holders would be its
	// doing.)
	if last := len(act.cmds) - 1; len(rs) == len(act.cmds) && refused(rs[last]) {
		until = -2
	}
	for _, x := range wins {
		w.h.settle(x, until)
	}
	w.h.acted(advLog{at: sent, proxy: p, kind: act.kind, what: desc, answer: strings.Join(answer, " "), ends: hit})
	w.h.count(fmt.Sprintf("adversary %s: %s", act.kind, outcome(rs, err)))
	a.learn(act.cmds, rs)
	if c := act.claim; c != nil && a.relies() && len(rs) == len(act.cmds) && c.granted(rs) {
		end := time.Duration(math.MaxInt64)
		if c.ttl > 0 {
			end = sent + c.ttl - drift(c.ttl)
		}
		g := w.h.begin(c.key, c.value, "adversary "+c.form, -1, sent, done, end)
		w.h.mu.Lock()
		g.action = a.n // its own command does not end it
		w.h.mu.Unlock()
		w.h.step(g, sent, "%s: %s", desc, strings.Join(answer, " "))
		w.h.count("adversary relies on " + c.form)
	}
}

// disrupts reports whether an action may flush or swap the backend's
// databases: FLUSHALL, FLUSHDB or SWAPDB anywhere in it (a script's text
// included), for the data client.
func disrupts(cmds [][]string) bool {
	for _, c := range cmds {
		for _, a := range c {
			l := strings.ToLower(a)
			if strings.Contains(l, "swapdb") || strings.Contains(l, "flushall") || strings.Contains(l, "flushdb") {
				return true
			}
		}
	}
	return false
}

// relies reports whether the adversary relies on its grants: with a
// voting backend only (with a backend of its own, a command the quorum
// does not serve writes the backend's keys, which are no locks).
func (a *adversary) relies() bool { return a.spec.relies && a.w.backend == "voting" }

// refused reports whether a reply says the command was not run: refused
// by the proxy for itself (not a backend that failed), or a transaction
// discarded.
func refused(r reply) bool {
	return r.isErr() && (r.errClass() == "refused by the proxy" && !strings.Contains(r.str, "backend") ||
		strings.HasPrefix(r.str, "EXECABORT"))
}

// outcome names how an action was answered, for the outcome counts.
func outcome(rs []reply, err error) string {
	for _, r := range rs {
		if r.isErr() {
			return r.errClass()
		}
	}
	if err != nil {
		return "no reply"
	}
	return "answered"
}

var hexToken = regexp.MustCompile(`^[0-9a-f]{24}$`)

// learn keeps the honest tokens and holders the replies show, and what
// they show of the proxy's records.
func (a *adversary) learn(cmds [][]string, rs []reply) {
	for i, c := range cmds {
		if i >= len(rs) || len(c) < 2 {
			continue
		}
		r, name, key := rs[i], strings.ToLower(c[0]), c[1]
		honest := slices.Contains(a.w.keys, key)
		switch {
		case name == "get" && honest && hexToken.MatchString(r.str):
			a.learned[key] = r.str
			a.heldAt[key] = a.w.h.now()
		case name == "hgetall" && honest:
			for j := 0; j+1 < len(r.arr); j += 2 {
				if f := r.arr[j].str; strings.HasSuffix(f, ":1") && hexToken.MatchString(strings.TrimSuffix(f, ":1")) {
					a.holders[key] = f
				}
			}
		case name == "hgetall" && strings.HasPrefix(key, "redlock-proxy:"):
			for j := 0; j+1 < len(r.arr); j += 2 {
				a.caught[key+" "+r.arr[j].str] = r.arr[j+1].str
			}
		case name == "dump" && !r.null && r.kind == '$':
			a.caught["dump "+key] = r.str
		case name == "get" && strings.HasPrefix(key, "redlock-proxy:") && r.kind == '$':
			a.caught["get "+key] = r.str
		}
	}
}

// Keys and values.

func (a *adversary) honest() string { return a.w.keys[a.rng.Intn(len(a.w.keys))] }

// target is an honest key for an attack on a held lock: mostly one read
// held less than half a second ago, when there is one.
func (a *adversary) target() string {
	now := a.w.h.now()
	var fresh []string
	for _, k := range a.w.keys {
		if t, ok := a.heldAt[k]; ok && now-t < 500*time.Millisecond {
			fresh = append(fresh, k)
		}
	}
	if len(fresh) > 0 && a.rng.Intn(4) > 0 {
		return fresh[a.rng.Intn(len(fresh))]
	}
	return a.honest()
}

// reservedKey is one of the proxy's own records (engine.FenceStatePrefix).
func (a *adversary) reservedKey() string {
	k := a.honest()
	return []string{"redlock-proxy:dataset", "redlock-proxy:clients", "redlock-proxy:fence:" + k,
		"redlock-proxy:lock:" + k, "redlock-proxy:hattempt:" + k, "redlock-proxy:x"}[a.rng.Intn(6)]
}

// ownKey is a key of the adversary's own: a lock key, or (with locks under
// a prefix) not.
func (a *adversary) ownKey() string {
	if a.rng.Intn(2) == 0 {
		return fmt.Sprintf("lock:adv:%d", a.rng.Intn(8))
	}
	return fmt.Sprintf("adv:%d", a.rng.Intn(8))
}

// key is any key: an honest one, a record of the proxy's, its own.
func (a *adversary) key() string {
	switch n := a.rng.Intn(10); {
	case n < 5:
		return a.honest()
	case n < 7:
		return a.reservedKey()
	}
	return a.ownKey()
}

// token is a value of the adversary's own (never a hex string: no honest
// client's token), or a token it read.
func (a *adversary) token() string {
	if a.rng.Intn(3) > 0 {
		if t := a.learnedToken(); t != "" {
			return t
		}
	}
	return a.ownToken()
}

func (a *adversary) ownToken() string { return fmt.Sprintf("adv-%08d", a.rng.Intn(1e8)) }

func (a *adversary) learnedToken() string {
	if len(a.learned) == 0 {
		return ""
	}
	ks := slices.Sorted(maps.Keys(a.learned))
	return a.learned[ks[a.rng.Intn(len(ks))]]
}

// tokenFor is the token the adversary uses on key k: the one it read
// there, a third of the time, when it read one. (With the holder's token,
// on one Redis, a release or an extend ends the holder's lock: the checker
// cannot tell two holders apart after it, so it does it seldom.)
func (a *adversary) tokenFor(k string) string {
	if t := a.learned[k]; t != "" && a.rng.Intn(3) == 0 {
		return t
	}
	return a.ownToken()
}

// edgeNumbers are the numbers a TTL, a length or a count may be given as.
var edgeNumbers = []string{"0", "-1", "1", "2", "7", "100", "1500", "30000", "-30000",
	"9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551616",
	"3153600000000", "9223372036854", "1e3", " 5", "5 ", "+5", "0x10", "1.5", "-0", "00", "inf", "nan", "", "abc"}

func (a *adversary) number() string { return edgeNumbers[a.rng.Intn(len(edgeNumbers))] }

// ttl is a TTL in ms: an edge, a short one (a lock taken over with it
// frees the key while its holder still relies on it), or an ordinary one.
func (a *adversary) ttl() string {
	switch a.rng.Intn(4) {
	case 0:
		return a.number()
	case 1, 2:
		return strconv.Itoa(20 + a.rng.Intn(300))
	}
	return strconv.Itoa(1 + a.rng.Intn(2000))
}

// value is any argument.
func (a *adversary) value() string {
	switch a.rng.Intn(8) {
	case 0, 1:
		return a.number()
	case 2:
		return a.key()
	case 3:
		return a.token()
	case 4:
		return []string{"NX", "XX", "PX", "EX", "GET", "KEEPTTL", "REPLACE", "ABSTTL", "GT", "LT", "PERSIST",
			"LEFT", "RIGHT", "STORE", "MATCH", "COUNT", "TYPE", "WITHSCORES", "*", "lock:*", "redlock-proxy:*"}[a.rng.Intn(21)]
	case 5:
		return strings.Repeat("x", a.rng.Intn(300))
	case 6:
		const odd = "\r\n\x00ü\xff"
		return odd[:a.rng.Intn(len(odd)+1)]
	}
	return a.ownToken()
}

// randomCommand is any command of the table with random arguments, keys
// where the table has them.
func (a *adversary) randomCommand() []string {
	var ci cmdInfo
	for {
		ci = a.table[a.rng.Intn(len(a.table))]
		if !ci.blocking && ci.name != "wait" && ci.name != "waitaof" {
			break
		}
	}
	parts := strings.Split(ci.name, "|")
	args := []string{randCase(a.rng, parts[0])}
	if len(parts) > 1 {
		args = append(args, randCase(a.rng, parts[1]))
	}
	total := ci.arity
	if total < 0 {
		total = -total + a.rng.Intn(4)
	}
	for i := len(args); i < total; i++ {
		last := ci.last
		if last < 0 {
			last += total
		}
		if ci.first > 0 && i >= ci.first && i <= last && (i-ci.first)%max(ci.step, 1) == 0 {
			args = append(args, a.key())
		} else {
			args = append(args, a.value())
		}
	}
	return args
}

func randCase(rng *rand.Rand, s string) string {
	if rng.Intn(2) == 0 {
		return strings.ToUpper(s)
	}
	return s
}

// peek reads: tokens of honest locks, the proxy's records.
func (a *adversary) peek() []string {
	k := a.honest()
	switch a.rng.Intn(9) {
	case 0, 1, 2:
		return []string{"GET", k}
	case 3:
		return []string{"HGETALL", k}
	case 4:
		return []string{"HGETALL", "redlock-proxy:dataset"}
	case 5:
		return []string{"DUMP", a.reservedKey()}
	case 6:
		return []string{"GET", "redlock-proxy:fence:" + k}
	case 7:
		return []string{"SCAN", "0", "MATCH", "redlock-proxy:*", "COUNT", "1000"}
	}
	return []string{"LOCK.INFO", k}
}

// write is one of the writes a client may send to a lock key or a record.
func (a *adversary) write() ([][]string, *advClaim) {
	k := a.key()
	o, v := a.ownKey(), a.token()
	one := func(args ...string) ([][]string, *advClaim) { return [][]string{args}, nil }
	forever := func(form string, ok func(rs []reply) bool) *advClaim {
		if hexToken.MatchString(v) {
			return nil // an honest client's token: whose lock would it be?
		}
		return &advClaim{form: form, key: k, value: v, granted: ok}
	}
	last := func(rs []reply) reply { return rs[len(rs)-1] }
	okReply := func(rs []reply) bool { return last(rs).kind == '+' && last(rs).str == "OK" }
	switch a.rng.Intn(30) {
	case 0:
		args := []string{"SET", k, v}
		for range a.rng.Intn(3) {
			switch a.rng.Intn(6) {
			case 0:
				args = append(args, "PX", a.ttl())
			case 1:
				args = append(args, "EX", a.number())
			case 2:
				args = append(args, "KEEPTTL")
			case 3:
				args = append(args, "GET")
			case 4:
				args = append(args, "XX")
			default:
				args = append(args, "PXAT", a.number())
			}
		}
		var c *advClaim
		if len(args) == 3 && slices.Contains(a.w.keys, k) {
			c = forever("SET", okReply)
		}
		return [][]string{args}, c
	case 1:
		return one("MSET", k, v, o, v)
	case 2:
		args := []string{"MSETNX", k, v}
		if a.rng.Intn(2) == 0 {
			args = append(args, o, v)
		}
		var c *advClaim
		if slices.Contains(a.w.keys, k) {
			c = forever("MSETNX", func(rs []reply) bool { n, _ := last(rs).int(); return n == 1 })
		}
		return [][]string{args}, c
	case 3:
		var c *advClaim
		if slices.Contains(a.w.keys, k) {
			c = forever("GETSET", func(rs []reply) bool { return !last(rs).isErr() })
		}
		return [][]string{{"GETSET", k, v}}, c
	case 4:
		if a.rng.Intn(2) == 0 {
			return one("RENAME", o, k)
		}
		return one("RENAME", k, o)
	case 5:
		return one("RENAMENX", o, k)
	case 6:
		args := []string{"COPY", o, k}
		if a.rng.Intn(2) == 0 {
			args = []string{"COPY", k, o}
		}
		if a.rng.Intn(2) == 0 {
			args = append(args, "REPLACE")
		}
		return one(args...)
	case 7:
		return one([]string{"DEL", "UNLINK"}[a.rng.Intn(2)], k)
	case 8:
		args := []string{[]string{"PEXPIRE", "EXPIRE", "PEXPIREAT", "EXPIREAT"}[a.rng.Intn(4)], k, a.number()}
		if a.rng.Intn(3) == 0 {
			args = append(args, []string{"NX", "XX", "GT", "LT"}[a.rng.Intn(4)])
		}
		return one(args...)
	case 9:
		return one("PERSIST", k)
	case 10:
		return one([][]string{{"GETEX", k, "PERSIST"}, {"GETEX", k, "PX", a.number()}, {"GETEX", k, "EXAT", a.number()}, {"GETDEL", k}}[a.rng.Intn(4)]...)
	case 11:
		return one("SETRANGE", k, a.number(), v)
	case 12:
		return one("APPEND", k, v)
	case 13:
		return one([]string{"INCR", "DECR", "INCRBYFLOAT"}[a.rng.Intn(3)], k)
	case 14:
		args := []string{"RESTORE", k, a.number(), a.dumps[a.rng.Intn(len(a.dumps))]}
		if a.rng.Intn(2) == 0 {
			args = append(args, "REPLACE")
		}
		if a.rng.Intn(3) == 0 {
			args = append(args, "ABSTTL")
		}
		return one(args...)
	case 15:
		return one("SORT", o, "ALPHA", "STORE", k)
	case 16:
		return one("LMOVE", o, k, "LEFT", "RIGHT")
	case 17:
		return one("SUNIONSTORE", k, o)
	case 18:
		h := a.holders[k]
		if h == "" {
			h = v + ":1"
		}
		return one([][]string{{"HSET", k, h, "1"}, {"HDEL", k, h}, {"HINCRBY", k, h, "-1"}, {"HSET", k, "adv", "1"}}[a.rng.Intn(4)]...)
	case 19:
		return one("SETNX", k, v)
	case 20:
		return one([]string{"SETEX", "PSETEX"}[a.rng.Intn(2)], k, a.number(), v)
	case 21:
		return one([][]string{{"LPUSH", k, v}, {"SADD", k, v}, {"ZADD", k, "1", v}, {"XADD", k, "*", "f", v}, {"PFADD", k, v}}[a.rng.Intn(5)]...)
	case 22:
		return one("BITOP", "OR", k, o)
	case 23:
		ttl := 1 + a.rng.Intn(2000)
		c := forever("SET NX PX", okReply)
		if c != nil {
			c.ttl = time.Duration(ttl) * time.Millisecond
		}
		return [][]string{{"SET", k, v, "NX", "PX", strconv.Itoa(ttl)}}, c
	case 24:
		return one("OBJECT", "ENCODING", k)
	case 25:
		return one("SMOVE", o, k, v)
	case 26:
		return one("ZRANGESTORE", k, o, "0", "-1")
	case 27:
		return one("BLMOVE", o, k, "LEFT", "LEFT", "0.05")
	case 28:
		return one("SET", k, v, "NX", "GET", "PX", a.ttl())
	}
	return one("SET", k, v, "XX", "KEEPTTL")
}

// advScript is a script that writes a key it does not declare.
type advScript struct {
	name, body string
	argv       func(a *adversary, k string) []string
	claim      bool // a SET NX PX: ARGV key, value, TTL
}

var advScripts = []advScript{
	{name: "del", body: "return redis.call('del', ARGV[1])", argv: func(a *adversary, k string) []string { return []string{k} }},
	{name: "set", body: "return redis.call('set', ARGV[1], ARGV[2])", argv: func(a *adversary, k string) []string { return []string{k, a.token()} }},
	{name: "set nx px", body: "return redis.call('set', ARGV[1], ARGV[2], 'NX', 'PX', ARGV[3])", claim: true,
		argv: func(a *adversary, k string) []string {
			return []string{k, a.ownToken(), strconv.Itoa(100 + a.rng.Intn(1900))}
		}},
	{name: "pexpire", body: "return redis.call('pexpire', ARGV[1], ARGV[2])", argv: func(a *adversary, k string) []string { return []string{k, a.number()} }},
	{name: "persist", body: "return redis.call('persist', ARGV[1])", argv: func(a *adversary, k string) []string { return []string{k} }},
	{name: "compare and delete", body: "if redis.call('get', ARGV[1]) == ARGV[2] then return redis.call('del', ARGV[1]) end return 0",
		argv: func(a *adversary, k string) []string { return []string{k, a.tokenFor(k)} }},
	{name: "flushall", body: "return redis.call('flushall')", argv: func(*adversary, string) []string { return nil }},
	{name: "flushdb", body: "return redis.call('flushdb')", argv: func(*adversary, string) []string { return nil }},
	{name: "swapdb", body: "return redis.call('swapdb', 0, 1)", argv: func(*adversary, string) []string { return nil }},
	{name: "move", body: "return redis.call('move', ARGV[1], 1)", argv: func(a *adversary, k string) []string { return []string{k} }},
	{name: "hset", body: "return redis.call('hset', ARGV[1], ARGV[2], ARGV[3])",
		argv: func(a *adversary, k string) []string {
			return []string{"redlock-proxy:dataset", []string{"born", "doubt", "seq", "id"}[a.rng.Intn(4)], a.value()}
		}},
	{name: "del record", body: "return redis.call('del', ARGV[1])", argv: func(a *adversary, k string) []string { return []string{a.reservedKey()} }},
}

// script sends a script that writes a key it does not declare: none
// declared, or another (the key in ARGV); by EVAL, EVAL_RO, or SCRIPT LOAD
// and EVALSHA.
func (a *adversary) script() ([][]string, *advClaim) {
	s := advScripts[a.rng.Intn(len(advScripts))]
	k := a.honest()
	if a.rng.Intn(5) == 0 {
		k = a.key()
	}
	body := s.body
	argv := s.argv(a, k)
	if s.name == "del" && a.rng.Intn(3) == 0 {
		body, argv = "return redis.call('del', '"+k+"')", nil // the key in the text
	}
	var keys []string
	if a.rng.Intn(2) == 0 {
		keys = []string{a.ownKey()}
	}
	cmd := func(name, first string) []string {
		out := []string{name, first, strconv.Itoa(len(keys))}
		out = append(out, keys...)
		return append(out, argv...)
	}
	var cmds [][]string
	switch a.rng.Intn(4) {
	case 0:
		cmds = [][]string{{"SCRIPT", "LOAD", body}, cmd("EVALSHA", sha(body))}
	case 1:
		cmds = [][]string{cmd("EVAL_RO", body)}
	default:
		cmds = [][]string{cmd("EVAL", body)}
	}
	var c *advClaim
	if s.claim && slices.Contains(a.w.keys, k) {
		ttl, _ := strconv.Atoi(argv[2])
		c = &advClaim{form: "SET NX PX by a script", key: k, value: argv[1], ttl: time.Duration(ttl) * time.Millisecond,
			granted: func(rs []reply) bool { r := rs[len(rs)-1]; return r.kind == '+' && r.str == "OK" }}
	}
	return cmds, c
}

func sha(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// advLibrary is the adversary's function library: its functions write the
// key they are given in ARGV.
const advLibrary = `#!lua name=advlib
redis.register_function('adv_del', function(keys, args) return redis.call('del', args[1]) end)
redis.register_function('adv_setnx', function(keys, args) return redis.call('set', args[1], args[2], 'NX', 'PX', args[3]) end)
redis.register_function('adv_pexpire', function(keys, args) return redis.call('pexpire', args[1], args[2]) end)
redis.register_function('adv_flushall', function(keys, args) return redis.call('flushall') end)
redis.register_function('adv_hset', function(keys, args) return redis.call('hset', args[1], args[2], args[3]) end)
redis.register_function{function_name='adv_ro_del', callback=function(keys, args) return redis.call('del', args[1]) end, flags={'no-writes'}}
`

// function loads the adversary's library and calls one of its functions.
func (a *adversary) function() ([][]string, *advClaim) {
	k := a.honest()
	var keys []string
	if a.rng.Intn(2) == 0 {
		keys = []string{a.ownKey()}
	}
	name, argv := "adv_del", []string{k}
	var c *advClaim
	switch a.rng.Intn(7) {
	case 1:
		tok, ttl := a.ownToken(), 100+a.rng.Intn(1900)
		name, argv = "adv_setnx", []string{k, tok, strconv.Itoa(ttl)}
		c = &advClaim{form: "SET NX PX by a function", key: k, value: tok, ttl: time.Duration(ttl) * time.Millisecond,
			granted: func(rs []reply) bool { r := rs[len(rs)-1]; return r.kind == '+' && r.str == "OK" }}
	case 2:
		name, argv = "adv_pexpire", []string{k, a.number()}
	case 3:
		name, argv = "adv_flushall", nil
	case 4:
		name, argv = "adv_hset", []string{"redlock-proxy:dataset", "born", a.ownToken()}
	case 5:
		name = "adv_ro_del"
	case 6:
		name, argv = "adv_del", []string{a.reservedKey()}
	}
	call := []string{"FCALL", name, strconv.Itoa(len(keys))}
	if name == "adv_ro_del" || a.rng.Intn(8) == 0 {
		call[0] = "FCALL_RO"
	}
	call = append(append(call, keys...), argv...)
	return [][]string{{"FUNCTION", "LOAD", "REPLACE", advLibrary}, call}, c
}

// Recognised lock scripts, as their libraries send them (the rest are in
// internal/redistest and unlockScript).
const (
	redisPyRelease     = "\n        local token = redis.call('get', KEYS[1])\n        if not token or token ~= ARGV[1] then\n            return 0\n        end\n        redis.call('del', KEYS[1])\n        return 1\n    "
	cheprasovUpdate    = "\n        if (ARGV[1] == redis.call(\"GET\", KEYS[1])) then\n            return redis.call(\"PEXPIRE\", KEYS[1], ARGV[2]);\n        end;\n        return 0;\n    "
	nodeRedlockExtend  = "\n  -- Return 0 if an entry exists with a *different* lock value.\n  for i, key in ipairs(KEYS) do\n    if redis.call(\"get\", key) ~= ARGV[1] then\n      return 0\n    end\n  end\n\n  -- Update the entry for each provided key.\n  for i, key in ipairs(KEYS) do\n    redis.call(\"set\", key, ARGV[1], \"PX\", ARGV[2])\n  end\n\n  -- Return the number of entries updated.\n  return #KEYS\n"
	nodeRedlockRelease = "\n  local count = 0\n  for i, key in ipairs(KEYS) do\n    -- Only remove entries for *this* lock value.\n    if redis.call(\"get\", key) == ARGV[1] then\n      redis.pcall(\"del\", key)\n      count = count + 1\n    end\n  end\n\n  -- Return the number of entries removed.\n  return count\n"
	laravelAdd         = "return redis.call('exists',KEYS[1])<1 and redis.call('setex',KEYS[1],ARGV[2],ARGV[1])"
	symfonyTimeProbe   = "\n                local now = redis.call(\"TIME\")\n                redis.call(\"SET\", KEYS[1], \"1\", \"PX\", 1)\n\n\t            return 1\n            "
)

// recognised is a recognised lock script and the arguments it is called
// with on honest key k.
type recognised struct {
	name, text string
	keys       func(a *adversary, k string) []string
	argv       func(a *adversary, k string) []string
}

func just(k string) []string { return []string{k} }

var recognisedScripts = []recognised{
	{"unlock", unlockScript, func(_ *adversary, k string) []string { return just(k) },
		func(a *adversary, k string) []string { return []string{a.tokenFor(k)} }},
	{"redis-py release", redisPyRelease, func(_ *adversary, k string) []string { return just(k) },
		func(a *adversary, k string) []string { return []string{a.tokenFor(k)} }},
	{"redis-py extend", redistest.RedisPyExtend, func(_ *adversary, k string) []string { return just(k) },
		func(a *adversary, k string) []string {
			return []string{a.tokenFor(k), a.ttl(), []string{"0", "1", "", "x", "00"}[a.rng.Intn(5)]}
		}},
	{"cheprasov update", cheprasovUpdate, func(_ *adversary, k string) []string { return just(k) },
		func(a *adversary, k string) []string { return []string{a.tokenFor(k), a.ttl()} }},
	{"node-redlock extend", nodeRedlockExtend, func(a *adversary, k string) []string { return a.someKeys(k) },
		func(a *adversary, k string) []string { return []string{a.tokenFor(k), a.ttl()} }},
	{"node-redlock release", nodeRedlockRelease, func(a *adversary, k string) []string { return a.someKeys(k) },
		func(a *adversary, k string) []string { return []string{a.tokenFor(k)} }},
	{"Laravel add", laravelAdd, func(_ *adversary, k string) []string { return just(k) },
		func(a *adversary, k string) []string { return []string{a.ownToken(), a.number()} }},
	{"bsm/redislock 0.10 obtain", redistest.BsmObtain, func(a *adversary, k string) []string { return a.someKeys(k) },
		func(a *adversary, k string) []string {
			tok := a.tokenFor(k)
			n := []string{"0", "0", "-1", "-5", strconv.Itoa(len(tok)), strconv.Itoa(len(tok) + 3), "x", "", "1"}[a.rng.Intn(9)]
			return []string{tok + "-adv", n, a.ttl()}
		}},
	{"bsm/redislock 0.10 release", redistest.BsmRelease, func(a *adversary, k string) []string { return a.someKeys(k) },
		func(a *adversary, k string) []string { return []string{a.tokenFor(k)} }},
	{"bsm/redislock 0.10 refresh", redistest.BsmRefresh, func(a *adversary, k string) []string { return a.someKeys(k) },
		func(a *adversary, k string) []string { return []string{a.tokenFor(k), a.ttl()} }},
	{"Redisson lock", redistest.RedissonAcquireGe319, func(_ *adversary, k string) []string { return just(k) },
		func(a *adversary, k string) []string { return []string{a.ttl(), a.holderFor(k)} }},
	{"Redisson renewal", redistest.RedissonRenewLe343, func(_ *adversary, k string) []string { return just(k) },
		func(a *adversary, k string) []string { return []string{a.ttl(), a.holderFor(k)} }},
	{"Redisson unlock", redistest.RedissonUnlockGe324,
		func(_ *adversary, k string) []string {
			return []string{k, "redisson_lock__channel:{" + k + "}", "redisson_unlock_latch:{" + k + "}:adv"}
		},
		func(a *adversary, k string) []string { return []string{"0", a.ttl(), a.holderFor(k), "publish", "100"} }},
	{"Symfony TIME probe", symfonyTimeProbe, func(_ *adversary, k string) []string { return just(k) },
		func(*adversary, string) []string { return nil }},
}

// someKeys is k, sometimes with another honest key.
func (a *adversary) someKeys(k string) []string {
	if a.rng.Intn(4) == 0 {
		return []string{k, a.honest()}
	}
	return []string{k}
}

// holderFor is a Redisson holder for key k: the one read there, mostly.
func (a *adversary) holderFor(k string) string {
	if h := a.holders[k]; h != "" && a.rng.Intn(4) > 0 {
		return h
	}
	return a.ownToken() + ":1"
}

// hiddenPrefixes are lines the script normaliser takes for a comment in
// whole and Lua does not: a line comment ends at "\r" too, and a long
// bracket of level 1 or more ends at its own closing bracket. The code
// after the comment returns before the library's code runs, or does
// something else first.
var hiddenPrefixes = []string{
	"-- x\rdo return 0 end\n",
	"--[==[ x ]==] do return 0 end\n",
	"--[=[ x ]=] do return redis.call('get', KEYS[1]) end\n",
	"-- x\rreturn 99\n",
	"--[==[ ]==] redis.call('set', 'adv:hidden', ARGV[1])\n",
}

// hidden sends a recognised lock script with code hidden in it.
func (a *adversary) hidden() [][]string {
	s := recognisedScripts[a.rng.Intn(len(recognisedScripts))]
	k := a.target()
	text := hiddenPrefixes[a.rng.Intn(len(hiddenPrefixes))] + s.text
	keys := s.keys(a, k)
	call := func(name, first string) []string {
		out := append([]string{name, first, strconv.Itoa(len(keys))}, keys...)
		return append(out, s.argv(a, k)...)
	}
	if a.rng.Intn(3) == 0 {
		return [][]string{{"SCRIPT", "LOAD", text}, call("EVALSHA", sha(text))}
	}
	return [][]string{call("EVAL", text)}
}

// edge sends a recognised lock script, or a lock command, with edge
// arguments.
func (a *adversary) edge() []string {
	k := a.target()
	if a.rng.Intn(3) > 0 {
		s := recognisedScripts[a.rng.Intn(len(recognisedScripts))]
		if a.rng.Intn(2) == 0 { // one that takes a lock: reading its arguments wrong takes a held one
			name := []string{"bsm/redislock 0.10 obtain", "Laravel add", "Redisson lock"}[a.rng.Intn(3)]
			s = recognisedScripts[slices.IndexFunc(recognisedScripts, func(r recognised) bool { return r.name == name })]
		}
		keys := s.keys(a, k)
		out := append([]string{"EVAL", s.text, strconv.Itoa(len(keys))}, keys...)
		return append(out, s.argv(a, k)...)
	}
	switch a.rng.Intn(6) {
	case 0:
		return []string{"LOCK.ACQUIRE", k, a.number(), "TOKEN", a.tokenFor(k), "REENTRANT"}
	case 1:
		return []string{"LOCK.EXTEND", k, a.tokenFor(k), a.number()}
	case 2:
		return []string{"LOCK.RELEASE", k, a.tokenFor(k)}
	case 3:
		return []string{"SET", k, a.ownToken(), "NX", "PX", a.number(), "PX", a.number()}
	case 4:
		return []string{"SET", k, a.ownToken(), "NX", []string{"PXAT", "EXAT"}[a.rng.Intn(2)], a.number()}
	}
	return []string{"LOCK.ACQUIRE", k, a.number(), "TOKEN", a.ownToken(), []string{"LEASE", "WAIT", "REENTRANT"}[a.rng.Intn(3)], a.number()}
}

// reserved reads or writes the proxy's own records: the data evidence
// (written back as captured, or changed), fencing counters and states,
// hash-lock attempts, the settings registry; by a command, a script with
// the key in ARGV, or one that declares it.
func (a *adversary) reserved() [][]string {
	k := a.honest()
	ds := "redlock-proxy:dataset"
	var c []string
	switch a.rng.Intn(14) {
	case 0, 1, 2:
		return a.evidence()
	case 3:
		if d := a.caught["dump "+ds]; d != "" {
			c = []string{"RESTORE", ds, "0", d, "REPLACE"}
		} else {
			c = []string{"DUMP", ds}
		}
	case 4:
		c = []string{"DEL", ds}
	case 5:
		c = []string{"DEL", "redlock-proxy:fence:" + k}
	case 6:
		c = []string{"SET", "redlock-proxy:fence:" + k, []string{"0", "1", "x", "-5"}[a.rng.Intn(4)]}
	case 7:
		c = []string{"DEL", "redlock-proxy:lock:" + k}
	case 8:
		c = []string{"HSET", "redlock-proxy:lock:" + k, "holds", []string{"1", "99", "0"}[a.rng.Intn(3)]}
	case 9:
		c = []string{"HSET", "redlock-proxy:lock:" + k, "kind", "new", "attempt", ""}
	case 10:
		c = []string{"DEL", "redlock-proxy:hattempt:" + k}
	case 11:
		c = []string{"DEL", "redlock-proxy:clients"}
	case 12:
		c = []string{"HSET", "redlock-proxy:clients", a.ownToken(), a.value()}
	default:
		c = []string{"RENAME", "redlock-proxy:fence:" + k, "redlock-proxy:fence:" + a.honest()}
	}
	switch a.rng.Intn(6) {
	case 0: // the whole command from a script, its key in ARGV
		argv := make([]string, len(c))
		lua := make([]string, len(c))
		for i, x := range c {
			argv[i] = x
			lua[i] = fmt.Sprintf("ARGV[%d]", i+1)
		}
		return [][]string{append([]string{"EVAL", "return redis.call(" + strings.Join(lua, ", ") + ")", "0"}, argv...)}
	case 1: // the same, the key declared
		lua := []string{"'" + c[0] + "'", "KEYS[1]"}
		for i := range c[2:] {
			lua = append(lua, fmt.Sprintf("ARGV[%d]", i+1))
		}
		return [][]string{append([]string{"EVAL", "return redis.call(" + strings.Join(lua, ", ") + ")", "1", c[1]}, c[2:]...)}
	}
	return [][]string{c}
}

// evidence changes the data evidence on the backend (a master, when the
// backend votes) so that a proxy that meets the master for the first time
// trusts it: the record says it survived a restart (born is another
// process) and no one doubts it; or writes back the id and a high count of
// a record it read earlier.
func (a *adversary) evidence() [][]string {
	ds := "redlock-proxy:dataset"
	if id := a.caught[ds+" id"]; id != "" && a.rng.Intn(4) == 0 {
		return [][]string{{"HSET", ds, "id", id, "seq", "999999999", "born", a.caught[ds+" born"]}, {"HDEL", ds, "doubt"}}
	}
	if a.rng.Intn(8) == 0 {
		return [][]string{{"HGETALL", ds}}
	}
	return [][]string{{"HSET", ds, "born", a.ownToken()}, {"HDEL", ds, "doubt"}}
}

// stretch writes TTLs of centuries, or pushes one onto a key that does not
// exist: on keys of its own, lock keys.
func (a *adversary) stretch() []string {
	k := fmt.Sprintf("lock:adv:%d", a.rng.Intn(1000))
	long := []string{"3153600000000", "9223372036854", "9223372036854775", "31536000000"}[a.rng.Intn(4)]
	switch a.rng.Intn(6) {
	case 0:
		return []string{"SET", k, a.ownToken(), "NX", "EX", "9223372036"}
	case 1:
		return []string{"PEXPIRE", k, long}
	case 2:
		return []string{"LOCK.ACQUIRE", k, long, "TOKEN", a.ownToken()}
	case 3:
		return []string{"SET", k, a.ownToken(), "NX", "PXAT", "9223372036854"}
	case 4:
		return []string{"EVAL", redistest.RedissonAcquireGe319, "1", k, long, a.ownToken() + ":1"}
	}
	return []string{"SET", k, a.ownToken(), "NX", "PX", long}
}

// big sends a payload of megabytes through a lock operation, or reads one
// back through the quorum.
func (a *adversary) big() []string {
	size := (1 + a.rng.Intn(4)) << 20
	v := strings.Repeat(string(rune('A'+a.rng.Intn(26))), size)
	k := fmt.Sprintf("lock:adv:big%d", a.rng.Intn(4))
	switch a.rng.Intn(5) {
	case 0:
		return []string{"LOCK.ACQUIRE", k, "20000", "TOKEN", v}
	case 1:
		return []string{"GET", k}
	case 2:
		return []string{"SET", a.honest(), v, "NX", "PX", "1000"}
	case 3:
		return []string{"EVAL", redistest.BsmObtain, "1", k, v, "5", "20000"}
	}
	return []string{"SET", k, v, "NX", "PX", "20000"}
}

// admin sends an administrative command.
func (a *adversary) admin() []string {
	return [][]string{
		{"FLUSHALL"}, {"FLUSHALL", "ASYNC"}, {"FLUSHDB"}, {"CONFIG", "SET", "appendonly", "no"},
		{"CONFIG", "SET", "maxmemory-policy", "allkeys-random"}, {"CLIENT", "KILL", "TYPE", "normal"},
		{"CLIENT", "PAUSE", "200", "WRITE"}, {"DEBUG", "RELOAD"}, {"DEBUG", "SET-ACTIVE-EXPIRE", "0"},
		{"SHUTDOWN", "NOSAVE"}, {"SWAPDB", "0", "1"}, {"MOVE", a.honest(), "1"}, {"SCRIPT", "KILL"},
		{"FUNCTION", "FLUSH"}, {"ACL", "SETUSER", "adv", "on", ">adv", "~*", "+@all"}, {"MODULE", "LIST"},
		{"REPLICAOF", "127.0.0.1", "1"}, {"FAILOVER"}, {"BGREWRITEAOF"}, {"SELECT", "1"}, {"MONITOR"},
	}[a.rng.Intn(21)]
}

// The janitor: values without a TTL (or with one of centuries) that the
// adversary left on the honest keys would keep the honest clients from
// those keys for the rest of the run. Every second, on each master
// directly, it deletes such a value where no honest holding may still
// rely on it, in one script that checks it again: it never takes an honest
// client's lock. Its deletions end the adversary's own holdings (relies).
type janitor struct {
	w       *world
	clients []*redis.Client
	relies  bool // the adversary relies on its grants: the janitor's deletions end them
}

var janitorScript = redis.NewScript(`
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then return 0 end
local p = redis.call('pttl', KEYS[1])
if p >= 0 and p <= 10000 then return 0 end
local v = t == 'string' and redis.call('get', KEYS[1])
for i = 1, #ARGV do
  if v == ARGV[i] or t == 'hash' and redis.call('hexists', KEYS[1], ARGV[i]) == 1 then return 0 end
end
redis.call('del', KEYS[1])
return 1`)

func (j *janitor) run(stop <-chan struct{}) {
	for i, m := range j.w.masters {
		// Dialled where voter i's process is now: a failover moves it.
		dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: 100 * time.Millisecond}
			return d.DialContext(ctx, network, j.w.masterAddr(i))
		}
		j.clients = append(j.clients, redis.NewClient(&redis.Options{Addr: m.Addr, Dialer: dial, MaxRetries: -1, Protocol: 2,
			DialTimeout: 100 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond}))
		defer j.clients[i].Close()
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, k := range j.w.keys {
			live := j.w.h.liveHolders(k)
			for i, c := range j.clients {
				s := j.w.h.now()
				var win *adverse
				if j.relies {
					win = j.w.h.adverse(k, s, fmt.Sprintf("janitor on master %d", i), true, 0)
				}
				n, err := janitorScript.Run(context.Background(), c, []string{k}, live).Int()
				switch {
				case win == nil:
				case err == nil:
					j.w.h.settle(win, j.w.h.now())
				default:
					j.w.h.settle(win, s+lateBound)
				}
				if n == 1 {
					j.w.h.count("janitor: deleted a value without a TTL")
				}
			}
		}
	}
}

// advLog is one action of the adversary, for a violation's report.
type advLog struct {
	at         time.Duration
	proxy      int
	kind, what string
	answer     string
	ends       []string // the honest keys whose locks it may end
}

// adverse is a command that may end the locks of key on one Redis (or, for
// the janitor's, only the adversary's own): every holding of key it
// overlaps ends at sent for the checker.
type adverse struct {
	key         string
	sent, until time.Duration // until: -1 while in flight, -2 not run
	what        string
	ownOnly     bool
	action      int // the adversary's action it is part of (0: the janitor's)
}

// adversaryControls are the negative controls of the rules of the boundary
// around lock state: for each, the adversary's attack on it alone, against
// a proxy with that rule switched off (by the guard named; a build
// without that guard has no such rule yet, and runs the attack as it is),
// must make the checker report two holders, or, for the rules that keep
// one client from denying lock service to the others, a denial.
func adversaryControls(base map[string]int) []schedule {
	slow := map[string]int{"stall": 1, "delay": 1, "reset": 1} // locks granted on two masters of three
	return []schedule{
		// An unrecognised script or a function runs on a voting master:
		// its SET NX of a key it does not declare, answered OK, is a lock
		// the quorum does not know.
		{name: "adversary_unrecognised_scripts_off", guardsOff: []string{"backend-scripts"}, backend: "voting",
			faults: slow, ops: base, adversary: adversarySpec{rate: 20, attacks: map[string]int{"script": 2, "function": 1}, relies: true}},
		// A command the quorum does not serve (MSETNX, GETSET) names a
		// lock key and runs on one master: a grant its client relies on
		// that the quorum does not know.
		{name: "adversary_lock_key_commands_off", guardsOff: []string{"backend-lock-keys"}, backend: "voting", lockKeys: "*",
			faults: slow, ops: base, adversary: adversarySpec{rate: 20, attacks: map[string]int{"write": 1}, relies: true}},
		// The proxy's records written by a client: the data evidence of
		// the backend, wiped, made to say that it kept its data, for the
		// proxy that restarts meanwhile. Locks under a prefix: with every
		// key a lock key, the voting backend would refuse the writes of
		// the records as those of lock keys (the boundary's other rule).
		{name: "adversary_reserved_keys_off", guardsOff: []string{"reserved-keys"}, backend: "voting", lockKeys: "lock:*",
			faults: map[string]int{"lose-backend": 1}, ops: base,
			adversary: adversarySpec{rate: 30, attacks: map[string]int{"evidence": 3, "reserved": 1}}},
		// The per-key, bounded restart guard, the reading of scripts as
		// Lua reads them and recognised scripts that read their arguments
		// as their Lua does are no switch but the code itself: the attacks
		// on them (TTLs of centuries, code hidden in a recognised script,
		// edge arguments) run in every history, and their controls are
		// the former code's, in the tests that keep it
		// (TestLongLockGuardsOnlyItsKey, TestHiddenCodeIsNotTheUnlock,
		// TestBsmObtainTokenLengths).
	}
}
