package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The restart guard (WithRestartGuard) withholds the votes of a master that
// may have lost what it held (it restarted without proof of kept data, its
// data was erased, its clock jumped, another client doubts it), until every
// lock it could have held has expired:
//
//   - for the window after the loss, it votes on no key: the window bounds
//     the locks of other clients of these masters, and every TTL this client
//     wrote that is not longer than the window;
//   - beyond the window, it does not vote on a key while a TTL longer than
//     the window that this client wrote on that key before the loss may
//     still keep a lock alive there.
//
// So a long TTL keeps a restarted master from voting on its own key only,
// and no client can deny lock service on other keys. Every TTL written on a
// lock key counts, not only those granted by an acquire (a lock extended
// from 2 s to 30 s lives 30 s), but only when the write may have taken
// effect on a quorum: granted, extended, or an outcome not known (a master
// that did not answer may have applied it). A write a quorum refused (an
// acquire of a key held elsewhere, a PEXPIRE of a key that does not exist)
// leaves nothing to cover. No TTL is above WithMaxLockTTL: a write asking
// for more is refused before anything is sent.
//
// Memory: one entry per key written with a TTL longer than the window,
// dropped when that TTL has run out (swept every check interval), so at
// most the keys this client wrote with such a TTL within the last
// WithMaxLockTTL that may still hold it on a quorum; each master under the
// guard keeps its own copy of the entries alive at its loss, dropped the
// same way.

// GuardTTLStretch: every TTL written on a lock key (acquires, extends,
// renewals, NoteTTL) keeps a master that lost its data from voting on that
// key while it may be alive; off, only the TTLs of acquires do.
const GuardTTLStretch Guard = "ttl-stretch"

// ErrTTLTooLong is returned, before anything is sent, for a lock
// operation that would write a TTL above the longest allowed
// (WithMaxLockTTL). Its errors are *TTLError.
var ErrTTLTooLong = errors.New("redlock: lock TTL too long")

// TTLError is a lock TTL above the longest allowed; it matches
// ErrTTLTooLong.
type TTLError struct {
	TTL, Max time.Duration
}

func (e *TTLError) Error() string {
	return fmt.Sprintf("redlock: a lock TTL of %s exceeds the longest allowed, %s (WithMaxLockTTL)", FormatTTL(e.TTL), FormatTTL(e.Max))
}

// Is reports whether target is ErrTTLTooLong.
func (e *TTLError) Is(target error) bool { return target == ErrTTLTooLong }

// FormatTTL writes a TTL for people: as time.Duration does without its
// trailing zero units ("1h", "1m30s"), and in days beyond two days.
func FormatTTL(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	s := d.Round(time.Millisecond).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// CheckTTL returns a *TTLError when ttl is above the longest lock TTL
// allowed (WithMaxLockTTL), nil otherwise. Every operation of this client
// that writes a TTL checks it before anything is sent; callers that write
// TTLs by other means (NoteTTL) or read before they write check with it
// first.
func (c *Client) CheckTTL(ttl time.Duration) error {
	if ttl > c.opts.maxLockTTL {
		return &TTLError{TTL: ttl, Max: c.opts.maxLockTTL}
	}
	return nil
}

// MaxLockTTL is the longest lock TTL this client writes (WithMaxLockTTL).
func (c *Client) MaxLockTTL() time.Duration { return c.opts.maxLockTTL }

// keyTTLs remembers, per key, until when the TTLs longer than the window
// that this client wrote may keep a lock alive.
type keyTTLs struct {
	mu   sync.Mutex
	keys map[string]*keyTTL
}

// keyTTL is what keyTTLs knows of one key.
type keyTTL struct {
	until   time.Time   // the latest end of a write that may have taken effect on a quorum
	pending []time.Time // the ends of writes still in flight
}

// end is the latest time a write on the key may keep it alive.
func (k *keyTTL) end() time.Time {
	e := k.until
	for _, p := range k.pending {
		if p.After(e) {
			e = p
		}
	}
	return e
}

func newKeyTTLs() *keyTTLs { return &keyTTLs{keys: map[string]*keyTTL{}} }

// begin records a write in flight that may keep keys alive until until.
func (t *keyTTLs) begin(keys []string, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		e := t.keys[k]
		if e == nil {
			e = &keyTTL{}
			t.keys[k] = e
		}
		e.pending = append(e.pending, until)
	}
}

