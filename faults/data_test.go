package faults

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// The data client: application data traffic through the proxies beside
// the locks, on keys of its own (data:<n>:<generation>:…, a prefix no
// other client of the history and none of the adversary's choices names),
// in databases 0 and 1. Each of its streams (one goroutine's keys in one
// database) keeps an exact model of what its keys hold, and every reply
// is checked against it: INCR and INCRBY, SET and GET, MSET and MGET,
// HSET, HGET and HGETALL, LPUSH, LRANGE and LTRIM, EXPIRE, TTL and
// PERSIST, a PEXPIRE waited out, DEL, EXISTS, in pipelines and in
// MULTI/EXEC. The keys of databases 0 and 1 start with the same names and
// different values: a command run in the wrong database answers wrong.
//
// What it may not rely on, and how it knows:
//   - a flush, or a SWAPDB: with a backend of the proxies' own, FLUSHALL
//     and FLUSHDB pass through to it (the schedule's and the adversary's),
//     and the adversary's scripts, which run there, call FLUSHALL,
//     FLUSHDB and SWAPDB 0 1. Each stream keeps a sentinel key, written
//     with its database's number when the stream starts (again) and never
//     written otherwise: a reply that differs from the model while the
//     sentinel is gone or holds the other database's number is their
//     doing, and the stream starts again. (Simpler than taking flushes out
//     of the schedule and the adversary, which would take them away from
//     the locks' history too.) A reply that differs after the adversary
//     sent a flush or a SWAPDB (history.disrupts: in a script, in a
//     transaction, which the sentinel can miss: a swap there and back)
//     since the stream started again is counted, not a violation. With a
//     voting backend nothing flushes or swaps (the proxies refuse it).
//   - the loss of master 0's data, with a voting backend (the data lives
//     there): the schedule marks each fault that may lose it (lossGen, odd
//     while it is under way); a reply in or across such a fault is not
//     checked, and the stream starts again after it (docs/operations.md,
//     "Data when masters fail"). With a backend of its own no master
//     fault is a loss: the schedule marks none.
//   - a proxy restart cuts the connections through it: an error of a
//     command on a connection the restart cut is not a violation.
//   - a command answered with an error may or may not have run, and may
//     still run later (held back on its way to a stalled or slowed master,
//     lateBound): after any error the stream starts again on keys of a new
//     generation. The commands pipelined after it in the same operation
//     may still be answered: the proxy serves EXPIRE, TTL and PERSIST
//     (among others) one by one, each on a pooled backend connection, and
//     when master 0 restarts, the connection it held answers one command
//     with an error and the next command goes on a new one
//     (docs/operations.md, "master0 restarted"). Their replies are judged
//     against both: the keys as if the failed command ran, and as if it
//     did not (EXPIRE failed, then TTL -1, is no violation).
//
// With a backend of its own, every other error and every reply that
// differs from the model is a violation of kind "data": master faults
// (kills, restarts, wipes, stalls, delays, cut connections) must not touch
// data. With a voting backend, errors are counted, not violations (the
// data's master may be down or stalled), and a reply that is not an error
// must still match the model.

// dataTTL is the long TTL of EXPIRE, in seconds: no key outlives a run.
const dataTTL = 100000

// dataNames are the keys of a stream, after its prefix: counters,
// strings, a hash, a list.
var dataNames = []string{"ctr:0", "ctr:1", "str:0", "str:1", "str:2", "hash", "list"}

// dataEntry is what the model says a key holds.
type dataEntry struct {
	kind byte // 's' string, 'h' hash, 'l' list
	s    string
	h    map[string]string
	l    []string // head first
	ttl  bool     // a TTL set by EXPIRE (dataTTL)
}

// dataModel is what a stream's keys hold, by key.
type dataModel map[string]*dataEntry

// ttlWant is the reply of TTL of a key with a TTL: in (0, dataTTL].
type ttlWant struct{}

// hashWant is the reply of HGETALL: the fields and values, in any order.
type hashWant map[string]string

// clone is a copy of the model that exec on one does not change in the
// other.
func (m dataModel) clone() dataModel {
	out := make(dataModel, len(m))
	for k, e := range m {
		c := *e
		c.h = maps.Clone(e.h)
		c.l = slices.Clone(e.l)
		out[k] = &c
	}
	return out
}

