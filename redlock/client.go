package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Client obtains locks on a fixed set of independent Redis masters. It is
// safe for concurrent use.
type Client struct {
	e *engine.Client
}

// Option configures a Client.
type Option struct {
	o engine.Option
}

// WithQuorum sets the number of masters that must agree. Default N/2+1; it
// must lie in (N/2, N].
func WithQuorum(n int) Option { return Option{engine.WithQuorum(n)} }

// WithDriftFactor sets the clock-drift factor subtracted from every
// validity as ttl·factor + 2 ms. Default 0.01; range [0, 0.5).
func WithDriftFactor(f float64) Option { return Option{engine.WithDriftFactor(f)} }

// WithNodeTimeout sets how long one master may take to answer one
// operation. Default 100 ms; it should be small next to the lock TTLs in
// use.
func WithNodeTimeout(d time.Duration) Option { return Option{engine.WithNodeTimeout(d)} }

// WithRestartGuard sets the guard window: a master that restarted (its
// run_id changed, or it has been up for less than the window) and may have
// lost the locks it held does not count as a vote on any key until the
// window has passed since its start, nor on a key before a longer TTL this
// client wrote there before that has run out. It must be at least the
// longest TTL written through any other client of these masters. Default
// 60 s; 0 disables the guard (and the clock check).
func WithRestartGuard(window time.Duration) Option {
	return Option{engine.WithRestartGuard(window)}
}

// WithMaxLockTTL sets the longest TTL Obtain and Refresh may ask for; more
// is refused (ErrTTLTooLong) before anything is sent. It bounds how long a
// master that lost its data is kept from voting on a key this client
// locked. Default 1 h; range 1 ms to 7 days.
func WithMaxLockTTL(d time.Duration) Option { return Option{engine.WithMaxLockTTL(d)} }

// WithClockCheck sets how often each master's clock is compared with the
// client's, and the jump (beyond the time the check took) after which the
// master is treated like one that restarted: a clock that jumps forward
// expires locks early. Default every second, 1 s; every 0 disables it. It
// does nothing when the restart guard is off.
func WithClockCheck(every, jump time.Duration) Option {
	return Option{engine.WithClockCheck(every, jump)}
}

// WithRedisOptions lets the caller adjust the go-redis options of master i
// (credentials, TLS) before its connections are made. Timeouts and retries
// are set by this package and cannot be changed here.
func WithRedisOptions(f func(i int, o *redis.Options)) Option {
	return Option{engine.WithRedisOptions(f)}
}

// WithLogf sets a function that receives notable events (master restarts,
// clock jumps).
func WithLogf(f func(format string, args ...any)) Option { return Option{engine.WithLogf(f)} }

// New returns a Client for the masters at addrs. No connection is made
// until the first operation.
func New(addrs []string, opts ...Option) (*Client, error) {
	eo := make([]engine.Option, len(opts))
	for i, o := range opts {
		eo[i] = o.o
	}
	e, err := engine.New(addrs, eo...)
	if err != nil {
		return nil, err
	}
	return &Client{e: e}, nil
}

// InitMasters declares the masters a new deployment, on which no lock was
// ever taken: a master younger than the restart guard's window that
// persists every write (AOF, appendfsync always) then votes at once instead
// of after the window. It changes nothing unless every master answers and
// holds no key; it is for masters just created empty, never for masters
// that lost their data.
func (c *Client) InitMasters(ctx context.Context) error { return c.e.InitMasters(ctx) }

// Close closes every master connection.
func (c *Client) Close() error { return c.e.Close() }
