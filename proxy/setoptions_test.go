package proxy_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

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
