package lockscripts

import "testing"

// The script cache forgets its oldest script beyond its size, by digest and
// by text alike; a script sent again is known by its text.
func TestScriptCacheBounded(t *testing.T) {
	c := NewCache(2, nil)
	unlock := "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
	sha, e := c.Add([]byte(unlock))
	if sha != SHA1(unlock) || e.Spec == nil || e.Src != unlock {
		t.Fatalf("add: %s %+v", sha, e)
	}
	if again, e2 := c.Add([]byte(unlock)); again != sha || e2.Spec != e.Spec {
		t.Fatalf("sent again: %s %+v", again, e2)
	}
	c.Add([]byte("return 1"))
	c.Add([]byte("return 2"))
	if _, ok := c.Get(sha); ok {
		t.Fatal("the oldest script is still known by its digest")
	}
	if len(c.texts) != 2 || len(c.bySrc) != 2 || len(c.order) != 2 {
		t.Fatalf("entries: %d by digest, %d by text, %d in order", len(c.texts), len(c.bySrc), len(c.order))
	}
	if again, e2 := c.Add([]byte(unlock)); again != sha || e2.Spec != e.Spec {
		t.Fatalf("added back: %s %+v", again, e2)
	}
	if _, ok := c.Get(SHA1("return 1")); ok {
		t.Fatal("adding back did not forget the oldest")
	}
	c.Flush()
	if len(c.texts)+len(c.bySrc)+len(c.order) != 0 {
		t.Fatal("flush left entries")
	}
}
