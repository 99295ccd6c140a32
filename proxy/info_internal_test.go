package proxy

import (
	"strings"
	"testing"
)

// The settings in INFO read as Redis's own composite fields: every item
// between commas is "k=v" with no other "=" or "," in it, which the INFO
// parsers of the clients (redis-py's parse_info) require of a value that
// holds both.
func TestInfoSettingsParseAsPairs(t *testing.T) {
	for _, summary := range []string{
		"masters=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 quorum=2 lock_keys=*,lock:* restart_guard=1m0s drift_factor=0.01 unknown_scripts=refuse lock_key_commands=refuse guards_off=a,b",
		"masters=a quorum=1",
		"odd text with=a=b,c",
	} {
		got := infoSettings(summary)
		for _, item := range strings.Split(got, ",") {
			k, v, ok := strings.Cut(item, "=")
			if !ok || k == "" || strings.ContainsAny(v, "=,") {
				t.Errorf("%q: item %q of %q is not k=v", summary, item, got)
			}
		}
	}
	if got := infoSettings("masters=a,b quorum=2"); got != "masters=a|b,quorum=2" {
		t.Fatalf("got %q", got)
	}
}
