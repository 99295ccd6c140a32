package engine

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// reply is one master's answer to one step of a quorum operation.
type reply[T any] struct {
	node     *node
	val      T
	err      error
	trusted  bool    // the restart guard lets this master's vote on the step's keys count
	guard    guardOf // when not trusted: why
	withheld bool    // countVotes withheld the vote (the restart guard, a taint)
}

// errMasterDown is the vote of a master that is marked down.
var errMasterDown = errors.New("master marked down")

// collect reads replies until done says the outcome is decided or every
// master has answered. It returns the replies read; late ones are dropped.
func collect[T any](ch <-chan reply[T], n int, done func(got []reply[T]) bool) []reply[T] {
	return collectBy(ch, n, done, nil)
}

// collectBy is collect that also stops when expire fires (nil: never).
func collectBy[T any](ch <-chan reply[T], n int, done func(got []reply[T]) bool, expire <-chan time.Time) []reply[T] {
	got := make([]reply[T], 0, n)
	for len(got) < n {
		if expire == nil {
			got = append(got, <-ch)
		} else {
			select {
			case r := <-ch:
				got = append(got, r)
			case <-expire:
				return got
			}
		}
		if done(got) {
			break
		}
	}
	return got
}

// vote is how one master's answer to a quorum step counts.
type vote int8

const (
	// voteNo: a voting master says the lock is not (ours) there, or refused it.
	voteNo vote = iota
	// voteYes: a voting master did what was asked: took, holds, renewed or
	// released the lock.
	voteYes
)

// votes counts the answers of one quorum step, and holds the one rule every
// operation decides by:
//
//   - the step succeeded (granted, held, renewed, released) when a quorum of
//     masters voted yes;
//   - it failed (refused, not held, not renewed) only when it could not have
//     succeeded even if every master whose answer is unknown had voted yes;
//   - otherwise its outcome cannot be known, and the caller answers a
//     *QuorumError (NOQUORUM), never "not held".
//
// An answer is unknown when the master did not give one (an error, a
// timeout, a master marked down), when the step has not heard from it yet,
// and when its vote is withheld: the restart guard's (it may have forgotten
// what it held), or a taint's (a rollback of the same token may still land
// there). A withheld "yes" is as unknown as a withheld "no".
type votes struct {
	n, quorum int
	yes, no   int
	failed    int // did not answer
	withheld  int // answered, but the restart guard or a taint withholds the vote
	errs      []error
	guarded   []GuardedMaster // the masters whose votes the restart guard withheld
	// Guard GuardNotHeldNeedsQuorum off: withheld answers count as no, and
	// the step fails once a quorum has answered without a quorum of yes
	// (as before the guard existed).
	loose bool
}

func (c *Client) newVotes() votes {
	return votes{n: len(c.nodes), quorum: c.quorum, loose: c.off(GuardNotHeldNeedsQuorum)}
}

// add counts one master's answer: err if it gave none, else v, withheld
// when it may not count.
func (t *votes) add(n *node, err error, v vote, withheld bool) {
	switch {
	case err != nil:
		t.failed++
		t.errs = append(t.errs, &NodeError{Addr: n.addr, Err: err})
	case withheld && t.loose:
		t.no++
	case withheld:
		t.withheld++
	case v == voteYes:
		t.yes++
	default:
		t.no++
	}
}

// guardedBy records that the restart guard withheld n's vote, as g says.
func (t *votes) guardedBy(n *node, g guardOf) {
	if !g.until.IsZero() {
		t.guarded = append(t.guarded, n.guardedMaster(g))
	}
}

// answered counts the masters heard from, votes withheld included.
func (t *votes) answered() int { return t.yes + t.no + t.failed + t.withheld }

// unknown counts the masters whose vote is not known: no answer yet, none
// at all, or withheld.
func (t *votes) unknown() int { return t.n - t.yes - t.no }

// won reports that a quorum voted yes.
func (t *votes) won() bool { return t.yes >= t.quorum }

