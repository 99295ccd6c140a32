package quorum

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

type masterReply string

func (e masterReply) Error() string { return string(e) }
func (masterReply) RedisError()     {}

// ErrorReply maps each error of a quorum operation to the reply a client
// sees: NOQUORUM with the reason, a master's own error reply, or a generic
// error; never a master's address.
func TestErrorReply(t *testing.T) {
	node := &engine.NodeError{Addr: "10.0.0.7:6379", Err: errors.New("i/o timeout")}
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	clock = func() time.Time { return now }
	defer func() { clock = time.Now }()
	cases := []struct {
		err  error
		want string
	}{
		{&engine.QuorumError{Reachable: 1, Needed: 2, Nodes: []error{node}},
			"NOQUORUM 1 of the masters reachable, 2 needed; lock commands are refused until enough masters are back"},
		{&engine.QuorumError{Reachable: 2, Needed: 2},
			"NOQUORUM the outcome is not known: the 2 masters that could vote do not settle it (2 needed), and the others did not answer or are under the restart guard; try again"},
		{fmt.Errorf("acquire: %w", &engine.QuorumError{Reachable: 0, Needed: 3}),
			"NOQUORUM 0 of the masters reachable, 3 needed; lock commands are refused until enough masters are back"},
		{&engine.TTLError{TTL: 1<<63 - 1, Max: time.Hour},
			"ERR redlock-proxy: a lock TTL of 106751 days exceeds redlock.max_lock_ttl (1h)"},
		{&engine.QuorumError{Reachable: 1, Needed: 2, Guarded: []engine.GuardedMaster{
			{Index: 0, Addr: "10.0.0.7:6379", Until: now.Add(41 * time.Second)},
			{Index: 2, Addr: "10.0.0.9:6379", Until: now.Add(time.Hour), Key: "lock:a\r\nx"}}},
			"NOQUORUM 1 of the masters can vote, 2 needed; 2 masters are under the restart guard: master0 for another 41s; master2 on key 'lock:a  x' for another 1h"},
		{&engine.QuorumError{Reachable: 2, Needed: 2, Guarded: []engine.GuardedMaster{{Index: 1, Until: now.Add(90 * time.Second)}}},
			"NOQUORUM the outcome is not known: the 2 masters that could vote do not settle it (2 needed); 1 master is under the restart guard: master1 for another 1m30s; try again"},
		{&engine.QuorumError{Reachable: 0, Needed: 2, Guarded: []engine.GuardedMaster{
			{Index: 2, Addr: "10.0.0.9:6379", Until: now.Add(57200 * time.Millisecond)},
			{Index: 0, Addr: "10.0.0.7:6379", Until: now.Add(58 * time.Second)},
			{Index: 1, Addr: "10.0.0.8:6379", Until: now.Add(58 * time.Second)}}},
			"NOQUORUM 0 of the masters can vote, 2 needed; 3 masters are under the restart guard: master0, master1 and master2 for another 58s"},
		{masterReply("WRONGTYPE Operation against a key holding the wrong kind of value"),
			"WRONGTYPE Operation against a key holding the wrong kind of value"},
		{node, "ERR redlock-proxy: quorum operation failed"},
		// A fenced lock on a key without a hash tag, on a cluster voter:
		// its counter sits in another slot.
		{fmt.Errorf("acquire: %w", &engine.CrossSlotError{Keys: []string{"lock:a", "redlock-proxy:fence:lock:a"}}),
			"CROSSSLOT redlock-proxy: the keys of this lock operation, with the records kept beside its lock, hash to different slots and a voter is a Redis Cluster: give the lock key a hash tag ({…})"},
	}
	for _, c := range cases {
		if got := ErrorReply(c.err); got != c.want {
			t.Errorf("ErrorReply(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
