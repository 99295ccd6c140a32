package engine

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Whether a master kept its data across a restart is judged from evidence
// that the data survived, not from its configuration alone: a master whose
// new process says "appendonly yes, appendfsync always" comes back empty
// all the same when its data directory was an ephemeral volume, or when AOF
// was switched off at runtime before the crash (the file on disk then ends
// where AOF stopped).
//
// Every master carries a record, DatasetKey, without expiry: a random id
// made when the record is created, the run_id of the process that created
// it (born), a counter (seq) and the run_id of a process some client found
// in doubt (doubt). The client raises seq on every periodic check, and on
// a master it trusts to keep its data, after every batch of lock writes
// (in the same pipeline, after them). Redis persists writes in order, so
// seq surviving at a value means every write before it survived.
//
// A restarted master (a new run_id) is trusted at once only when all hold:
//   - its new process persists every write (AOF on, appendfsync always, the
//     last AOF write succeeded), and so did the old one at its last check;
//   - its record has the id this client knew: the dataset is the same;
//   - its seq is at least the last value this client saw acknowledged by
//     the old process: nothing this client wrote there was lost;
//   - no client marked the new process in doubt.
//
// Otherwise it is guarded, and if its record survived, the new process is
// marked in doubt on the master, so that other clients (which may have
// less evidence) guard it too. A master seen for the first time that has
// been up for less than the guard window is trusted at once only when it
// persists every write and its record survived a restart (born is not its
// run_id) and is not marked in doubt. A master whose record changes id
// without a restart (FLUSHALL or DEBUG RELOAD run on it directly) lost its
// data in place and is guarded from then on.
//
// What remains: a master whose AOF is switched off less than a check
// interval before it crashes, by an operator, while other clients wrote
// there and this one did not, is trusted by this client until it reads
// the doubt the others write (its next check).

// DatasetKey is the key of the record each master carries (see
// evidence.go); FenceStatePrefix reserves it.
const DatasetKey = FenceStatePrefix + "dataset"

// NewDeployment is the born value of a record that InitMasters wrote: the
// operator declared that the masters never held a lock.
const NewDeployment = "new-deployment"

// GuardDataEvidence: a restarted master is trusted at once only with
// evidence that its data survived; off, its configuration (AOF with
// appendfsync always) is enough, as before the record existed.
const GuardDataEvidence Guard = "data-evidence"

// recordScript reads the record, making it (id ARGV[1], born this
// process's run_id) where it is absent or has no id; with ARGV[2] = "1"
// it raises seq. On a master (not a replica) it also notes the
// replication id it has now (term) and, when that is new to the record,
// the master's time in milliseconds (term_at): a promoted replica has a
// new replication id, so term_at is no earlier than its promotion.
// Answers {id, born, seq, doubt, term, term_at, the master's time in ms}.
var recordScript = newScript(`
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or ''
local repl = redis.call('INFO', 'replication')
local t = redis.call('TIME')
local ms = string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000))
if not redis.call('HGET', KEYS[1], 'id') then
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'born', run)
end
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0') or 0
if ARGV[2] == '1' then seq = redis.call('HINCRBY', KEYS[1], 'seq', 1) end
local term = string.match(repl, 'master_replid:(%x+)') or ''
if string.match(repl, 'role:(%a+)') == 'master' and redis.call('HGET', KEYS[1], 'term') ~= term then
  redis.call('HSET', KEYS[1], 'term', term, 'term_at', ms)
end
return {redis.call('HGET', KEYS[1], 'id') or '', redis.call('HGET', KEYS[1], 'born') or '', seq, redis.call('HGET', KEYS[1], 'doubt') or '',
  redis.call('HGET', KEYS[1], 'term') or '', redis.call('HGET', KEYS[1], 'term_at') or '', ms}`)

// seqCommand raises seq after a batch of lock writes, encoded once.
var seqCommand = appendCommandMust([]any{"hincrby", DatasetKey, "seq", 1})

func appendCommandMust(args []any) []byte {
	b, err := appendCommand(nil, args)
	if err != nil {
		panic(err)
	}
	return b
}

