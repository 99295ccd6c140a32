package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// lockResult is one timed run of lock+unlock pairs.
type lockResult struct {
	pairs      int
	elapsed    time.Duration
	p50, p99   time.Duration // acquire latency of successful locks
	lockErrs   int
	unlockErrs int
	errSamples []string
}

func (r lockResult) rate() float64 { return float64(r.pairs) / r.elapsed.Seconds() }

// runRedsync runs `clients` goroutines, each with its own go-redsync
// instance over its own go-redis client per server, each locking and
// unlocking its own key (no contention) for d, after one untimed warm-up
// pair per client. With one server, redsync's quorum is 1. timed, if not
// nil, is called when the timed part starts.
func runRedsync(servers []string, clients int, d time.Duration, timed func(start time.Time)) (lockResult, error) {
	run := make([]byte, 4)
	_, _ = rand.Read(run)
	runID := hex.EncodeToString(run)

	ws := make([]*redsyncWorker, clients)
	for i := range ws {
		ws[i] = newRedsyncWorker(servers, fmt.Sprintf("bench:%s:%d", runID, i))
	}
	defer func() {
		for _, w := range ws {
			w.close()
		}
	}()

	ctx := context.Background()
	// Warm-up: one pair per client, which also opens the connections and,
	// through the proxy, teaches it the unlock script's digest.
	for _, w := range ws {
		m := w.mutex(-1)
		if err := m.LockContext(ctx); err != nil {
			return lockResult{}, fmt.Errorf("warm-up lock on %v: %w", servers, err)
		}
		if ok, err := m.UnlockContext(ctx); err != nil || !ok {
			return lockResult{}, fmt.Errorf("warm-up unlock on %v: %v %v", servers, ok, err)
		}
	}

	start := time.Now()
	deadline := start.Add(d)
	if timed != nil {
		timed(start)
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func(w *redsyncWorker) {
			defer wg.Done()
			w.run(ctx, deadline)
		}(w)
	}
	wg.Wait()
	res := lockResult{elapsed: time.Since(start)}
	var lat []time.Duration
	for _, w := range ws {
		res.pairs += w.pairs
		res.lockErrs += w.lockE
		res.unlockErrs += w.unlockE
		lat = append(lat, w.lat...)
		for _, e := range w.errs {
			if len(res.errSamples) < 5 {
				res.errSamples = append(res.errSamples, e)
			}
		}
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	res.p50 = quantile(lat, 0.50)
	res.p99 = quantile(lat, 0.99)
	return res, nil
}

// redsyncWorker is one client of runRedsync: a go-redsync instance over a
// go-redis client per server, its keys <prefix>:<generation>, and its
// counts.
type redsyncWorker struct {
	rs      *redsync.Redsync
	conns   []*redis.Client
	prefix  string
	lat     []time.Duration
	pairs   int
	lockE   int
	unlockE int
	errs    []string
}

func newRedsyncWorker(servers []string, prefix string) *redsyncWorker {
	w := &redsyncWorker{prefix: prefix, lat: make([]time.Duration, 0, 4096)}
	pools := make([]redsyncredis.Pool, len(servers))
	for j, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s, Protocol: 2, MaxRetries: -1, PoolSize: 2,
			DialTimeout: 2 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
		w.conns = append(w.conns, c)
		pools[j] = goredis.NewPool(c)
	}
	w.rs = redsync.New(pools...)
	return w
}

// mutex is the worker's lock on its key of generation gen.
func (w *redsyncWorker) mutex(gen int) *redsync.Mutex {
	return w.rs.NewMutex(fmt.Sprintf("%s:%d", w.prefix, gen),
		redsync.WithExpiry(8*time.Second), redsync.WithTries(1))
}

// run locks and unlocks until deadline, counting the pairs, the lock
// latencies and the errors; after an error it moves on to a fresh key.
func (w *redsyncWorker) run(ctx context.Context, deadline time.Time) {
	gen := 0
	m := w.mutex(gen)
	for time.Now().Before(deadline) {
		t0 := time.Now()
		if err := m.LockContext(ctx); err != nil {
			w.lockE++
			w.note("lock", err)
			// The key may be held by a lock that was not released:
			// move on to a fresh key.
			gen++
			m = w.mutex(gen)
			continue
		}
		w.lat = append(w.lat, time.Since(t0))
		ok, err := m.UnlockContext(ctx)
		if err != nil || !ok {
			w.unlockE++
			if err == nil {
				err = fmt.Errorf("unlock answered not released")
			}
			w.note("unlock", err)
			gen++
			m = w.mutex(gen)
			continue
		}
		w.pairs++
	}
}

// note keeps the first three errors as samples.
func (w *redsyncWorker) note(kind string, err error) {
	if len(w.errs) < 3 {
		w.errs = append(w.errs, fmt.Sprintf("%s: %v", kind, err))
	}
}

func (w *redsyncWorker) close() {
	for _, c := range w.conns {
		_ = c.Close()
	}
}
