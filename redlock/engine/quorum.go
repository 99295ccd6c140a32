package engine

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// reply is one master's answer to one step of a quorum operation.
type reply[T any] struct {
	node    *node
	val     T
	err     error
	trusted bool // the restart guard lets this master's vote count
}

// fanout runs call on every master in parallel, each in a goroutine of its
// own until deadline, and delivers the replies on a channel buffered to N,
// so that no goroutine blocks once the caller has stopped reading. A call is
// not cancelled when ctx is. Lock operations use fanoutCmd, which queues on
// the pipelines instead; fanout serves Probe, whose PING goes through the
// go-redis pool.
func fanout[T any](ctx context.Context, c *Client, deadline time.Time, call func(ctx context.Context, n *node) (T, error)) <-chan reply[T] {
	ch := make(chan reply[T], len(c.nodes))
	base := context.WithoutCancel(ctx)
	for _, n := range c.nodes {
		if n.isDown() {
			ch <- reply[T]{node: n, err: errMasterDown}
			continue
		}
		go func(n *node) {
			nctx, cancel := context.WithDeadline(base, deadline)
			defer cancel()
			start := time.Now()
			v, err := call(nctx, n)
			now := time.Now()
			n.record(err, now.Sub(start), now)
			ch <- reply[T]{node: n, val: v, err: err, trusted: n.trusted(now)}
		}(n)
	}
	return ch
}

// errMasterDown is the vote of a master that is marked down.
var errMasterDown = errors.New("master marked down")

// collect reads replies until done says the outcome is decided or every
// master has answered. It returns the replies read; late ones are dropped.
func collect[T any](ch <-chan reply[T], n int, done func(got []reply[T]) bool) []reply[T] {
	got := make([]reply[T], 0, n)
	for len(got) < n {
		got = append(got, <-ch)
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

// err is the *QuorumError of a step whose outcome cannot be known.
func (t *votes) err() error {
	return &QuorumError{Reachable: t.reachable(), Needed: t.quorum, Nodes: t.errs}
}

// countVotes reads the replies of one step, classing each answer with
// class, until until says the outcome is decided (nil: until every master
// has answered or timed out; (*votes).decided: as soon as it is). A yes from a master under the restart
// guard, or tainted for key and token taint (if not empty), is withheld,
// and so is a no from a guarded master. It returns the count and the
// replies read; late ones are dropped.
func countVotes[T any](c *Client, ch <-chan reply[T], taint string, until func(*votes) bool, class func(T) vote) (votes, []reply[T]) {
	t := c.newVotes()
	got := collect(ch, len(c.nodes), func(got []reply[T]) bool {
		r := got[len(got)-1]
		if r.err != nil {
			t.add(r.node, r.err, voteNo, false)
		} else {
			v := class(r.val)
			t.add(r.node, nil, v, !r.trusted || v == voteYes && c.taintedFor(r.node, taint))
		}
		return until != nil && until(&t)
	})
	return t, got
}

// taintedFor reports whether n's votes for the key and token of taint are
// withheld (an empty taint names none).
func (c *Client) taintedFor(n *node, taint string) bool {
	return taint != "" && !c.off(GuardTaint) && n.tainted(taint)
}

// fanoutCmd is fanout without a goroutine per master: build makes each
// master's command, and when its reply arrives, the worker that read it
// parses it, calls after (if not nil) and delivers it. after also gets
// errMasterDown for a master that was sent nothing. after must not block.
func fanoutCmd[T any](c *Client, build func(n *node, cl *call), parse func(*redis.Cmd) (T, error), after func(n *node, v T, err error)) <-chan reply[T] {
	op := &fanoutOp[T]{
		c: c, ch: make(chan reply[T], len(c.nodes)), start: time.Now(),
		parse: parse, after: after, calls: make([]call, len(c.nodes)),
	}
	deadline := op.start.Add(c.opts.nodeTimeout)
	for i, n := range c.nodes {
		if n.isDown() {
			var zero T
			if after != nil {
				after(n, zero, errMasterDown)
			}
			op.ch <- reply[T]{node: n, err: errMasterDown}
			continue
		}
		cl := &op.calls[i]
		build(n, cl)
		cl.deadline, cl.to, cl.idx = deadline, op, i
		n.batch.trySend(cl)
	}
	return op.ch
}

// fanoutScript is fanoutCmd for one of this package's scripts, run with
// the same keys and arguments on every master.
func fanoutScript[T any](c *Client, s *script, keys []string, args []any, parse func(*redis.Cmd) (T, error), after func(n *node, v T, err error)) <-chan reply[T] {
	return fanoutCmd(c, func(_ *node, cl *call) { cl.script, cl.keys, cl.args = s, keys, args }, parse, after)
}

// fanoutOp is one fanoutCmd: one object answers every master's call.
type fanoutOp[T any] struct {
	c     *Client
	ch    chan reply[T]
	start time.Time
	parse func(*redis.Cmd) (T, error)
	after func(n *node, v T, err error)
	calls []call
}

func (op *fanoutOp[T]) reply(i int, cmd *redis.Cmd, now time.Time) {
	n := op.c.nodes[i]
	v, err := op.parse(cmd)
	n.record(err, now.Sub(op.start), now)
	if op.after != nil {
		op.after(n, v, err)
	}
	op.ch <- reply[T]{node: n, val: v, err: err, trusted: n.trusted(now)}
}

func parseInt(cmd *redis.Cmd) (int64, error) { return cmd.Int64() }