// lost reports that a quorum of yes votes is out of reach, even with every
// unknown vote a yes.
func (t *votes) lost() bool {
	if t.loose {
		return !t.won() && t.yes+t.no >= t.quorum
	}
	return t.yes+t.unknown() < t.quorum
}

func (t *votes) decided() bool { return t.won() || t.lost() }

// canWin reports, for a step that asks the masters to do something (take
// a lock), whether the masters still to answer could bring the yes votes
// to a quorum: one that failed or whose vote is withheld cannot.
func (t *votes) canWin() bool { return t.yes+t.n-t.answered() >= t.quorum }

// decidedOrLost stops an acquire: granted, or out of reach.
func decidedOrLost(t *votes) bool { return t.won() || !t.canWin() }

// reachable is how many masters could have counted.
func (t *votes) reachable() int { return t.n - t.failed - t.withheld }

// err is the error of a step whose outcome cannot be known: the error a
// quorum of masters answered alike (WRONGTYPE when the key holds another
// type, a script's error), as one Redis would have answered it; else a
// *QuorumError.
func (t *votes) err() error {
	n := map[replyError]int{}
	for _, e := range t.errs {
		var re replyError
		if errors.As(e, &re) {
			// Without the name of the per-master script, which is the
			// proxy's own, not the client's.
			msg, _, _ := strings.Cut(string(re), " script: ")
			if n[replyError(msg)]++; n[replyError(msg)] >= t.quorum {
				return replyError(msg)
			}
		}
	}
	return &QuorumError{Reachable: t.reachable(), Needed: t.quorum, Nodes: t.errs, Guarded: t.guarded}
}

// countVotes reads the replies of one step, classing each answer with
// class, until until says the outcome is decided (nil: until every master
// has answered or timed out; (*votes).decided: as soon as it is). A yes
// from a master under the restart guard, or tainted for key and token
// taint (if not empty), is withheld, and so is a no from a guarded master.
// It returns the count and the replies read, each marked withheld or not;
// late ones are dropped.
func countVotes[T any](c *Client, ch <-chan reply[T], taint string, until func(*votes) bool, class func(T) vote) (votes, []reply[T]) {
	return countVotesBy(c, ch, taint, until, class, nil)
}

// countVotesBy is countVotes that also stops when expire fires (nil:
// never), for a step whose masters may never answer.
func countVotesBy[T any](c *Client, ch <-chan reply[T], taint string, until func(*votes) bool, class func(T) vote, expire <-chan time.Time) (votes, []reply[T]) {
	return tally(c, c.newVotes(), ch, taint, until, class, expire)
}

// countVotesOf is countVotes for a step decided by a quorum of its own
// (a semaphore's permits: PermitQuorum) rather than the client's.
func countVotesOf[T any](c *Client, quorum int, ch <-chan reply[T], taint string, until func(*votes) bool, class func(T) vote) (votes, []reply[T]) {
	t := c.newVotes()
	t.quorum = quorum
	return tally(c, t, ch, taint, until, class, nil)
}

// tally counts replies into t, as countVotesBy says.
func tally[T any](c *Client, t votes, ch <-chan reply[T], taint string, until func(*votes) bool, class func(T) vote, expire <-chan time.Time) (votes, []reply[T]) {
	got := collectBy(ch, len(c.nodes), func(got []reply[T]) bool {
		r := &got[len(got)-1]
		r.withheld = countReply(c, &t, r, taint, class)
		return until != nil && until(&t)
	}, expire)
	return t, got
}

// countVotesEach is countVotes for a step that decides k outcomes at once,
// one per key: class classes an answer for the i-th of them. It reads
// until every outcome is decided or every master has answered.
func countVotesEach[T any](c *Client, ch <-chan reply[T], k int, taint string, class func(v T, i int) vote) []votes {
	ts := make([]votes, k)
	for i := range ts {
		ts[i] = c.newVotes()
	}
	collect(ch, len(c.nodes), func(got []reply[T]) bool {
		r := &got[len(got)-1]
		decided := true
		for i := range ts {
			countReply(c, &ts[i], r, taint, func(v T) vote { return class(v, i) })
			decided = decided && ts[i].decided()
		}
		return decided
	})
	return ts
}

