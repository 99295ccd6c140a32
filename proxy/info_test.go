package proxy_test

import (
	"regexp"
	"testing"
)

// INFO takes sections as Redis 7 does: none for the default ones, any
// number of names in any case (INFO server memory), and an unknown name
// alone answers nothing. The sections the proxy has no fields of its own
// for (Persistence, Stats, Replication, Keyspace…) are the backend's.
func TestInfoSections(t *testing.T) {
	e := newEnv(t, 3, nil)
	heads := regexp.MustCompile(`(?m)^# (\w+)\r$`)
	sections := func(args ...any) []string {
		t.Helper()
		var names []string
		for _, m := range heads.FindAllStringSubmatch(must(e.do(append([]any{"INFO"}, args...)...)).(string), -1) {
			names = append(names, m[1])
		}
		return names
	}
	backend := []string{"Persistence", "Stats", "Replication", "CPU", "Modules", "Errorstats", "Cluster", "Keyspace"}
	all := append(append([]string{"Server", "Memory", "Clients"}, backend...), "Redlock")
	// "all" in Redis 7.0's order, the backend's.
	every := []string{"Server", "Memory", "Clients", "Persistence", "Stats", "Replication", "CPU", "Modules", "Commandstats",
		"Errorstats", "Latencystats", "Cluster", "Keyspace", "Redlock"}
	for _, tc := range []struct {
		args []any
		want []string
	}{
		{nil, all},
		{[]any{"default"}, all},
		{[]any{"all"}, every},
		{[]any{"everything"}, every},
		{[]any{"keyspace"}, []string{"Keyspace"}},
		{[]any{"replication", "server"}, []string{"Server", "Replication"}},
		{[]any{"server"}, []string{"Server"}},
		{[]any{"SERVER"}, []string{"Server"}},
		{[]any{"server", "memory"}, []string{"Server", "Memory"}},
		{[]any{"clients", "nosuch", "Redlock"}, []string{"Clients", "Redlock"}},
		{[]any{"server", "all"}, every},
		{[]any{"nosuch"}, nil},
	} {
		got := sections(tc.args...)
		if len(got) != len(tc.want) {
			t.Fatalf("INFO %v: sections %v, want %v", tc.args, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("INFO %v: sections %v, want %v", tc.args, got, tc.want)
			}
		}
	}
}