// exec applies a command to the model and returns the reply it must get.
// PEXPIRE's key is gone at the stream's next command (the stream waits
// for its TTL to pass).
func (m dataModel) exec(cmd []string) any {
	name, args := strings.ToUpper(cmd[0]), cmd[1:]
	switch name {
	case "INCR", "INCRBY":
		by := int64(1)
		if name == "INCRBY" {
			by, _ = strconv.ParseInt(args[1], 10, 64)
		}
		e := m[args[0]]
		if e == nil {
			e = &dataEntry{kind: 's', s: "0"}
			m[args[0]] = e
		}
		n, _ := strconv.ParseInt(e.s, 10, 64)
		n += by
		e.s = strconv.FormatInt(n, 10)
		return n
	case "SET":
		m[args[0]] = &dataEntry{kind: 's', s: args[1]}
		return "OK"
	case "GET":
		if e := m[args[0]]; e != nil {
			return e.s
		}
		return nil
	case "MSET":
		for i := 0; i+1 < len(args); i += 2 {
			m[args[i]] = &dataEntry{kind: 's', s: args[i+1]}
		}
		return "OK"
	case "MGET":
		out := make([]any, len(args))
		for i, k := range args {
			if e := m[k]; e != nil {
				out[i] = e.s
			}
		}
		return out
	case "HSET":
		e := m[args[0]]
		if e == nil {
			e = &dataEntry{kind: 'h', h: map[string]string{}}
			m[args[0]] = e
		}
		added := int64(0)
		for i := 1; i+1 < len(args); i += 2 {
			if _, ok := e.h[args[i]]; !ok {
				added++
			}
			e.h[args[i]] = args[i+1]
		}
		return added
	case "HGET":
		if e := m[args[0]]; e != nil {
			if v, ok := e.h[args[1]]; ok {
				return v
			}
		}
		return nil
	case "HGETALL":
		out := hashWant{}
		if e := m[args[0]]; e != nil {
			maps.Copy(out, e.h)
		}
		return out
	case "LPUSH":
		e := m[args[0]]
		if e == nil {
			e = &dataEntry{kind: 'l'}
			m[args[0]] = e
		}
		for _, v := range args[1:] {
			e.l = append([]string{v}, e.l...)
		}
		return int64(len(e.l))
	case "LRANGE": // 0 -1 only
		out := []any{}
		if e := m[args[0]]; e != nil {
			for _, v := range e.l {
				out = append(out, v)
			}
		}
		return out
	case "LTRIM": // 0 n only
		if e := m[args[0]]; e != nil {
			n, _ := strconv.Atoi(args[2])
			e.l = e.l[:min(n+1, len(e.l))]
			if len(e.l) == 0 {
				delete(m, args[0])
			}
		}
		return "OK"
	case "EXPIRE":
		if e := m[args[0]]; e != nil {
			e.ttl = true
			return int64(1)
		}
		return int64(0)
	case "PEXPIRE":
		if m[args[0]] != nil {
			delete(m, args[0])
			return int64(1)
		}
		return int64(0)
	case "PERSIST":
		if e := m[args[0]]; e != nil && e.ttl {
			e.ttl = false
			return int64(1)
		}
		return int64(0)
	case "TTL":
		switch e := m[args[0]]; {
		case e == nil:
			return int64(-2)
		case !e.ttl:
			return int64(-1)
		}
		return ttlWant{}
	case "DEL":
		n := int64(0)
		for _, k := range args {
			if m[k] != nil {
				n++
				delete(m, k)
			}
		}
		return n
	case "EXISTS":
		n := int64(0)
		for _, k := range args {
			if m[k] != nil {
				n++
			}
		}
		return n
	}
	panic("data model: no command " + name)
}

