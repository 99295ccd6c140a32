package redlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// A Lock is what a caller holds: Obtain takes it, Refresh renews it,
// Release gives it back. Each method is one of the engine's quorum
// operations (Acquire, Extend, Release, or their fenced forms), with the
// rules those follow: drift-adjusted validity, rollback of a refused
// attempt, the restart guard, and "not held" only when a quorum is out of
// reach (otherwise ErrNoQuorum).

// Lock is a lock obtained on a quorum of masters. It is held until it is
// released or its validity runs out. Its methods are safe for concurrent
// use.
type Lock struct {
	c          *engine.Client
	key, token string
	meta       string
	fenced     bool
	fence      int64
	mu         sync.Mutex
	validUntil time.Time // zero: not held
}

// ObtainOption configures one Obtain.
type ObtainOption func(*obtainOptions)

type obtainOptions struct {
	token    string
	tokenSet bool
	meta     string
	retry    RetryStrategy
	fenced   bool
}

// WithToken sets the token that tells this holder from every other: the
// key holds it, followed by the metadata, on the masters. Default: 16 bytes
// from crypto/rand, base64 (22 characters). It must not be empty, and must
// be unique to the holder.
func WithToken(token string) ObtainOption {
	return func(o *obtainOptions) { o.token, o.tokenSet = token, true }
}

// WithMetadata stores meta after the token in the value the key holds on
// the masters, for whoever reads the key. Default: none.
func WithMetadata(meta string) ObtainOption {
	return func(o *obtainOptions) { o.meta = meta }
}

// WithRetryStrategy sets how Obtain waits between attempts on a key it was
// refused. Default NoRetry. (One attempt already tries again, up to three
// times, 25 to 50 ms apart, when its vote was split with no holder on a
// quorum or the quorum took so long that no validity was left; the
// strategy waits between such attempts.)
func WithRetryStrategy(s RetryStrategy) ObtainOption {
	return func(o *obtainOptions) { o.retry = s }
}

// WithFence obtains a fenced lock: its Fence is larger than that of every
// earlier fenced grant of the key, for the protected resource to check. A
// fenced lock also keeps, on every master, the key's counter and holds
// under keys that begin "redlock-proxy:" (reserved for this package).
func WithFence() ObtainOption {
	return func(o *obtainOptions) { o.fenced = true }
}

// Obtain takes key, for ttl (positive), on a quorum of masters, and
// returns the lock held. When the key is refused (ErrNotAcquired: held
// elsewhere, a split vote, validity spent) it tries again as the retry
// strategy says, until the strategy stops or ctx is done; the error then
// matches both ErrNotAcquired and ctx.Err(). When too few masters can vote
// it answers a *QuorumError (ErrNoQuorum) at once, without retrying: it
// names the masters that did not answer, and those under the restart
// guard with the time left (masters just created need InitMasters, or
// the window, before their first lock); a ttl above WithMaxLockTTL,
// ErrTTLTooLong (a *TTLError), with nothing sent.
//
// A key that a quorum holds for the same token is refused like any held
// key: a token names one hold.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	o := obtainOptions{retry: NoRetry()}
	for _, f := range opts {
		f(&o)
	}
	switch {
	case ttl <= 0:
		return nil, errors.New("redlock: a lock needs a positive TTL")
	case o.tokenSet && o.token == "":
		return nil, errors.New("redlock: empty token")
	case !o.tokenSet:
		o.token = newToken()
	}
	m := &Lock{c: c.e, key: key, token: o.token, meta: o.meta, fenced: o.fenced}
	var err error = ErrNotAcquired
	for n := 1; ; n++ {
		if ctx.Err() != nil {
			return nil, withCtx(ctx, err)
		}
		if err = m.obtain(ctx, ttl); err == nil {
			return m, nil
		}
		if !errors.Is(err, ErrNotAcquired) {
			return nil, err
		}
		d := o.retry.NextBackoff(n)
		if d <= 0 {
			return nil, withCtx(ctx, err)
		}
		if sleep(ctx, d) != nil {
			return nil, withCtx(ctx, err)
		}
	}
}

// withCtx adds ctx's error to err when ctx is done and err does not carry
// it yet.
func withCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", err, cerr)
	}
	return err
}

