package redlock

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

// tally counts the replies of one quorum step.
type tally struct {
	n, quorum int
	yes       int // trusted masters that did what was asked
	failed    int // errors and timeouts
	untrusted int // answers that cannot count (restart guard)
	answered  int
}

func (t *tally) pending() int { return t.n - t.answered }

// canStillWin reports whether the pending masters could still bring the yes
// votes to a quorum.
func (t *tally) canStillWin() bool { return t.yes+t.pending() >= t.quorum }

// reachable is how many masters could have counted.
func (t *tally) reachable() int { return t.n - t.failed - t.untrusted }

func (t *tally) quorumError(nodes []error) error {
	return &QuorumError{Reachable: t.reachable(), Needed: t.quorum, Nodes: nodes}
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

// trustedYes reads the replies of a step whose masters answer 1 for "done"
// until a quorum of trusted masters said 1, or can no longer; it returns
// those votes, the masters that failed, and their errors.
func (c *Client) trustedYes(ch <-chan reply[int64]) (yes, failed int, errs []error) {
	collect(ch, len(c.nodes), func(got []reply[int64]) bool {
		r := got[len(got)-1]
		switch {
		case r.err != nil:
			failed++
			errs = append(errs, &NodeError{Addr: r.node.addr, Err: r.err})
		case r.val == 1 && r.trusted:
			yes++
		}
		return yes >= c.quorum || yes+len(c.nodes)-len(got) < c.quorum
	})
	return yes, failed, errs
}