// record is a master's record, as recordScript reads it.
type record struct {
	id, born, doubt string
	seq             int64
	term            string // the replication id a client last saw the master have
	termAt, now     int64  // when a client first saw term, and the master's time of the read, in ms
}

func parseRecord(v any) (record, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) != 7 {
		return record{}, errors.New("redlock: unexpected dataset record reply")
	}
	s := func(i int) string { x, _ := vals[i].(string); return x }
	ms := func(i int) int64 { x, _ := strconv.ParseInt(s(i), 10, 64); return x }
	return record{id: s(0), born: s(1), seq: toInt(vals[2]), doubt: s(3), term: s(4), termAt: ms(5), now: ms(6)}, nil
}

// masterState is what a connection's handshake, or a periodic check,
// learns of a master.
type masterState struct {
	runID   string
	uptime  time.Duration
	durable bool // AOF on, appendfsync always, the last AOF write succeeded
	rec     record
	hasRec  bool // the record could be read (the script may be refused)
	repl    replState
}

// inspect reads a master's state with do, which runs one command on the
// connection being checked: INFO, the record script (with count, raising
// seq; only with the restart guard on, which alone uses it) and, when AOF
// is on, CONFIG GET appendfsync (a master where CONFIG is renamed away is
// not known to persist every write).
func (n *node) inspect(do func(args ...any) (any, error), count bool) (masterState, error) {
	v, err := do("info", "server", "persistence", "replication", "stats", "memory")
	if err != nil {
		return masterState{}, err
	}
	info, _ := v.(string)
	st := parseServerInfo(info)
	if st.repl.replicas > 0 {
		v, err := do("config", "get", "min-replicas-to-write")
		if err != nil && !isRedisError(err) {
			return masterState{}, err
		}
		if n, perr := strconv.Atoi(configValue(v, "min-replicas-to-write")); err == nil && perr == nil {
			st.repl.minReplicas = n
		}
	}
	if n.opts.guardWindow > 0 { // only the guard uses the record
		if err := st.readRecord(do, n.books().dataset, count); err != nil {
			return masterState{}, err
		}
	}
	if st.durable {
		v, err := do("config", "get", "appendfsync")
		if err != nil && !isRedisError(err) {
			return masterState{}, err
		}
		st.durable = err == nil && configValue(v, "appendfsync") == "always"
	}
	return st, nil
}

// readRecord runs the record script (by its text if the master has not
// seen it), raising seq with count. A master that refuses it (an error
// reply: scripts disabled by ACL) leaves the record unread, and the master
// without evidence.
func (st *masterState) readRecord(do func(args ...any) (any, error), key string, count bool) error {
	c := "0"
	if count {
		c = "1"
	}
	v, err := do("evalsha", recordScript.hash, 1, key, newAttemptID(), c)
	if isNoScript(err) {
		v, err = do("eval", recordScript.src, 1, key, newAttemptID(), c)
	}
	switch {
	case err == nil:
		st.rec, err = parseRecord(v)
		st.hasRec = err == nil
	case !isRedisError(err):
		return err
	}
	return nil
}

// configValue reads the value of name from CONFIG GET name's reply, a
// flat list or a map; "" when it holds none.
func configValue(v any, name string) string {
	var x any
	switch kv := v.(type) {
	case []any:
		if len(kv) == 2 {
			x = kv[1]
		}
	case map[any]any:
		x = kv[name]
	case map[string]string:
		return kv[name]
	}
	s, _ := x.(string)
	return s
}

// isRedisError reports whether err is an error reply from the master (of
// either kind of connection), not a failure to reach it.
func isRedisError(err error) bool {
	var re interface{ RedisError() }
	return errors.As(err, &re)
}

// parseServerInfo reads run_id and uptime from INFO server, and whether
// AOF is on and its last write succeeded from INFO persistence (durable is
// then true until CONFIG GET appendfsync says otherwise).
func parseServerInfo(info string) masterState {
	st := masterState{repl: replState{secondOffset: -1, minReplicas: -1}}
	aof, writeOK := false, true
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "run_id":
			st.runID = v
		case "uptime_in_seconds":
			s, _ := strconv.ParseInt(v, 10, 64)
			st.uptime = time.Duration(s) * time.Second
		case "aof_enabled":
			aof = v == "1"
		case "aof_last_write_status":
			writeOK = v == "ok"
		default:
			st.repl.parse(k, v)
		}
	}
	st.durable = aof && writeOK
	return st
}