// dataMismatch is "" when a reply (got, err) is what want says, otherwise
// what differs.
func dataMismatch(want, got any, err error) string {
	if err == redis.Nil {
		got, err = nil, nil
	}
	if err != nil {
		return fmt.Sprintf("want %s, got the error %q", showData(want), err.Error())
	}
	ok := false
	switch w := want.(type) {
	case ttlWant:
		n, isInt := got.(int64)
		ok = isInt && n > 0 && n <= dataTTL
	case hashWant:
		a, isArr := got.([]any)
		if isArr && len(a)%2 == 0 {
			h := hashWant{}
			for i := 0; i+1 < len(a); i += 2 {
				f, _ := a[i].(string)
				v, _ := a[i+1].(string)
				h[f] = v
			}
			ok = len(h) == len(a)/2 && maps.Equal(h, w)
		}
	case []any:
		a, isArr := got.([]any)
		ok = isArr && len(a) == len(w)
		for i := 0; ok && i < len(w); i++ {
			ok = a[i] == w[i]
		}
	default:
		ok = got == want
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("want %s, got %s", showData(want), showData(got))
}

// showData writes a reply or an expected one for a violation's report.
func showData(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case ttlWant:
		return fmt.Sprintf("a TTL in (0, %d]", dataTTL)
	case hashWant:
		ks := slices.Sorted(maps.Keys(x))
		var parts []string
		for _, k := range ks {
			parts = append(parts, fmt.Sprintf("%q: %q", k, x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = showData(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case string:
		return strconv.Quote(x)
	}
	return fmt.Sprint(v)
}

// dataStream is one goroutine's keys in one database, with their model,
// and a client of each proxy that selects that database.
type dataStream struct {
	h        *history
	disrupts int64         // the adversary's disruptions when the stream started again
	kills    map[int]int64 // by proxy: the adversary's CLIENT KILLs at the last operation answered through it
	db       int
	id       int
	gen      int // the keys' generation: the stream moves to new keys when it starts again
	addrs    []string
	clients  []*redis.Client
	strict   bool            // a backend of its own: an error is a violation
	loss     *atomic.Int64   // the schedule's marks of faults that may lose the data (odd: under way)
	restarts []*atomic.Int64 // per proxy: its restarts (odd: under way)
	okGen    []int64         // per proxy: its restarts at this stream's last answered command there
	model    dataModel
	dirty    bool  // the model is not known to hold: start again (reset)
	modelGen int64 // loss when the model was last set
}

func newDataStream(h *history, id, db int, addrs []string, strict bool, loss *atomic.Int64, restarts []*atomic.Int64) *dataStream {
	s := &dataStream{h: h, db: db, id: id, gen: -1, strict: strict, loss: loss, restarts: restarts,
		okGen: make([]int64, len(addrs)), dirty: true}
	s.addrs = addrs
	for _, a := range addrs {
		s.clients = append(s.clients, s.dial(a))
	}
	for i, r := range restarts {
		s.okGen[i] = r.Load()
	}
	return s
}

// dial is a client of the proxy at addr, in the stream's database: one
// connection (a connection a proxy restart cut is met once), no retries (a
// write sent twice would count twice).
func (s *dataStream) dial(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DB: s.db, Protocol: 2, MaxRetries: -1, PoolSize: 1,
		DialTimeout: time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
}

func (s *dataStream) close() {
	for _, c := range s.clients {
		c.Close()
	}
}

func (s *dataStream) key(name string) string { return fmt.Sprintf("data:%d:%d:%s", s.id, s.gen, name) }

func (s *dataStream) sentinel() string { return s.key("sentinel") }

// send sends cmds on proxy p's connection, in one pipeline or in MULTI.
func (s *dataStream) send(p int, cmds [][]string, multi bool) ([]any, []error) {
	ctx := context.Background()
	var pipe redis.Pipeliner
	if multi {
		pipe = s.clients[p].TxPipeline()
	} else {
		pipe = s.clients[p].Pipeline()
	}
	rc := make([]*redis.Cmd, len(cmds))
	for i, c := range cmds {
		args := make([]any, len(c))
		for j, a := range c {
			args[j] = a
		}
		rc[i] = pipe.Do(ctx, args...)
	}
	_, _ = pipe.Exec(ctx)
	got, errs := make([]any, len(cmds)), make([]error, len(cmds))
	for i, c := range rc {
		got[i], errs[i] = c.Result()
	}
	return got, errs
}

// lossIn reports whether the data may have been lost in a window whose
// ends read the loss marks g0 and g1.
func (s *dataStream) lossIn(g0, g1 int64) bool {
	return g0%2 == 1 || g1%2 == 1 || g0 != g1 || g0 != s.modelGen
}

// reset starts the stream again on keys of a new generation: it deletes
// them (a SWAPDB may have brought them from the other database) and
// writes their sentinel; the model is empty again. New keys, because a
// command answered with an error may still run later (lateBound: held
// back on its way to a stalled or slowed master), on the keys it named.
func (s *dataStream) reset(p int) {
	s.gen++
	s.disrupts = s.h.disrupts.Load()
	g0, r0 := s.loss.Load(), s.restarts[p].Load()
	del := []string{"DEL"}
	for _, n := range dataNames {
		del = append(del, s.key(n))
	}
	_, errs := s.send(p, [][]string{del, {"SET", s.sentinel(), strconv.Itoa(s.db)}}, false)
	g1, r1 := s.loss.Load(), s.restarts[p].Load()
	for _, err := range errs {
		if err != nil {
			s.failed(p, r0, r1, s.lossIn(g0, g1), err, "reset")
			time.Sleep(50 * time.Millisecond)
			return
		}
	}
	s.okGen[p] = r1
	s.model, s.dirty, s.modelGen = dataModel{}, false, g0
}

// failed judges an error of a command through proxy p, whose restart
// marks were r0 and r1 before and after it.
func (s *dataStream) failed(p int, r0, r1 int64, lost bool, err error, what string) {
	s.dirty = true
	// A new connection: go-redis stops reading a transaction's replies at
	// an error reply to MULTI (the proxy's, when the backend failed) and
	// puts the connection back in its pool, where the replies still to
	// come would answer the next commands.
	s.clients[p].Close()
	s.clients[p] = s.dial(s.addrs[p])
	switch {
	case lost:
		s.h.count("data: errors while master 0 may lose its data")
	case r0%2 == 1 || r1%2 == 1 || r1 != s.okGen[p]:
		s.h.count("data: errors from a proxy restart")
	case s.h.kills.Load() != s.kills[p]:
		s.h.count("data: errors after the adversary's CLIENT KILL")
	case !s.strict:
		s.h.count("data: errors (voting backend): " + errKind(err))
	default:
		s.h.dataViolation(s.h.now(), fmt.Sprintf("db %d, proxy %d: %s: %v", s.db, p, what, err))
	}
}

// flushed reports whether the stream's sentinel is gone or is another
// database's (a flush, a SWAPDB, a loss), reading it through proxy p;
// known is false when no read answered.
func (s *dataStream) flushed(p int) (gone string, known bool) {
	for range 10 {
		v, err := s.clients[p].Get(context.Background(), s.sentinel()).Result()
		switch {
		case err == redis.Nil:
			return "gone", true
		case err == nil && v != strconv.Itoa(s.db):
			return "database " + v + "'s", true
		case err == nil:
			return "", true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", false
}

// step plays one operation of the stream (or starts it again) and checks
// its replies.
func (s *dataStream) step(rng *rand.Rand) {
	p := rng.Intn(len(s.clients))
	if s.dirty || s.loss.Load() != s.modelGen {
		s.reset(p)
		return
	}
	cmds, multi, wait := s.next(rng)
	if !s.run(p, cmds, multi) {
		return
	}
	time.Sleep(wait)
}

// run sends one operation through proxy p and checks its replies against
// the model; false when it failed (an error).
func (s *dataStream) run(p int, cmds [][]string, multi bool) bool {
	g0, r0 := s.loss.Load(), s.restarts[p].Load()
	sent := s.h.now()
	got, errs := s.send(p, cmds, multi)
	g1, r1 := s.loss.Load(), s.restarts[p].Load()
	lost := s.lossIn(g0, g1)
	var bad, failed []string
	var firstErr error
	// What the keys may hold: one model, doubled by each command that
	// failed (it ran, or it did not); a reply must be right in one of
	// them, and only those stay.
	models := []dataModel{s.model}
	for i, c := range cmds {
		line := clipLine(describe([][]string{c}), 200)
		if errs[i] != nil && errs[i] != redis.Nil {
			if firstErr == nil {
				firstErr = errs[i]
			}
			failed = append(failed, fmt.Sprintf("%s: the error %q (it may have run)", line, errs[i].Error()))
			var next []dataModel
			for _, m := range models {
				ran := m.clone()
				ran.exec(c)
				next = append(next, m, ran)
			}
			models = next
			continue
		}
		var right []dataModel
		miss := ""
		for _, m := range models {
			if d := dataMismatch(m.exec(c), got[i], errs[i]); d == "" {
				right = append(right, m)
			} else if miss == "" {
				miss = d
			}
		}
		switch {
		case len(right) == 0 && len(models) > 1:
			bad = append(bad, fmt.Sprintf("%s: %s, whether or not the failed commands before it ran", line, miss))
		case len(right) == 0:
			bad = append(bad, fmt.Sprintf("%s: %s", line, miss))
		default:
			if len(models) > 1 {
				s.h.count("data: replies judged after a failed command of their pipeline")
			}
			models = right
		}
	}
	s.model = models[0] // the same model when nothing failed; after an error the stream starts again
	s.h.dataOp(len(cmds))
	what := describe(cmds)
	if multi {
		what = "MULTI " + what + " EXEC"
	}
	if firstErr != nil {
		s.failed(p, r0, r1, lost, firstErr, fmt.Sprintf("sent %s: %s", sent.Round(time.Millisecond), clipLine(what, 300)))
	} else {
		s.okGen[p] = r1
		if s.kills == nil {
			s.kills = map[int]int64{}
		}
		s.kills[p] = s.h.kills.Load()
	}
	if len(bad) > 0 {
		s.dirty = true
		if lost {
			s.h.count("data: replies that differ while master 0 may lose its data")
		} else if gone, known := s.flushed(p); gone != "" {
			s.h.count("data: replies that differ after a flush or a SWAPDB (the sentinel " + gone + ")")
		} else if !known && !s.strict {
			s.h.count("data: replies that differ, not judged (the sentinel did not answer)")
		} else if s.lossIn(g0, s.loss.Load()) {
			s.h.count("data: replies that differ while master 0 may lose its data")
		} else if s.h.disrupts.Load() != s.disrupts {
			// A flush or SWAPDB the sentinel missed (a swap there and
			// back, a script's in a transaction).
			s.h.count("data: replies that differ after the adversary flushed or swapped databases")
		} else {
			s.h.dataViolation(sent, fmt.Sprintf("db %d, proxy %d, sent %s: %s\n    %s", s.db, p, sent.Round(time.Millisecond), clipLine(what, 300), strings.Join(append(bad, failed...), "\n    ")))
		}
	}
	return firstErr == nil
}

// dataOps are the data client's operations, with their weights.
var dataOps = map[string]int{"incr": 4, "set": 3, "get": 2, "hash": 3, "list": 3, "expire": 2, "short-expire": 1,
	"del": 2, "mset": 2, "exists": 1, "multi": 3}

// dataValue is a value to store: mostly plain, sometimes with bytes a
// protocol could get wrong.
func dataValue(rng *rand.Rand) string {
	if rng.Intn(5) == 0 {
		return []string{"", "a b", "x\r\ny", "\x00\xff", "ü€", "-1", strings.Repeat("z", 3000)}[rng.Intn(7)]
	}
	return fmt.Sprintf("v%d", rng.Intn(1e6))
}

// next draws an operation: its commands, whether in MULTI, and how long
// to wait after it (a PEXPIRE's TTL and a margin).
func (s *dataStream) next(rng *rand.Rand) ([][]string, bool, time.Duration) {
	ctr := func() string { return s.key(fmt.Sprintf("ctr:%d", rng.Intn(2))) }
	str := func() string { return s.key(fmt.Sprintf("str:%d", rng.Intn(3))) }
	anyKey := func() string { return s.key(dataNames[rng.Intn(len(dataNames))]) }
	h, l := s.key("hash"), s.key("list")
	field := func() string { return fmt.Sprintf("f%d", rng.Intn(5)) }
	write := func() []string {
		switch rng.Intn(6) {
		case 0:
			return []string{"INCR", ctr()}
		case 1:
			return []string{"SET", str(), dataValue(rng)}
		case 2:
			return []string{"HSET", h, field(), dataValue(rng)}
		case 3:
			return []string{"LPUSH", l, dataValue(rng)}
		case 4:
			return []string{"DEL", anyKey()}
		}
		return []string{"EXPIRE", anyKey(), strconv.Itoa(dataTTL)}
	}
	read := func() []string {
		switch rng.Intn(5) {
		case 0:
			return []string{"GET", ctr()}
		case 1:
			return []string{"GET", str()}
		case 2:
			return []string{"HGET", h, field()}
		case 3:
			return []string{"LRANGE", l, "0", "-1"}
		}
		return []string{"TTL", anyKey()}
	}
	switch pick(rng, dataOps) {
	case "incr":
		k := ctr()
		if rng.Intn(3) == 0 {
			return [][]string{{"INCRBY", k, strconv.Itoa(rng.Intn(2001) - 1000)}, {"GET", k}}, false, 0
		}
		return [][]string{{"INCR", k}}, false, 0
	case "set":
		k := str()
		return [][]string{{"SET", k, dataValue(rng)}, {"GET", k}}, false, 0
	case "get":
		return [][]string{read()}, false, 0
	case "hash":
		cmds := [][]string{{"HSET", h, field(), dataValue(rng)}}
		if rng.Intn(2) == 0 {
			cmds[0] = append(cmds[0], field(), dataValue(rng))
		}
		cmds = append(cmds, []string{"HGET", h, field()})
		if rng.Intn(3) == 0 {
			cmds = append(cmds, []string{"HGETALL", h})
		}
		return cmds, false, 0
	case "list":
		cmds := [][]string{{"LPUSH", l, dataValue(rng)}}
		if rng.Intn(2) == 0 {
			cmds[0] = append(cmds[0], dataValue(rng))
		}
		if e := s.model[l]; e != nil && len(e.l) > 8 {
			cmds = append(cmds, []string{"LTRIM", l, "0", strconv.Itoa(rng.Intn(5))})
		}
		return append(cmds, []string{"LRANGE", l, "0", "-1"}), false, 0
	case "expire":
		k := anyKey()
		if rng.Intn(3) == 0 {
			return [][]string{{"PERSIST", k}, {"TTL", k}}, false, 0
		}
		return [][]string{{"EXPIRE", k, strconv.Itoa(dataTTL)}, {"TTL", k}}, false, 0
	case "short-expire":
		ms := 20 + rng.Intn(150)
		return [][]string{{"PEXPIRE", anyKey(), strconv.Itoa(ms)}}, false, time.Duration(ms)*time.Millisecond + 250*time.Millisecond
	case "del":
		cmd := []string{"DEL", anyKey()}
		if rng.Intn(2) == 0 {
			cmd = append(cmd, anyKey())
		}
		return [][]string{cmd}, false, 0
	case "mset":
		k1, k2 := s.key("str:0"), s.key(fmt.Sprintf("str:%d", 1+rng.Intn(2)))
		return [][]string{{"MSET", k1, dataValue(rng), k2, dataValue(rng)}, {"MGET", s.key("str:0"), s.key("str:1"), s.key("str:2"), ctr()}}, false, 0
	case "exists":
		return [][]string{{"EXISTS", anyKey(), anyKey(), anyKey()}}, false, 0
	}
	// multi
	var cmds [][]string
	for range 2 + rng.Intn(3) {
		if rng.Intn(3) == 0 {
			cmds = append(cmds, read())
		} else {
			cmds = append(cmds, write())
		}
	}
	return cmds, true, 0
}

// dataClient runs the streams of goroutine id (database 0, and database 1
// a third of the time) until stop.
func (w *world) dataClient(id int, stop <-chan struct{}) {
	rng := rand.New(rand.NewSource(w.seed + 1000 + int64(id)))
	var addrs []string
	for _, p := range w.proxies {
		addrs = append(addrs, p.Addr)
	}
	restarts := make([]*atomic.Int64, len(w.restarts))
	for i := range w.restarts {
		restarts[i] = &w.restarts[i]
	}
	streams := []*dataStream{
		newDataStream(w.h, id, 0, addrs, w.backend == "own", &w.lossGen, restarts),
		newDataStream(w.h, id, 1, addrs, w.backend == "own", &w.lossGen, restarts),
	}
	for _, s := range streams {
		defer s.close()
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		s := streams[0]
		if rng.Intn(3) == 0 {
			s = streams[1]
		}
		s.step(rng)
		time.Sleep(randDur(rng, time.Millisecond, 8*time.Millisecond))
	}
}

// dataReason says why a run has no data client, or "" when it has one.
func (w *world) dataReason() string {
	switch {
	case w.sch.data == 0:
		return "none in this schedule"
	case w.backend == "voting" && w.lockKeys == "*":
		return "none: with a voting backend and every key a lock key, the proxies refuse data commands"
	}
	return ""
}

// TestDataChecker shows that the data client's check can fail: replies
// that differ from the model, from a Redis standing in for a proxy whose
// keys are changed behind the client's back, are violations (an error
// too, with a backend of its own); after a flush they are not.
func TestDataChecker(t *testing.T) {
	m := dataModel{}
	for _, c := range []struct {
		cmd      []string
		got, bad any
	}{
		{[]string{"INCR", "k"}, int64(1), int64(2)},
		{[]string{"GET", "k"}, "1", nil},
		{[]string{"MGET", "k", "x"}, []any{"1", nil}, []any{"1", "1"}},
		{[]string{"HSET", "h", "f", "v"}, int64(1), int64(0)},
		{[]string{"HGETALL", "h"}, []any{"f", "v"}, []any{"f", "w"}},
		{[]string{"LPUSH", "l", "a", "b"}, int64(2), int64(1)},
		{[]string{"LRANGE", "l", "0", "-1"}, []any{"b", "a"}, []any{"a", "b"}},
		{[]string{"EXPIRE", "l", "100000"}, int64(1), int64(0)},
		{[]string{"TTL", "l"}, int64(99999), int64(-1)},
		{[]string{"DEL", "l", "x"}, int64(1), int64(2)},
	} {
		want := m.exec(c.cmd)
		if d := dataMismatch(want, c.got, nil); d != "" {
			t.Errorf("%v: the right reply judged wrong: %s", c.cmd, d)
		}
		if dataMismatch(want, c.bad, nil) == "" {
			t.Errorf("%v: the wrong reply %v passed", c.cmd, showData(c.bad))
		}
		if dataMismatch(want, nil, errors.New("ERR x")) == "" {
			t.Errorf("%v: an error passed", c.cmd)
		}
	}

	srv := redistest.Start(t)
	direct := srv.Client()
	defer direct.Close()
	ctx := context.Background()
	for _, strict := range []bool{true, false} {
		h := newHistory()
		var loss, restarts atomic.Int64
		s := newDataStream(h, 0, 0, []string{srv.Addr}, strict, &loss, []*atomic.Int64{&restarts})
		defer s.close()
		ctr := func() string { return s.key("ctr:0") }
		s.reset(0)
		for range 3 {
			if !s.run(0, [][]string{{"INCR", ctr()}, {"SET", s.key("str:0"), "x"}}, true) {
				t.Fatal("an operation failed")
			}
		}
		if v := h.dataViolations(); len(v) > 0 {
			t.Fatalf("violations of right replies: %v", v)
		}
		// A value changed behind the client's back: a wrong reply.
		direct.Set(ctx, ctr(), "41", 0)
		s.run(0, [][]string{{"INCR", ctr()}}, false)
		v := h.dataViolations()
		if len(v) != 1 || !strings.Contains(v[0], "want 4, got 42") {
			t.Fatalf("a wrong reply: violations %q", v)
		}
		t.Logf("a wrong reply: %s", v[0])
		// A flush: the same wrong reply, not a violation.
		s.reset(0)
		s.run(0, [][]string{{"INCR", ctr()}}, false)
		direct.FlushAll(ctx)
		s.run(0, [][]string{{"INCR", ctr()}}, false)
		if v := h.dataViolations(); len(v) != 1 || h.outcome["data: replies that differ after a flush or a SWAPDB (the sentinel gone)"] != 1 {
			t.Fatalf("after a flush: violations %q, outcomes %v", v, h.outcome)
		}
		// An error: a violation with a backend of its own only.
		s.reset(0)
		direct.Set(ctx, ctr(), "not a number", 0)
		s.run(0, [][]string{{"INCR", ctr()}}, false)
		if n := len(h.dataViolations()); strict && n != 2 || !strict && n != 1 {
			t.Fatalf("an error (own backend: %v): violations %q", strict, h.dataViolations())
		}
		// A loss of the data marked by the schedule: not a violation.
		s.reset(0)
		s.run(0, [][]string{{"INCR", ctr()}}, false)
		loss.Add(1)
		direct.Set(ctx, ctr(), "41", 0)
		s.run(0, [][]string{{"INCR", ctr()}}, false)
		loss.Add(1)
		if n := len(h.dataViolations()); strict && n != 2 || !strict && n != 1 {
			t.Fatalf("a loss: violations %q", h.dataViolations())
		}
	}
}

// TestDataCheckerAfterAnError shows that a reply after a command of the
// same pipeline that failed is judged as if that command ran and as if it
// did not. Through a proxy, EXPIRE answered with an error (the backend
// connection it went on was to a master 0 that restarted) and then TTL
// answered -1 on a new connection is what a restart does
// (docs/operations.md): before, the checker took the EXPIRE to have run
// and reported the TTL as a violation. A Redis stands in for the proxy;
// its ACL fails the EXPIRE.
func TestDataCheckerAfterAnError(t *testing.T) {
	srv := redistest.Start(t)
	direct := srv.Client()
	defer direct.Close()
	ctx := context.Background()
	h := newHistory()
	var loss, restarts atomic.Int64
	s := newDataStream(h, 0, 1, []string{srv.Addr}, false, &loss, []*atomic.Int64{&restarts})
	defer s.close()
	var k string
	start := func() { // keys of a new generation: HSET k
		t.Helper()
		s.reset(0)
		k = s.key("hash")
		if !s.run(0, [][]string{{"HSET", k, "f", "v"}}, false) {
			t.Fatal("HSET failed")
		}
	}
	expireFails := func(fails bool) {
		t.Helper()
		rule := "+expire"
		if fails {
			rule = "-expire"
		}
		if err := direct.Do(ctx, "acl", "setuser", "default", rule).Err(); err != nil {
			t.Fatal(err)
		}
	}
	start()
	expireFails(true)
	s.run(0, [][]string{{"EXPIRE", k, strconv.Itoa(dataTTL)}, {"TTL", k}, {"HGET", k, "f"}}, false)
	expireFails(false)
	if v := h.dataViolations(); len(v) > 0 {
		t.Fatalf("EXPIRE failed, then TTL -1: violations %q", v)
	}
	// The TTL, judged both ways; then HGET, judged once: the TTL showed
	// that the EXPIRE did not run.
	if n := h.outcome["data: replies judged after a failed command of their pipeline"]; n != 1 {
		t.Fatalf("replies judged after the failed EXPIRE: %d, want 1 (outcomes %v)", n, h.outcome)
	}
	// The failed EXPIRE ran (here: a TTL set behind the client's back),
	// and TTL answers a TTL.
	start()
	db1 := redis.NewClient(&redis.Options{Addr: srv.Addr, DB: 1, Protocol: 2})
	defer db1.Close()
	db1.Expire(ctx, k, time.Hour)
	expireFails(true)
	s.run(0, [][]string{{"EXPIRE", k, strconv.Itoa(dataTTL)}, {"TTL", k}}, false)
	expireFails(false)
	if v := h.dataViolations(); len(v) > 0 {
		t.Fatalf("EXPIRE failed, then a TTL: violations %q", v)
	}
	// Wrong either way: a violation, whose report shows the failed command.
	start()
	db1.Del(ctx, k) // behind the client's back
	expireFails(true)
	s.run(0, [][]string{{"EXPIRE", k, strconv.Itoa(dataTTL)}, {"TTL", k}}, false)
	expireFails(false)
	v := h.dataViolations()
	if len(v) != 1 || !strings.Contains(v[0], "got -2, whether or not the failed commands before it ran") || !strings.Contains(v[0], "NOPERM") {
		t.Fatalf("a key deleted behind the client's back: violations %q", v)
	}
	t.Logf("wrong either way: %s", v[0])
}
