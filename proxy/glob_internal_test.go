package proxy

import (
	"context"
	"math/rand"
	"slices"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// redisMatch matches as Redis does: random patterns and keys, over an
// alphabet of the bytes that mean something to a pattern (and bytes above
// 0x7f, which C compares as negative chars in a range), give the keys
// that a redis-server's KEYS gives (the same matcher as ACL key patterns).
func TestRedisMatchLikeRedis(t *testing.T) {
	c := redistest.Start(t).Client()
	defer c.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	const alphabet = "ab:*?[]^-\\\x80\xff"
	word := func(max int) string {
		b := make([]byte, rng.Intn(max+1))
		for i := range b {
			b[i] = alphabet[rng.Intn(len(alphabet))]
		}
		return string(b)
	}
	keys := map[string]bool{}
	for len(keys) < 400 {
		keys[word(5)] = true
	}
	for k := range keys {
		if err := c.Set(ctx, k, "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	patterns := []string{"", "*", "a*", "*a", "a?b", "[ab]", "[^a]*", "[a-b]", "[b-a]", "[\\]]", "\\*", "[", "[a", "[^", "a\\", "[\x80-a]", "[a-\xff]", "**a**"}
	for range 1500 {
		patterns = append(patterns, word(7))
	}
	p := c.Pipeline()
	cmds := make([]interface{ Result() ([]string, error) }, len(patterns))
	for i, pat := range patterns {
		cmds[i] = p.Keys(ctx, pat)
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, pat := range patterns {
		want, err := cmds[i].Result()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for k := range keys {
			// KEYS takes "*" for every key, the empty one too, as ACL
			// takes "~*" (newClientAuth: allKeys).
			if pat == "*" || redisMatch([]byte(pat), []byte(k)) {
				got = append(got, k)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("pattern %q: matches %q, Redis %q", pat, got, want)
		}
	}
	// Patterns that backtrack a lot take no time.
	long := []byte("a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b")
	key := []byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	if redisMatch(long, key) {
		t.Fatal("matched")
	}
}
