package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	o         engine.Option
	redisOpts func(i int, o *redis.Options) // WithRedisOptions, applied by New
}

// WithQuorum sets the number of masters that must agree. Default N/2+1; it
// must lie in (N/2, N].
func WithQuorum(n int) Option { return Option{o: engine.WithQuorum(n)} }

// WithDriftFactor sets the clock-drift factor subtracted from every
// validity as ttl·factor + 2 ms. Default 0.01; range [0, 0.5).
func WithDriftFactor(f float64) Option { return Option{o: engine.WithDriftFactor(f)} }

// WithNodeTimeout sets how long one master may take to answer one
// operation. Default 100 ms; it should be small next to the lock TTLs in
// use.
func WithNodeTimeout(d time.Duration) Option { return Option{o: engine.WithNodeTimeout(d)} }

// WithRestartGuard sets the guard window: a master that restarted (its
// run_id changed, or it has been up for less than the window) and may have
// lost the locks it held does not count as a vote on any key until the
// window has passed since its start, nor on a key before a longer TTL this
// client wrote there before that has run out. It must be at least the
// longest TTL written through any other client of these masters. Default
// 60 s; 0 disables the guard (and the clock check).
func WithRestartGuard(window time.Duration) Option {
	return Option{o: engine.WithRestartGuard(window)}
}

// WithMaxLockTTL sets the longest TTL Obtain and Refresh may ask for; more
// is refused (ErrTTLTooLong) before anything is sent. It bounds how long a
// master that lost its data is kept from voting on a key this client
// locked. Default 1 h; range 1 ms to 7 days.
func WithMaxLockTTL(d time.Duration) Option { return Option{o: engine.WithMaxLockTTL(d)} }

// WithClockCheck sets how often each master's clock is compared with the
// client's, and the jump (beyond the time the check took) after which the
// master is treated like one that restarted: a clock that jumps forward
// expires locks early. Default every second, 1 s; every 0 disables it. It
// does nothing when the restart guard is off.
func WithClockCheck(every, jump time.Duration) Option {
	return Option{o: engine.WithClockCheck(every, jump)}
}

// WithRedisOptions lets the caller adjust the go-redis options of master i
// (credentials, TLS) before its connections are made. Timeouts and retries
// are set by this package and cannot be changed here.
func WithRedisOptions(f func(i int, o *redis.Options)) Option {
	return Option{redisOpts: f}
}

// WithLogf sets a function that receives notable events (master restarts,
// clock jumps).
func WithLogf(f func(format string, args ...any)) Option { return Option{o: engine.WithLogf(f)} }

// New returns a Client for the masters at addrs ("host:port"; a master
// may also be a Sentinel group, sentinel://host:port[,host:port…]/name, or
// a Redis Cluster, cluster://host:port[,host:port…]). No connection is made
// until the first operation, which waits for each master's first
// connection (up to 5 s, or the node timeout if longer) as a go-redis
// client's first command waits for its dial; later connections, after a
// master restarts or a connection breaks, are waited for only within the
// node timeout.
func New(addrs []string, opts ...Option) (*Client, error) {
	return newClient(addrs, nil, opts)
}

// NewFromClients returns a Client for the masters that the caller's own
// go-redis clients reach, one client per master: a *redis.Client (made by
// redis.NewClient) for one server, a *redis.ClusterClient for a master
// that is a Redis Cluster. Each master is reached with its client's
// options: address, credentials (CredentialsProvider included), TLS,
// Dialer and database; WithRedisOptions, if given, adjusts them further.
//
// The Client opens connections of its own with those options; it does not
// send lock commands through the clients' pools, because every new
// connection is checked (the master's run_id, uptime and persistence)
// before anything it answers counts as a vote, and lock commands need
// timeouts and no retries of their own (a retried SET NX would turn this
// client's own vote into a refusal). Close closes those connections, not
// the caller's clients, which stay the caller's to use and close.
//
// A *redis.Ring, a client of a Unix socket, and a client made by redis.NewFailoverClient (whose
// Sentinel addresses it does not expose: give the group to New as
// sentinel://host:port[,host:port…]/name), are refused.
func NewFromClients(clients []redis.UniversalClient, opts ...Option) (*Client, error) {
	addrs := make([]string, len(clients))
	base := make([]*redis.Options, len(clients))
	for i, rc := range clients {
		switch rc := rc.(type) {
		case *redis.Client:
			o := rc.Options()
			switch {
			case o.Addr == "FailoverClient":
				return nil, fmt.Errorf("redlock: client %d is a Sentinel failover client: give its group to New as sentinel://host:port[,host:port…]/name", i)
			case o.Network != "" && o.Network != "tcp":
				return nil, fmt.Errorf("redlock: client %d reaches its master over %s; only TCP is supported", i, o.Network)
			}
			addrs[i], base[i] = o.Addr, o
		case *redis.ClusterClient:
			o := rc.Options()
			if len(o.Addrs) == 0 {
				return nil, fmt.Errorf("redlock: client %d is a cluster client without seed addresses", i)
			}
			addrs[i] = "cluster://" + strings.Join(o.Addrs, ",")
			base[i] = &redis.Options{
				Dialer: o.Dialer, Username: o.Username, Password: o.Password,
				CredentialsProvider: o.CredentialsProvider, TLSConfig: o.TLSConfig,
			}
		case nil:
			return nil, fmt.Errorf("redlock: client %d is nil", i)
		default:
			return nil, fmt.Errorf("redlock: client %d is a %T; one master is one *redis.Client or one *redis.ClusterClient", i, rc)
		}
	}
	return newClient(addrs, base, opts)
}

// newClient is New with, when base is set, the go-redis options of each
// master to start from.
func newClient(addrs []string, base []*redis.Options, opts []Option) (*Client, error) {
	var eo []engine.Option
	var user func(int, *redis.Options)
	for _, o := range opts {
		switch {
		case o.redisOpts != nil:
			user = o.redisOpts
		case o.o != nil:
			eo = append(eo, o.o)
		default:
			return nil, errors.New("redlock: the zero Option")
		}
	}
	if base != nil || user != nil {
		eo = append(eo, engine.WithRedisOptions(func(i int, o *redis.Options) {
			if base != nil {
				*o = *base[i] // the address is the master's own, set after
			}
			if user != nil {
				user(i, o)
			}
		}))
	}
	e, err := engine.New(addrs, eo...)
	if err != nil {
		return nil, err
	}
	return &Client{e: e}, nil
}

// InitMasters declares the masters a new deployment, on which no lock was
// ever taken, as redlock-proxy -init-masters does: a master younger than
// the restart guard's window that persists every write (AOF, appendfsync
// always) then votes at once, for this and every other client, instead of
// after the window. Call it once, when the masters are created, before
// their first lock. It changes nothing unless every master answers and
// holds no key (masters already declared are left as they are); it is for
// masters just created empty, never for masters that lost their data.
// A master given as a Redis Cluster is declared shard by shard: every
// shard primary that owns slots when it runs.
func (c *Client) InitMasters(ctx context.Context) error { return c.e.InitMasters(ctx) }

// Close closes every master connection, once the commands in flight (the
// rollback of an Obtain that was refused among them) are answered: a
// process that exits after Close leaves no part of a refused lock on a
// master. It waits for them at most the node timeout past 5 s (or twice
// the node timeout if longer).
func (c *Client) Close() error { return c.e.Close() }
