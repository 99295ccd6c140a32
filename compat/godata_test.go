package compat

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// An application's go-redis client keeps its data on the same connection
// as its go-redsync and bsm/redislock locks: the same data calls, through
// go-redis's typed API, answer through the proxy as on a plain Redis,
// while both locks are held on a quorum; in database 0 and in database 2.
func TestGoDataBesideLocks(t *testing.T) {
	s := startStack(t)
	plain := redistest.Start(t)
	ctx := context.Background()
	for _, db := range []int{0, 2} {
		t.Run(fmt.Sprint("db", db), func(t *testing.T) {
			p := redis.NewClient(&redis.Options{Addr: s.Addr, DB: db})
			r := redis.NewClient(&redis.Options{Addr: plain.Addr, DB: db})
			defer p.Close()
			defer r.Close()
			m := redsync.New(goredis.NewPool(p)).NewMutex("godata:redsync", redsync.WithExpiry(20*time.Second), redsync.WithTries(1))
			if err := m.LockContext(ctx); err != nil {
				t.Fatalf("redsync Lock: %v", err)
			}
			l, err := redislock.New(p).Obtain(ctx, "godata:bsm", 20*time.Second, nil)
			if err != nil {
				t.Fatalf("bsm Obtain: %v", err)
			}
			if n := holdersIn(s, db, "godata:redsync", m.Value()); n < 2 {
				t.Fatalf("redsync's lock on %d masters' database %d", n, db)
			}
			if n := holdersIn(s, db, "godata:bsm", l.Token()); n < 2 {
				t.Fatalf("bsm's lock on %d masters' database %d", n, db)
			}
			for i, call := range dataCalls {
				got, want := call(ctx, p), call(ctx, r)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("call %d: proxy %#v, Redis %#v", i, got, want)
				}
			}
			if ok, err := m.UnlockContext(ctx); !ok || err != nil {
				t.Fatalf("redsync Unlock: %v %v", ok, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("bsm Release: %v", err)
			}
		})
	}
}

// holdersIn counts the masters whose database db holds value at key.
func holdersIn(s stack, db int, key, value string) int {
	n := 0
	for _, m := range s.Masters {
		c := redis.NewClient(&redis.Options{Addr: m.Addr, DB: db})
		if v, _ := c.Get(context.Background(), key).Result(); v == value {
			n++
		}
		c.Close()
	}
	return n
}

// result is a call's outcome: its value and its error's text.
type result struct {
	V   any
	Err string
}

func res(v any, err error) result {
	if err != nil {
		return result{Err: err.Error()}
	}
	return result{V: v}
}

// dataCalls are an application's data calls, each answering a comparable
// result; TTLs are rounded to seconds.
var dataCalls = []func(context.Context, *redis.Client) result{
	func(ctx context.Context, c *redis.Client) result { return res(c.Set(ctx, "godata:s", "v", 0).Result()) },
	func(ctx context.Context, c *redis.Client) result { return res(c.Get(ctx, "godata:s").Result()) },
	func(ctx context.Context, c *redis.Client) result { return res(c.Incr(ctx, "godata:n").Result()) },
	func(ctx context.Context, c *redis.Client) result { return res(c.IncrBy(ctx, "godata:n", 5).Result()) },
	func(ctx context.Context, c *redis.Client) result { return res(c.Get(ctx, "godata:n").Result()) },
	func(ctx context.Context, c *redis.Client) result { return res(c.Incr(ctx, "godata:s").Result()) },
	func(ctx context.Context, c *redis.Client) result {
		return res(c.SetNX(ctx, "godata:once", "1", time.Minute).Result())
	},
	func(ctx context.Context, c *redis.Client) result {
		return res(c.SetNX(ctx, "godata:once", "2", time.Minute).Result())
	},
	func(ctx context.Context, c *redis.Client) result { return res(c.Get(ctx, "godata:once").Result()) },
	func(ctx context.Context, c *redis.Client) result {
		d, err := c.TTL(ctx, "godata:once").Result()
		return res(d.Round(time.Minute), err)
	},
	func(ctx context.Context, c *redis.Client) result { return res(c.Del(ctx, "godata:once").Result()) },
	func(ctx context.Context, c *redis.Client) result { return res(c.Exists(ctx, "godata:once").Result()) },
	func(ctx context.Context, c *redis.Client) result {
		return res(c.MSet(ctx, "godata:a", "1", "godata:b", "2").Result())
	},
	func(ctx context.Context, c *redis.Client) result {
		return res(c.MGet(ctx, "godata:a", "godata:b", "godata:none").Result())
	},
	func(ctx context.Context, c *redis.Client) result {
		return res(c.HSet(ctx, "godata:h", "f", "1", "g", "2").Result())
	},
	func(ctx context.Context, c *redis.Client) result { return res(c.HGetAll(ctx, "godata:h").Result()) },
	func(ctx context.Context, c *redis.Client) result {
		return res(c.HIncrBy(ctx, "godata:h", "f", 3).Result())
	},
	func(ctx context.Context, c *redis.Client) result {
		return res(c.LPush(ctx, "godata:l", "x", "y").Result())
	},
	func(ctx context.Context, c *redis.Client) result {
		return res(c.LRange(ctx, "godata:l", 0, -1).Result())
	},
	func(ctx context.Context, c *redis.Client) result {
		return res(c.ZAdd(ctx, "godata:z", redis.Z{Score: 2, Member: "m"}).Result())
	},
	func(ctx context.Context, c *redis.Client) result {
		return res(c.ZRangeWithScores(ctx, "godata:z", 0, -1).Result())
	},
	func(ctx context.Context, c *redis.Client) result {
		return res(c.Expire(ctx, "godata:a", time.Hour).Result())
	},
	func(ctx context.Context, c *redis.Client) result {
		cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "godata:tx")
			p.Get(ctx, "godata:tx")
			return nil
		})
		var out []string
		for _, c := range cmds {
			out = append(out, c.String())
		}
		return res(out, err)
	},
	func(ctx context.Context, c *redis.Client) result {
		return res(c.Eval(ctx, "return redis.call('incrby', KEYS[1], ARGV[1])", []string{"godata:n"}, 2).Result())
	},
	func(ctx context.Context, c *redis.Client) result { return res(c.Type(ctx, "godata:h").Result()) },
	func(ctx context.Context, c *redis.Client) result {
		return res(c.Del(ctx, "godata:s", "godata:n", "godata:a", "godata:b", "godata:h", "godata:l", "godata:z", "godata:tx").Result())
	},
}
