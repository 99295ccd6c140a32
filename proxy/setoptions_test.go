package proxy_test

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// setOptionTokens are the options of SET and GETEX, valid and not, that
// the differential tests draw from: repeated expiries, expiries of two
// kinds, values read only when last, absolute times past and to come,
// options cut by a NUL as C reads them.
func setOptionTokens(now time.Time) [][]string {
	s := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	ms := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMilli(), 10) }
	return [][]string{
		{"NX"}, {"XX"}, {"GET"}, {"KEEPTTL"}, {"PERSIST"}, {"nx"}, {"NX\x00junk"}, {"get\x00"},
		{"EX", "100"}, {"EX", "200"}, {"ex", "100"}, {"PX", "100000"}, {"PX", "200000"}, {"Px\x00x", "200000"},
		{"EXAT", s(100 * time.Second)}, {"EXAT", s(200 * time.Second)}, {"EXAT", "1"},
		{"PXAT", ms(100 * time.Second)}, {"PXAT", ms(200 * time.Second)}, {"PXAT", "1000"},
		{"PX", "abc"}, {"PX", "0"}, {"EX", "-5"}, {"PX"}, {"EX"}, {"BOGUS"},
	}
}

// ttlClass buckets a PTTL reply for comparison: absent, no expiry, up to
// 150 s, more.
func ttlClass(v any, err error) string {
	p, ok := v.(int64)
	switch {
	case err != nil || !ok:
		return fmt.Sprintf("error %v", err)
	case p < 0:
		return strconv.FormatInt(p, 10)
	case p <= 150000:
		return "≤150s"
	}
	return ">150s"
}

// setState is a key's state as a client sees it: its value and TTL class.
func setState(ctx context.Context, c *redis.Client, key string) string {
	v, err := c.Get(ctx, key).Result()
	if err == redis.Nil {
		v = "(nil)"
	} else if err != nil {
		v = "error " + err.Error()
	}
	p, err := c.Do(ctx, "PTTL", key).Result()
	return v + " " + ttlClass(p, err)
}

// SET and GETEX of a lock key through the proxy answer what a plain
// redis-server answers, and leave the key as it leaves it: random option
// sequences (repeated expiries, where Redis takes the last; expiries of two
// kinds, which it refuses; absolute times already past; NUL-cut options)
// on an absent key and on one that holds a value.
func TestSetOptionsLikeRedis(t *testing.T) {
	e := newEnv(t, 3, nil)
	plain := redistest.Start(t).Client()
	defer plain.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	tokens := setOptionTokens(time.Now())
	for i := range 300 {
		for _, cmd := range []string{"SET", "GETEX"} {
			key := fmt.Sprintf("%s:%s:%d", e.key(""), cmd, i)
			args := []any{cmd, key}
			if cmd == "SET" {
				args = append(args, "v")
			}
			for range rng.Intn(5) {
				for _, a := range tokens[rng.Intn(len(tokens))] {
					args = append(args, a)
				}
			}
			exists := rng.Intn(2) == 0
			if exists {
				e.seed(key, "old", 0, 0, 1, 2)
				if err := plain.Set(ctx, key, "old", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			want, werr := plain.Do(ctx, args...).Result()
			got, gerr := e.do(args...)
			if fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) {
				t.Errorf("%q (key exists: %v): proxy %v %v, Redis %v %v", args, exists, got, gerr, want, werr)
				continue
			}
			if g, w := setState(ctx, e.c, key), setState(ctx, plain, key); g != w {
				t.Errorf("%q (key exists: %v): then %s through the proxy, %s on Redis", args, exists, g, w)
			}
		}
	}
}

// SET … NX with an absolute expiry already past answers as Redis does —
// OK when the key is absent (nil with GET), nil when it exists (its value
// with GET) — and writes nothing on any master: the lock would have
// expired at once. Where the masters that answer cannot tell whether the
// key is absent, it answers NOQUORUM.
func TestSetNXPastExpiry(t *testing.T) {
	e := newEnv(t, 3, nil)
	past := strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	key := e.key("k")
	for _, tc := range []struct {
		args []any
		want any
	}{
		{[]any{"SET", key, "v", "NX", "PXAT", past}, "OK"},
		{[]any{"SET", key, "v", "NX", "GET", "PXAT", past}, nil},
		{[]any{"SET", key, "v", "EXAT", "1", "NX"}, "OK"},
	} {
		v, err := e.do(tc.args...)
		if err == redis.Nil {
			v, err = nil, nil
		}
		if err != nil || v != tc.want {
			t.Fatalf("%v on an absent key: %v %v, want %v", tc.args, v, err, tc.want)
		}
	}
	for i, m := range e.masters {
		if n := userKeys(t, m); n != 0 {
			t.Fatalf("master %d holds %d keys", i, n)
		}
	}
	e.seed(key, "old", time.Minute, 0, 1, 2)
	if _, err := e.do("SET", key, "v", "NX", "PXAT", past); err != redis.Nil {
		t.Fatalf("on a held key: %v, want nil", err)
	}
	if v, err := e.do("SET", key, "v", "NX", "GET", "PXAT", past); v != "old" || err != nil {
		t.Fatalf("NX GET on a held key: %v %v", v, err)
	}
	mustEqual(t, "copies of the held value", count(e.onMasters(key), "old"), 3)

	// One master holds a value, one does not, the third is down: the
	// value may be held by a quorum, or not.
	other := e.key("split")
	e.seed(other, "x", time.Minute, 0)
	e.masters[2].Kill()
	_, err := e.do("SET", other, "v", "NX", "PXAT", past)
	if err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM") {
		t.Fatalf("with the answer unknown: %v, want NOQUORUM", err)
	}
	if vals := e.onMasters(other); vals[0] != "x" || vals[1] != "" {
		t.Fatalf("masters after it: %q", vals)
	}
}
