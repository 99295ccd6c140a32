// Package faults is the fault-injection suite: many clients lock a few keys
// through two proxy processes in front of the same three masters while a
// schedule kills, stalls, slows and resets the masters and restarts a proxy.
// A checker records every grant on one monotonic clock and fails on any two
// overlapping holders of a key.
package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

var binary string

func TestMain(m *testing.M) { redistest.MainWithProxy(m, "../cmd/redlock-proxy", &binary) }

const (
	lockTTL     = 1000 * time.Millisecond
	driftFactor = 0.01
)

func startProxy(t *testing.T, masters []string, guard bool) *redistest.Proxy {
	return redistest.StartProxy(t, binary, func(listen string) string {
		return fmt.Sprintf(`[proxy]
listen = %q
[redlock]
masters = [%s]
node_timeout = "100ms"
retry_count = 2
retry_delay = "30ms"
restart_guard = %v
restart_guard_window = "1500ms"
[log]
level = "error"
format = "json"
`, listen, redistest.Quote(masters), guard)
	})
}

// recorder counts the clients' attempts; the locks they were told they
// hold go to its history, whose checker (history_test.go) finds overlaps.
type recorder struct {
	*history
	mu                              sync.Mutex
	attempts, noQuorum, otherErrors int
	answered, failed                map[int64]bool // 100 ms buckets with an answer (OK or nil) / with an error
}

// unavailable is the time, in 100 ms buckets, in which attempts got only
// errors (NOQUORUM, connection errors) and no answer at all.
func (r *recorder) unavailable() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for b := range r.failed {
		if !r.answered[b] {
			n++
		}
	}
	return time.Duration(n) * 100 * time.Millisecond
}

const unlockScript = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`

// client locks random keys through addr until stop, holding each lock for
// nearly all of its validity, and records what it was granted.
func client(id int, addr string, keys []string, rec *recorder, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second})
	defer c.Close()
	ctx := context.Background()
	drift := time.Duration(float64(lockTTL)*driftFactor) + 2*time.Millisecond
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key := keys[(id+i)%len(keys)]
		token := randToken()
		sent := rec.now()
		res, err := c.SetNX(ctx, key, token, lockTTL).Result()
		replied := rec.now()
		rec.mu.Lock()
		rec.attempts++
		bucket := int64(replied / (100 * time.Millisecond))
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "NOQUORUM"):
			rec.noQuorum++
			rec.failed[bucket] = true
		case err != nil:
			rec.otherErrors++
			rec.failed[bucket] = true
		default:
			rec.answered[bucket] = true
		}
		rec.mu.Unlock()
		if err != nil || !res {
			time.Sleep(15 * time.Millisecond)
			continue
		}
		// The client may rely on the lock until sent + ttl − drift.
		end := sent + lockTTL - drift
		time.Sleep(end - replied - 30*time.Millisecond)
		released := rec.now()
		if released < end {
			end = released
		}
		_ = c.Eval(ctx, unlockScript, []string{key}, token).Err()
		rec.begin(key, token, "SET NX", id, sent, replied, end)
	}
}

func randToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// mastersBehindRelays starts n masters, each behind a fault relay, and
// returns them, their relays and the relays' addresses.
func mastersBehindRelays(t *testing.T, n int) ([]*redistest.Server, []*redistest.Relay, []string) {
	masters := redistest.StartN(t, n)
	relays := make([]*redistest.Relay, n)
	addrs := make([]string, n)
	for i, m := range masters {
		relays[i] = redistest.NewRelay(t, m.Addr)
		addrs[i] = relays[i].Addr()
	}
	return masters, relays, addrs
}

// run starts the masters behind fault relays, two proxies and the clients,
// plays the schedule for d, and returns what the checker saw.
func run(t *testing.T, guard bool, d time.Duration, stopAtViolation bool) (*recorder, []string) {
	masters, relays, addrs := mastersBehindRelays(t, 3)
	proxies := []*redistest.Proxy{startProxy(t, addrs, guard), startProxy(t, addrs, guard)}
	keys := []string{"fault:a", "fault:b", "fault:c", "fault:d", "fault:e", "fault:f"}
	rec := &recorder{history: newHistory(), answered: map[int64]bool{}, failed: map[int64]bool{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go client(i, proxies[i%2].Addr, keys, rec, stop, &wg)
	}
	// One cycle: two masters restart empty 250 ms apart (a lock they both
	// held is then on one master only), then, once the guard window has
	// passed, a stall, added latency, reset connections and a proxy restart.
	cycle := func(c int) {
		masters[c%3].Restart()
		time.Sleep(250 * time.Millisecond)
		masters[(c+1)%3].Restart()
		time.Sleep(1800 * time.Millisecond)
		s := masters[(c+2)%3]
		s.Stop()
		time.Sleep(400 * time.Millisecond)
		s.Cont()
		time.Sleep(200 * time.Millisecond)
		relays[c%3].Delay.Store(int64(150 * time.Millisecond))
		time.Sleep(300 * time.Millisecond)
		relays[c%3].Delay.Store(0)
		relays[(c+1)%3].Reset()
		time.Sleep(300 * time.Millisecond)
		proxies[c%2].Restart()
		time.Sleep(300 * time.Millisecond)
	}
	deadline := time.Now().Add(d)
	for c := 0; time.Now().Before(deadline); c++ {
		cycle(c)
		if stopAtViolation && len(rec.violations()) > 0 {
			break
		}
	}
	close(stop)
	wg.Wait()
	total := rec.now()
	v := rec.violations()
	t.Logf("restart_guard=%v: %s, %d attempts, %d grants, %d NOQUORUM, %d other errors, %d violations, %s unavailable (only errors)",
		guard, total.Round(time.Millisecond), rec.attempts, rec.held(), rec.noQuorum, rec.otherErrors, len(v), rec.unavailable())
	return rec, v
}

func TestFaultScheduleKeepsMutualExclusion(t *testing.T) {
	if testing.Short() {
		t.Skip("fault schedule skipped in -short mode")
	}
	rec, v := run(t, true, 16*time.Second, false)
	for _, s := range v {
		t.Error("violation: " + s)
	}
	if n := rec.held(); n < 10 {
		t.Fatalf("only %d grants: the run proves nothing", n)
	}
}

// The negative control: the same schedule with the restart guard off must
// make the checker report a violation, or the suite could not catch one.
func TestFaultScheduleWithoutGuardViolates(t *testing.T) {
	if testing.Short() {
		t.Skip("fault schedule skipped in -short mode")
	}
	_, v := run(t, false, 16*time.Second, true)
	if len(v) == 0 {
		t.Fatal("no violation without the restart guard: the checker or the schedule cannot catch the unsafe case")
	}
	t.Logf("first violation: %s", v[0])
}