// observe records what a new connection to the master found, and decides
// whether the restart guard holds it (see above). It reports whether the
// master's record should be marked in doubt for its run_id.
func (n *node) observe(st masterState, now time.Time) (markDoubt bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.runID == st.runID {
		// Seen before with this run_id: it has not restarted since. A new
		// connection (pools open them at any time) only updates the state.
		n.inspected(st, now)
		return false
	}
	first := n.runID == ""
	survived := st.hasRec && st.rec.id == n.datasetID // the record this client knew
	sameData := survived && st.rec.seq >= n.seqSeen
	kept := false
	switch {
	case n.opts.guardsOff[GuardDataEvidence]:
		kept = st.durable
	case first:
		kept = st.durable && st.hasRec && st.rec.born != st.runID && st.rec.doubt != st.runID
	default:
		kept = st.durable && n.durable.Load() && sameData && st.rec.doubt != st.runID
	}
	// A promoted replica is a restart without proof of kept data, from
	// its promotion (replication.go).
	start, why := now.Add(-st.uptime), "restart guard"
	if n.promotedHere(st, first, now) {
		kept, start = false, st.promotedAt(now)
		why = "restart guard: it was promoted from a replica"
		if start.Before(now) {
			why += " at least " + now.Sub(start).Round(time.Millisecond).String() + " ago (its record says)"
		}
		n.promotions++
	}
	if !first {
		n.restarts++
		n.logf("redlock: master %s restarted (run_id %s -> %s, up %s)", n.addr, n.runID, st.runID, st.uptime)
	}
	n.runID, n.checkedAt = st.runID, now
	n.setRecord(st)
	n.durable.Store(st.durable)
	n.takeReplication(st, now, true)
	w := n.opts.guardWindow
	switch {
	case w == 0:
		return false
	case kept:
		if !first {
			n.logf("redlock: master %s kept its data across the restart (persists every write, record %s at seq %d): it votes at once", n.addr, st.rec.id, st.rec.seq)
		}
		return false
	case first && now.Sub(start) >= w:
		return false // every lock granted before its start, or its promotion, has expired
	}
	n.lost(start, now, why)
	// Its record survived, yet this client cannot vouch for the data:
	// other clients should not trust it on the record's word either.
	return !first && survived && st.rec.doubt != st.runID
}

// inspected takes in a state read from the master's current process: on a
// new connection to it, or at a periodic check. A record whose id changed
// means the data was erased in place (FLUSHALL, DEBUG RELOAD): guarded
// from now, as after a restart. A doubt another client marked for this
// process is adopted. n.mu held.
func (n *node) inspected(st masterState, now time.Time) {
	n.checkedAt = now
	n.durable.Store(st.durable)
	n.takeReplication(st, now, false)
	if !st.hasRec || n.opts.guardWindow == 0 || n.opts.guardsOff[GuardDataEvidence] {
		n.setRecord(st)
		return
	}
	switch {
	case n.datasetID != "" && st.rec.id != n.datasetID:
		n.lost(now, now, "its data was erased without a restart (record "+n.datasetID+" -> "+st.rec.id+")")
	case st.rec.doubt == st.runID && n.doubted != st.runID:
		n.doubted = st.runID
		n.lost(now.Add(-st.uptime), now, "another client found it may have lost data")
	}
	n.setRecord(st)
}

// setRecord remembers the master's record. n.mu held.
func (n *node) setRecord(st masterState) {
	if !st.hasRec {
		return
	}
	if st.rec.id != n.datasetID {
		n.datasetID, n.seqSeen = st.rec.id, 0
	}
	n.seqSeen = max(n.seqSeen, st.rec.seq)
}

// guardTo withholds the master's votes until until, if that is later
// than the guard already set. n.mu held.
func (n *node) guardTo(until, now time.Time, why string) {
	if until.After(n.guardUntil) {
		n.guardUntil = until
		n.logf("redlock: master %s does not vote for %s: %s", n.addr, until.Sub(now).Round(time.Millisecond), why)
	}
}

