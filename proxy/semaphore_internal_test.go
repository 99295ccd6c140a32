package proxy

import (
	"strings"
	"testing"
)

// [[scripts]] declarations of permit operations: acquire and refresh need
// the number of permits (their quorum depends on it) and the TTL; none
// takes several keys; limit_arg belongs to them alone.
func TestPermitScriptDeclarations(t *testing.T) {
	ok := ScriptConfig{File: "a.lua", Source: "return 1", Op: "permit_acquire", TokenArg: 2, TTLArg: 3, LimitArg: 1}
	sp, err := ok.spec()
	if err != nil || sp.kind != opPermitAcquire || sp.limitArg != 0 || sp.tokenArg != 1 || sp.ttlArg != 2 {
		t.Fatalf("a valid permit_acquire: %+v %v", sp, err)
	}
	if sp, err := (ScriptConfig{File: "r.lua", Source: "return 1", Op: "permit_release", TokenArg: 1}).spec(); err != nil || sp.kind != opPermitRelease {
		t.Fatalf("a valid permit_release: %+v %v", sp, err)
	}
	for _, c := range []struct {
		mutate func(*ScriptConfig)
		err    string
	}{
		{func(c *ScriptConfig) { c.LimitArg = 0 }, "limit_arg must be an ARGV index from 1 for op \"permit_acquire\""},
		{func(c *ScriptConfig) { c.Op = "permit_refresh"; c.LimitArg = 0 }, "limit_arg must be an ARGV index from 1 for op \"permit_refresh\""},
		{func(c *ScriptConfig) { c.TTLArg = 0 }, "ttl_arg must be an ARGV index from 1 for op \"permit_acquire\""},
		{func(c *ScriptConfig) { c.Multi = true }, "takes one key"},
		{func(c *ScriptConfig) { c.Op = "permit_release" }, "limit_arg is for op"},
		{func(c *ScriptConfig) { c.Op = "release" }, "limit_arg is for op"},
		{func(c *ScriptConfig) { c.TokenArg = 0 }, "token_arg must be"},
		{func(c *ScriptConfig) { c.Op = "permit_acquired" }, "is not one of"},
	} {
		bad := ok
		c.mutate(&bad)
		if _, err := bad.spec(); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v, want an error with %q", bad, err, c.err)
		}
	}
	// Through the configuration's checks, naming the entry.
	cfg := DefaultConfig()
	cfg.Redlock.Masters = []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	bad := ok
	bad.LimitArg = 0
	cfg.Scripts = []ScriptConfig{bad}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "scripts[0] (a.lua): limit_arg") {
		t.Fatalf("config with a permit_acquire without limit_arg: %v", err)
	}
}