// countReply adds one reply to t, its answer classed by class, and
// reports whether its vote was withheld.
func countReply[T any](c *Client, t *votes, r *reply[T], taint string, class func(T) vote) bool {
	if r.err != nil {
		if r.guard.replica { // its READONLY is no answer: say why
			t.guardedBy(r.node, r.guard)
		}
		t.add(r.node, r.err, voteNo, false)
		return false
	}
	v := class(r.val)
	withheld := !r.trusted || v == voteYes && c.taintedFor(r.node, taint)
	if !r.trusted {
		t.guardedBy(r.node, r.guard)
	}
	t.add(r.node, nil, v, withheld)
	return withheld
}

// taintedFor reports whether n's votes for the key and token of taint are
// withheld (an empty taint names none).
func (c *Client) taintedFor(n *node, taint string) bool {
	return taint != "" && !c.off(GuardTaint) && n.tainted(taint)
}

// fanoutCmd sends one step's command on keys to every master: build makes
// each master's command, queued on that master's batcher (batch.go) with the
// commands of every other operation, and when its reply arrives, the
// worker that read it parses it, calls after (if not nil) and delivers it
// on a channel buffered to N, so that no worker blocks once the caller has
// stopped reading. after also gets errMasterDown for a master that was
// sent nothing. after must not block. Every call has the node timeout. A
// reply is trusted when the restart guard lets the master vote on every
// one of keys.
func fanoutCmd[T any](c *Client, keys []string, build func(n *node, cl *call), parse func(*redis.Cmd) (T, error), after func(n *node, v T, err error)) <-chan reply[T] {
	return fanoutUntil(c, keys, time.Time{}, build, parse, after)
}

// fanoutUntil is fanoutCmd with the calls' deadline (zero: the node
// timeout from now).
func fanoutUntil[T any](c *Client, keys []string, deadline time.Time, build func(n *node, cl *call), parse func(*redis.Cmd) (T, error), after func(n *node, v T, err error)) <-chan reply[T] {
	return fanout(c, keys, deadline, 1, build, parse, after)
}

// fanoutVotes is fanoutCmd for a step that countVotes decides: the replies
// are handed over once enough have come to decide anything (fewestToDecide),
// so that the operation waiting for them is woken once for them, not once
// per master. after still runs as each reply comes.
func fanoutVotes[T any](c *Client, keys []string, quorum int, build func(n *node, cl *call), parse func(*redis.Cmd) (T, error), after func(n *node, v T, err error)) <-chan reply[T] {
	return fanout(c, keys, time.Time{}, c.fewestToDecide(quorum), build, parse, after)
}

// fewestToDecide is how many masters must answer before a vote of quorum
// can be decided either way: a quorum of yes, or more than n − quorum that
// are not yes (votes.won, votes.lost, decidedOrLost).
func (c *Client) fewestToDecide(quorum int) int { return min(quorum, len(c.nodes)-quorum+1) }

// fanout sends the calls and hands the replies over on the channel it
// returns, the first hold of them together (1: each as it comes).
func fanout[T any](c *Client, keys []string, deadline time.Time, hold int, build func(n *node, cl *call), parse func(*redis.Cmd) (T, error), after func(n *node, v T, err error)) <-chan reply[T] {
	op := &fanoutOp[T]{
		c: c, keys: keys, ch: make(chan reply[T], len(c.nodes)), start: time.Now(),
		parse: parse, after: after, calls: make([]call, len(c.nodes)), hold: hold,
	}
	op.kept = op.keptBuf[:0]
	if deadline.IsZero() {
		deadline = op.start.Add(c.opts.nodeTimeout)
	}
	for i, n := range c.nodes {
		sn := n // where the command goes: the master, or a cluster's shard
		if n.cluster != nil {
			var err error
			if sn, err = n.cluster.route(keys); err != nil {
				var zero T
				if after != nil {
					after(n, zero, err)
				}
				op.deliver(reply[T]{node: n, err: err})
				continue
			}
		}
		if sn.isDown() {
			var zero T
			if after != nil {
				after(n, zero, errMasterDown)
			}
			op.deliver(reply[T]{node: n, err: errMasterDown})
			continue
		}
		cl := &op.calls[i]
		build(n, cl)
		cl.deadline, cl.to, cl.idx = deadline, op, i
		if sn != n {
			cl.cv, cl.shard = n.cluster, sn
		}
		sn.batch.trySend(cl)
	}
	return op.ch
}