// end settles a write begun with begin: kept, until is remembered for its
// keys; otherwise it is forgotten.
func (t *keyTTLs) end(keys []string, until time.Time, kept bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		e := t.keys[k]
		if e == nil {
			continue
		}
		if i := slices.IndexFunc(e.pending, until.Equal); i >= 0 {
			e.pending = slices.Delete(e.pending, i, i+1)
		}
		if kept && until.After(e.until) {
			e.until = until
		}
		if !e.end().After(time.Now()) {
			delete(t.keys, k)
		}
	}
}

// beyond returns the keys whose TTLs may keep them alive after after, with
// until when: what a master that lost its data at a time whose window
// ends at after must not vote on.
func (t *keyTTLs) beyond(after time.Time) map[string]time.Time {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out map[string]time.Time
	for k, e := range t.keys {
		if end := e.end(); end.After(after) {
			if out == nil {
				out = map[string]time.Time{}
			}
			out[k] = end
		}
	}
	return out
}

// sweep drops the keys whose TTLs have all run out, those of writes still
// in flight included.
func (t *keyTTLs) sweep(now time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.keys {
		if !e.end().After(now) {
			delete(t.keys, k)
		}
	}
}

// size is how many keys are remembered.
func (t *keyTTLs) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}

// ttlNote is a TTL being written on keys: remembered as in flight from
// before the first send until settle says whether it may have taken effect
// on a quorum. A nil *ttlNote remembers nothing.
type ttlNote struct {
	c      *Client
	keys   []string
	until  time.Time
	quorum int
}

// noteTTL records, before a TTL of ttl is written on keys, that the lock
// may live until ttl from now; settle then keeps or forgets it. Only TTLs
// longer than the guard window need remembering (the window covers the
// others). Acquires note theirs always; other writes (extends, renewals)
// unless GuardTTLStretch is off. quorum is the operation's own (0: the
// client's).
func (c *Client) noteTTL(keys []string, ttl time.Duration, acquire bool, quorum int) *ttlNote {
	w := c.opts.guardWindow
	if w == 0 || ttl <= w || !acquire && c.off(GuardTTLStretch) || len(keys) == 0 {
		return nil
	}
	if quorum == 0 {
		quorum = c.quorum
	}
	n := &ttlNote{c: c, keys: slices.Clone(keys), until: time.Now().Add(ttl), quorum: quorum}
	c.opts.keyTTLs.begin(n.keys, n.until)
	return n
}

// settle keeps the TTL unless refused masters answered that it did not take
// effect there and a quorum of them that did is out of reach (refused >
// masters − quorum). A master that did not answer may have applied it.
func (n *ttlNote) settle(refused int) {
	if n == nil {
		return
	}
	n.c.opts.keyTTLs.end(n.keys, n.until, refused <= len(n.c.nodes)-n.quorum)
}

// answered reports whether err is a master's answer (a reply, nil or an
// error reply) rather than no answer at all.
func answered(err error) bool {
	var re redis.Error
	return err == nil || err == redis.Nil || isReplyError(err) || errors.As(err, &re)
}

// refusedBy counts the replies whose master answered, applied saying
// whether the write took effect there.
func refusedBy[T any](got []reply[T], applied func(T) bool) int {
	k := 0
	for _, r := range got {
		if r.err == nil && !applied(r.val) {
			k++
		}
	}
	return k
}

// TTLWrite is a TTL being written on a lock key by a command the caller
// sends itself (Broadcast of PEXPIRE, SET … PX, GETEX): NoteTTL before
// the send, Done after it.
type TTLWrite struct{ n *ttlNote }

// NoteTTL tells the restart guard, before a TTL of ttl is written on key
// by other means than this client's lock operations, that the lock may
// live until ttl from now. It returns a *TTLError, and remembers nothing,
// when ttl is above WithMaxLockTTL: the caller must not send the write.
func (c *Client) NoteTTL(key string, ttl time.Duration) (*TTLWrite, error) {
	if err := c.CheckTTL(ttl); err != nil {
		return nil, err
	}
	return &TTLWrite{n: c.noteTTL([]string{key}, ttl, false, 0)}, nil
}

