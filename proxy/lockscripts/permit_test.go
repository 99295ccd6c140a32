package lockscripts

import (
	"strings"
	"testing"
)

// [[scripts]] declarations of permit operations: acquire and refresh need
// the number of permits (their quorum depends on it) and the TTL; none
// takes several keys; limit_arg belongs to them alone.
func TestPermitScriptDeclarations(t *testing.T) {
	ok := Config{File: "a.lua", Source: "return 1", Op: "permit_acquire", TokenArg: 2, TTLArg: 3, LimitArg: 1}
	sp, err := ok.Spec(ok.File)
	if err != nil || sp.Op != OpPermitAcquire || sp.LimitArg != 0 || sp.TokenArg != 1 || sp.TTLArg != 2 {
		t.Fatalf("a valid permit_acquire: %+v %v", sp, err)
	}
	if sp, err := (Config{File: "r.lua", Source: "return 1", Op: "permit_release", TokenArg: 1}).Spec("r.lua"); err != nil || sp.Op != OpPermitRelease {
		t.Fatalf("a valid permit_release: %+v %v", sp, err)
	}
	for _, c := range []struct {
		mutate func(*Config)
		err    string
	}{
		{func(c *Config) { c.LimitArg = 0 }, "limit_arg must be an ARGV index from 1 for op \"permit_acquire\""},
		{func(c *Config) { c.Op = "permit_refresh"; c.LimitArg = 0 }, "limit_arg must be an ARGV index from 1 for op \"permit_refresh\""},
		{func(c *Config) { c.TTLArg = 0 }, "ttl_arg must be an ARGV index from 1 for op \"permit_acquire\""},
		{func(c *Config) { c.Multi = true }, "takes one key"},
		{func(c *Config) { c.Op = "permit_release" }, "limit_arg is for op"},
		{func(c *Config) { c.Op = "release" }, "limit_arg is for op"},
		{func(c *Config) { c.TokenArg = 0 }, "token_arg must be"},
		{func(c *Config) { c.Op = "permit_acquired" }, "is not one of"},
	} {
		bad := ok
		c.mutate(&bad)
		if _, err := bad.Spec(bad.File); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v, want an error with %q", bad, err, c.err)
		}
	}
	// Among the entries of a configuration, naming the entry.
	bad := ok
	bad.LimitArg = 0
	if _, err := Specs([]Config{bad}); err == nil || !strings.Contains(err.Error(), "scripts[0] (a.lua): limit_arg") {
		t.Fatalf("a permit_acquire without limit_arg among the entries: %v", err)
	}
}