// countsSeq reports whether lock writes to the master are followed by a
// seq raise: it persists every write, and the evidence is used.
func (n *node) countsSeq() bool {
	return n.durable.Load() && n.opts.guardWindow > 0 && !n.opts.guardsOff[GuardDataEvidence]
}

// noteSeq records a seq value the master acknowledged after a batch of
// writes on the connection of the process runID.
func (n *node) noteSeq(runID string, seq int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if runID == n.runID {
		n.seqSeen = max(n.seqSeen, seq)
	}
}

// markDoubt writes the doubt of the master's current process runID into
// its record, with do.
func (n *node) markDoubt(do func(args ...any) (any, error), runID string) {
	_, _ = do("hset", n.books().dataset, "doubt", runID)
}

// check inspects the master through its pipeline every check interval:
// persistence, the record (raising seq), and a change of either. Reads and
// writes of the check are not lock writes: they are not followed by a
// seq raise of their own.
func (n *node) check(ctx context.Context) {
	if n.isDown() {
		return
	}
	st, err := n.inspect(func(args ...any) (any, error) {
		cmd := n.call(ctx, &call{args: args, readOnly: true})
		return cmd.Result()
	}, true)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if st.runID != n.runID {
		return // a new process: its connection's handshake judges it
	}
	n.inspected(st, time.Now())
}

// initScript checks that a master holds no key but the record, made by its
// current process (a client's connection makes one), and the clients'
// settings (KEYS[2]), and marks the record born NewDeployment; with
// ARGV[1] = "check" it only checks.
var initScript = newScript(`
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or ''
local born = redis.call('HGET', KEYS[1], 'born')
if born == ARGV[2] then return 1 end
local others = redis.call('DBSIZE') - redis.call('EXISTS', KEYS[1]) - redis.call('EXISTS', KEYS[2])
if others > 0 or born and born ~= run then return redis.error_reply('ERR redlock-proxy: the master holds keys: not a new deployment') end
if ARGV[1] == 'check' then return 1 end
redis.call('HSET', KEYS[1], 'id', ARGV[3], 'born', ARGV[2])
return 1`)

// initTimeout bounds each of InitMasters' steps on one master.
const initTimeout = 5 * time.Second

// InitMasters declares the masters a new deployment, on which no lock was
// ever taken: their records are marked born NewDeployment, so that a
// client seeing them for the first time, younger than the guard window,
// trusts those that persist every write at once instead of guarding them
// for the window. It changes nothing unless every master answers and holds
// no key (but the record a client's connection made): it is for masters
// just created empty, never for masters that lost their data. Masters
// already marked are left as they are.
func (c *Client) InitMasters(ctx context.Context) error {
	// A step of its own, once, not a lock operation: a timeout of 5 s (or
	// the node timeout if longer) rather than the node timeout, which a
	// busy machine can exceed while the masters are being set up (ctx
	// bounds the whole).
	// A master given as a Redis Cluster is declared shard by shard: each
	// shard primary that owns slots now, its records under its own hash
	// tag.
	var targets []*node
	for _, n := range c.nodes {
		if n.cluster == nil {
			targets = append(targets, n)
			continue
		}
		shards, err := n.cluster.ownersOnceKnown()
		if err != nil {
			return &NodeError{Addr: n.addr, Err: err}
		}
		targets = append(targets, shards...)
	}
	rdbs := make([]*redis.Client, len(targets))
	for i, n := range targets {
		o := *n.ro
		t := max(c.opts.nodeTimeout, initTimeout)
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = t, t, t
		rdbs[i] = redis.NewClient(&o)
		defer rdbs[i].Close()
	}
	for _, step := range []string{"check", "mark"} {
		for i, n := range targets {
			b := n.books()
			keys := []string{b.dataset, b.client}
			err := rdbs[i].EvalSha(ctx, initScript.hash, keys, step, NewDeployment, newAttemptID()).Err()
			if isNoScript(err) {
				err = rdbs[i].Eval(ctx, initScript.src, keys, step, NewDeployment, newAttemptID()).Err()
			}
			if err != nil {
				return &NodeError{Addr: n.addr, Err: err}
			}
		}
	}
	return nil
}
