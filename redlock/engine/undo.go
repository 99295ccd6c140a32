package engine

import (
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxUndoWait caps the wait between two tries of a failed rollback.
const maxUndoWait = time.Second

// undoRetry sends a rollback again after it failed. An undo that timed out
// or lost its connection may never have reached the master (a connection
// that could not be re-dialled within the node timeout sends nothing), and
// what it should have taken back then holds the key for nobody until it
// expires: one master's part of a refused acquire costs the next acquirer
// that master's vote, a quorum's part locks the key out for its whole TTL.
//
// Only undos that cannot remove anything a later acquire took are retried:
// an acquire's, while the master's votes for its token are withheld (the
// taint), and a fenced attempt's, which names the attempt.
type undoRetry struct {
	c     *Client
	n     *node
	key   string
	mk    func() *call // a new call of the same undo
	until time.Time    // no try starts after this
	wait  time.Duration
	tries int
}

// retryUndo starts retrying, after its first try failed with err, the undo
// on n that mk makes; tries stop when one lands, when the master answers
// with an error that another try would get too, or when a try could not
// start before until. An error the master answers while it cannot run
// commands for now (loading its data, busy with a script) is tried again.
func (c *Client) retryUndo(n *node, key string, err error, until time.Time, mk func() *call) {
	r := &undoRetry{c: c, n: n, key: key, mk: mk, until: until, wait: c.opts.nodeTimeout}
	r.failed(err)
}

func (r *undoRetry) failed(err error) {
	var re redis.Error
	if errors.Is(err, errClosed) || errors.As(err, &re) && !transientReply(re) {
		if re != nil {
			r.n.undoLog(undoAnswered, "redlock: rollback of %q on master %s answered %v", r.key, r.n.addr, err)
		}
		return
	}
	if err != errMasterDown { // a skipped try sent nothing
		r.n.undoFailures.Add(1)
	}
	if r.c.opts.noUndoRetry {
		return
	}
	if r.tries == 0 {
		r.n.undoLog(undoFailing, "redlock: rollback of %q on master %s failed (%v); trying again until %s", r.key, r.n.addr, err, r.until.Format(time.RFC3339Nano))
	}
	if time.Now().Add(r.wait).After(r.until) {
		r.n.undoLog(undoAbandoned, "redlock: rollback of %q on master %s not done after %d tries (%v); the key expires on its own", r.key, r.n.addr, r.tries+1, err)
		return
	}
	// The next wait is set before the timer starts: the try runs on the
	// timer's goroutine.
	wait := r.wait
	r.wait = min(2*r.wait, maxUndoWait)
	time.AfterFunc(wait, r.try)
}

// transientReply reports whether an error reply says the master could not
// run the command now, but will later: loading its data at start (LOADING),
// running a script past the busy threshold (BUSY), or refusing writes
// until it can persist again (MISCONF), refusing writes or not knowing them
// replicated while its replicas lag (NOREPLICAS: min-replicas-to-write,
// WithWaitReplicas).
func transientReply(re redis.Error) bool {
	for _, p := range []string{"LOADING ", "BUSY ", "MISCONF ", "TRYAGAIN ", "MASTERDOWN ", "NOREPLICAS "} {
		if strings.HasPrefix(re.Error(), p) {
			return true
		}
	}
	return false
}

func (r *undoRetry) try() {
	select {
	case <-r.c.stop:
		return
	default:
	}
	r.tries++
	if r.n.downFor([]string{r.key}) { // the prober will find it back; nothing is sent meanwhile
		r.failed(errMasterDown)
		return
	}
	u := r.mk()
	u.deadline = time.Now().Add(r.c.opts.nodeTimeout)
	u.done = func(cmd *redis.Cmd) {
		if err := cmd.Err(); err != nil {
			r.failed(err)
			return
		}
		r.n.undoLog(undoDone, "redlock: rollback of %q on master %s done at try %d", r.key, r.n.addr, r.tries+1)
	}
	r.n.sendAsync(u)
}

// undoUntil is when the tries of an undo first sent at sent stop: a try's
// deadline falls before the lock expires, or with no TTL before the
// master's votes for the token count again (the taint, from sent, lasts at
// least the TTL).
func (c *Client) undoUntil(sent time.Time, ttl time.Duration) time.Time {
	d := ttl
	if d <= 0 {
		d = c.taintFor(ttl)
	}
	return sent.Add(d - c.opts.nodeTimeout)
}

// The kinds of rollback log lines, each limited on its own.
const (
	undoFailing = iota
	undoDone
	undoAbandoned
	undoAnswered
	undoKinds
)

// undoLog logs one line of a kind about this master's rollbacks, at most
// one a second: when a master stalls under load, every refused acquire
// has a rollback there. The next line that gets through says how many
// were left out.
func (n *node) undoLog(kind int, format string, args ...any) {
	now := time.Now()
	n.mu.Lock()
	l := &n.undoLogs[kind]
	if now.Sub(l.last) < time.Second {
		l.dropped++
		n.mu.Unlock()
		return
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	n.mu.Unlock()
	if dropped > 0 {
		format += " (and %d more like it since the last such line)"
		args = append(args, dropped)
	}
	n.logf(format, args...)
}

// logLimit is what undoLog keeps of one kind of line.
type logLimit struct {
	last    time.Time
	dropped int
}