// fanoutScript is fanoutCmd for one of this package's scripts, run with
// the same keys and arguments on every master.
func fanoutScript[T any](c *Client, s *script, keys []string, args []any, parse func(*redis.Cmd) (T, error), after func(n *node, v T, err error)) <-chan reply[T] {
	return fanoutCmd(c, keys, scriptCall(s, keys, args), parse, after)
}

// scriptCall builds every master's call of s with keys and args.
func scriptCall(s *script, keys []string, args []any) func(*node, *call) {
	return func(_ *node, cl *call) { cl.script, cl.keys, cl.args = s, keys, args }
}

// fanoutOp is one fanout: one object answers every master's call.
type fanoutOp[T any] struct {
	c     *Client
	keys  []string // the step's keys: the restart guard may withhold a vote on one of them
	ch    chan reply[T]
	start time.Time
	parse func(*redis.Cmd) (T, error)
	after func(n *node, v T, err error)
	calls []call
	// Replies come from the masters' workers; the first hold are handed
	// over together.
	hold    int
	mu      sync.Mutex
	got     int         // replies come so far
	kept    []reply[T]  // … and not yet handed over
	keptBuf [2]reply[T] // kept's first storage
}

func (op *fanoutOp[T]) reply(i int, cmd *redis.Cmd, now time.Time) {
	n := op.c.nodes[i]
	sn := n // the node that answered: the master, or a cluster's shard
	if cl := &op.calls[i]; cl.shard != nil {
		sn = cl.shard
	}
	v, err := op.parse(cmd)
	// The master answered if the command came back, whatever the answer
	// parses to (a LargeValue where a string was due, say).
	sn.record(cmd.Err(), now.Sub(op.start), now)
	if op.after != nil {
		op.after(n, v, err)
	}
	g, guarded := sn.guardFor(now, op.keys)
	if !guarded && sn != n {
		g, guarded = n.cluster.slotGuardFor(now, op.keys)
	}
	op.deliver(reply[T]{node: n, val: v, err: err, trusted: !guarded, guard: g})
}

// deliver hands r over, with those kept before it, once hold replies have
// come; until then it keeps r. The channel holds every master's reply, so
// no send blocks.
func (op *fanoutOp[T]) deliver(r reply[T]) {
	if op.hold <= 1 {
		op.ch <- r
		return
	}
	op.mu.Lock()
	if op.got++; op.got < op.hold {
		op.kept = append(op.kept, r)
		op.mu.Unlock()
		return
	}
	kept := op.kept
	op.kept = nil
	op.mu.Unlock()
	for _, k := range kept {
		op.ch <- k
	}
	op.ch <- r
}

func parseInt(cmd *redis.Cmd) (int64, error) { return cmd.Int64() }

// heldBy returns the value that a quorum of masters holds, if any, from
// counts of the masters that answered by the value each holds: the one
// rule for "held by another" (an acquire's refusal) beside the votes'
// yes and no.
func heldBy(counts map[string]int, quorum int) *string {
	for v, k := range counts {
		if k >= quorum {
			return &v
		}
	}
	return nil
}

// heldByLarge is heldBy for values too long to keep, told apart by their
// length and hash.
func heldByLarge(counts map[LargeValue]int, quorum int) *LargeValue {
	for v, k := range counts {
		if k >= quorum {
			return &v
		}
	}
	return nil
}
