package proxy

import (
	"strings"
	"testing"
)

// A permit operation declared wrongly in [[scripts]] fails the
// configuration's checks, naming the entry (lockscripts'
// TestPermitScriptDeclarations covers each error).
func TestPermitScriptDeclarationInConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Redlock.Masters = []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	cfg.Scripts = []ScriptConfig{{File: "a.lua", Source: "return 1", Op: "permit_acquire", TokenArg: 2, TTLArg: 3}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "scripts[0] (a.lua): limit_arg") {
		t.Fatalf("config with a permit_acquire without limit_arg: %v", err)
	}
}