// Done settles the write from the masters' answers: applied reports
// whether the command took effect on the master that gave an answer (a
// reply, an error reply included); masters that gave none, and those
// missing from got, may have applied it. The TTL is forgotten when a
// quorum of masters that applied it is out of reach.
func (w *TTLWrite) Done(got []Result, applied func(Result) bool) {
	if w == nil || w.n == nil {
		return
	}
	refused := 0
	for _, r := range got {
		if answered(r.Err) && !applied(r) {
			refused++
		}
	}
	w.n.settle(refused)
}

// guardOf says why a master's vote is withheld: until when, and on which
// key (empty: every key, the window after its loss).
type guardOf struct {
	until   time.Time
	key     string
	replica bool // it answers as a replica
}

// lost puts the master under the guard after it may have lost its data at
// start (its process's start, or when the loss was found): for the window
// after start on every key, and on each key this client wrote with a TTL
// that may keep it alive beyond that, until it runs out. n.mu held.
func (n *node) lost(start, now time.Time, why string) {
	end := start.Add(n.opts.guardWindow)
	n.guardTo(end, now, why)
	keys := n.opts.keyTTLs.beyond(maxTime(end, now))
	if len(keys) == 0 {
		return
	}
	if n.keyGuard == nil {
		n.keyGuard = map[string]time.Time{}
	}
	for k, until := range keys {
		if until.After(n.keyGuard[k]) {
			n.keyGuard[k] = until
		}
	}
	n.logf("redlock: master %s does not vote on %d keys written with longer TTLs until they expire: %s", n.addr, len(keys), why)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// guardFor reports whether the restart guard withholds the master's vote
// on keys at now, and why.
func (n *node) guardFor(now time.Time, keys []string) (guardOf, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.repl.isReplica() {
		// A replica never votes; once promoted, not before the window.
		return guardOf{until: maxTime(n.guardUntil, now.Add(n.opts.guardWindow)), replica: true}, true
	}
	if now.Before(n.guardUntil) {
		return guardOf{until: n.guardUntil}, true
	}
	var g guardOf
	for _, k := range keys {
		if until, ok := n.keyGuard[k]; ok && now.Before(until) && until.After(g.until) {
			g = guardOf{until: until, key: k}
		}
	}
	return g, !g.until.IsZero()
}

// sweepKeyGuard drops the keys whose guard has ended.
func (n *node) sweepKeyGuard(now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, until := range n.keyGuard {
		if !now.Before(until) {
			delete(n.keyGuard, k)
		}
	}
}

// guardedKeys counts the keys the master does not vote on beyond the
// window. n.mu held.
func (n *node) guardedKeys(now time.Time) int {
	k := 0
	for _, until := range n.keyGuard {
		if now.Before(until) {
			k++
		}
	}
	return k
}

// GuardedMaster is a master whose vote the restart guard withholds.
type GuardedMaster struct {
	Index int    // its place among the masters, from 0
	Addr  string // its address
	Until time.Time
	// Key is the key it does not vote on beyond the window, a TTL this
	// client wrote there still being alive; empty: every key, within the
	// window after its loss.
	Key string
	// Replica: it answers as a replica, which never votes (Until is then
	// the earliest it could vote again, were it promoted now).
	Replica bool
}

// guarded returns the masters whose votes on keys the guard withholds now.
func (c *Client) guarded(keys []string) []GuardedMaster {
	now := time.Now()
	var out []GuardedMaster
	for _, n := range c.nodes {
		if s, g, ok := n.guardOn(now, keys); ok {
			out = append(out, s.guardedMaster(g))
		}
	}
	return out
}

func (n *node) guardedMaster(g guardOf) GuardedMaster {
	return GuardedMaster{Index: n.idx, Addr: n.addr, Until: g.until, Key: g.key, Replica: g.replica}
}

// NoQuorum is the *QuorumError of an operation on keys that reachable
// masters could settle, quorum being needed: with the masters whose votes
// on keys the restart guard withholds now.
func (c *Client) NoQuorum(reachable int, keys ...string) *QuorumError {
	return c.quorumErr(reachable, c.quorum, keys)
}