// newToken is 16 random bytes, base64.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// obtain is one attempt.
func (m *Lock) obtain(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	if m.fenced {
		r, err := m.c.AcquireFenced(ctx, m.key, m.value(), ttl, false)
		if err != nil {
			return err
		}
		m.fence = r.Grant.Fence
		m.setValidity(start, r.Grant.Validity)
		return nil
	}
	l, err := m.c.Acquire(ctx, m.key, m.value(), ttl)
	if err != nil {
		return err
	}
	m.setValidity(start, l.Validity)
	return nil
}

// value is what the key holds on the masters.
func (m *Lock) value() string { return m.token + m.meta }

// setValidity records that the lock is valid for v from start, the time
// taken before the operation that decided it; v is counted from later, so
// the lock is taken to end a little before it does.
func (m *Lock) setValidity(start time.Time, v time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v <= 0 {
		m.validUntil = time.Time{}
		return
	}
	m.validUntil = start.Add(v)
}

// Refresh renews the lock on a quorum of masters: its TTL becomes ttl
// (positive) from now, and its validity is counted again. It answers ErrNotHeld when a quorum no
// longer holds the lock, or when the renewal took so long that no validity
// was left, and ErrNoQuorum when that cannot be known; the lock then
// keeps no more validity than either TTL it may have on the masters. A
// ttl above WithMaxLockTTL is refused (ErrTTLTooLong) with nothing sent.
func (m *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		return errors.New("redlock: a lock needs a positive TTL")
	}
	if err := m.c.CheckTTL(ttl); err != nil {
		return err // nothing sent: the lock keeps its validity
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	var v time.Duration
	var ok bool
	var err error
	if m.fenced {
		v, ok, err = m.c.ExtendFenced(ctx, m.key, m.value(), ttl)
	} else {
		var r engine.ExtendResult
		r, ok, err = m.c.Extend(ctx, m.key, m.value(), ttl, engine.ExtendSet)
		v = r.Validity
	}
	switch {
	case err != nil:
		// Some masters may have taken the new TTL: the lock lasts no
		// longer than the shorter of the two.
		m.mu.Lock()
		if end := start.Add(m.c.Validity(ttl, 0)); end.Before(m.validUntil) {
			m.validUntil = end
		}
		m.mu.Unlock()
		return err
	case !ok:
		m.setValidity(start, 0)
		return ErrNotHeld
	}
	m.setValidity(start, v)
	return nil
}

// Release gives the lock back: it is deleted from every master where this
// token holds it. The lock counts as no longer
// held from the call on, whatever the outcome. It answers ErrNotHeld when
// a quorum did not hold it any more (it had expired, or was released
// already), and ErrNoQuorum when that cannot be known.
func (m *Lock) Release(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.setValidity(time.Time{}, 0)
	var held bool
	if m.fenced {
		r, err := m.c.ReleaseFenced(ctx, m.key, m.value())
		if err != nil {
			return err
		}
		held = r.Released
	} else {
		r, err := m.c.Release(ctx, m.key, m.value())
		if err != nil {
			return err
		}
		held = r.Released(m.c.Quorum())
	}
	if !held {
		return ErrNotHeld
	}
	return nil
}

// Validity is how long the lock is still safe to act on: the validity that
// Obtain or the last Refresh decided (the TTL less the time the quorum took
// and the clock-drift allowance), less the time since. 0: not held.
func (m *Lock) Validity() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(time.Until(m.validUntil), 0)
}

// TTL reads the lock from every master and answers how long a
// quorum will still hold it for this token: 0 when a quorum does not.
// Unlike Validity it has no drift allowance; it is a look at the masters,
// not a promise.
func (m *Lock) TTL(ctx context.Context) (time.Duration, error) {
	s, err := m.c.Read(ctx, m.key)
	if err != nil || !s.Exists || s.Value != m.value() {
		return 0, err
	}
	return s.PTTL, nil
}

// Key is the key locked.
func (m *Lock) Key() string { return m.key }

// Token is the token that tells this holder from every other.
func (m *Lock) Token() string { return m.token }

// Metadata is what WithMetadata stored after the token.
func (m *Lock) Metadata() string { return m.meta }

// Fence is the fencing number of a lock obtained WithFence: larger than
// that of every earlier fenced grant of the key. 0 without WithFence.
func (m *Lock) Fence() int64 { return m.fence }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
