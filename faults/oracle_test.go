package faults

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// The oracle: one plain redis-server that stands for what the proxy
// promises to be, one Redis whose administrative commands are refused.
// Before the adversary sends a command to a proxy, the oracle runs it on
// the honest clients' keys held as locks (a token and a TTL; a Redisson
// hash), and reports every honest key it deleted, gave another value, or
// left with less time to live. On one Redis such a command ends the lock
// (a DEL, a SET without NX, a compare-and-delete with the right token): the
// checker then ends, at the command's send, the holdings it may have
// ended. A command the oracle finds harmless (a SET NX of a held key, a
// release with another token, FLUSHALL, a write to the proxy's own
// records) ends nothing, so that any two holders it makes are the proxy's.
//
// The oracle refuses what the proxy refuses on a voting backend by design
// (FLUSHALL, FLUSHDB, SWAPDB, MOVE, MIGRATE, DEBUG, SHUTDOWN, REPLICAOF
// and CONFIG are renamed away), so a script that calls one of them ends
// nothing on it either. Its verdict holds for whatever state the honest
// keys are in, as long as a command's effect on an honest key depends only
// on that key, the honest keys and its own arguments: the commands whose
// effect on an honest key depends on another key's state (RENAME, COPY)
// end it whatever the oracle says, and the oracle tries several states of
// the honest keys (all held, half of them, a short TTL, hashes).
type oracle struct {
	srv      *redistest.Server
	rc       *rawConn
	keys     []string          // the honest keys
	sentinel map[string]string // a token that is no client's, per key
	failed   int               // tries the oracle did not answer in time
}

// oracleFlush is the oracle's own FLUSHALL.
const oracleFlush = "oracle-flushall"

func newOracle(t *testing.T, keys []string) *oracle {
	var args []string
	for _, c := range []string{"FLUSHDB", "SWAPDB", "MOVE", "MIGRATE", "DEBUG", "SHUTDOWN", "REPLICAOF", "SLAVEOF", "CONFIG"} {
		args = append(args, "--rename-command", c, "")
	}
	args = append(args, "--rename-command", "FLUSHALL", oracleFlush)
	o := &oracle{srv: redistest.Start(t, args...), keys: keys, sentinel: map[string]string{}}
	for i, k := range keys {
		o.sentinel[k] = fmt.Sprintf("%024x", 0x5e471ae1+i) // hex, as an honest token
	}
	return o
}

// oracleState is a state of the honest keys the oracle tries a command
// on: which keys are held, as strings or Redisson hashes, with what TTL.
type oracleState struct {
	hash    bool
	ttl     int64 // ms
	learned bool  // the tokens the adversary read, where it read one
	held    func(i int) bool
}

var oracleStates = []oracleState{
	{ttl: 10000, learned: true, held: func(int) bool { return true }},
	{ttl: 300, held: func(int) bool { return true }},
	{hash: true, ttl: 10000, learned: true, held: func(int) bool { return true }},
	{ttl: 10000, learned: true, held: func(i int) bool { return i%2 == 0 }},
	{ttl: 10000, learned: true, held: func(i int) bool { return i%2 == 1 }},
}

// Commands the oracle does not run: they change only the connection, the
// server or its replication, answer for the proxy alone (LOCK.*), or would
// make the oracle forget a script or function that the backend may still
// run.
var notOnOracle = map[string]bool{
	"client": true, "hello": true, "auth": true, "quit": true, "select": true, "subscribe": true,
	"psubscribe": true, "ssubscribe": true, "unsubscribe": true, "punsubscribe": true, "sunsubscribe": true,
	"monitor": true, "sync": true, "psync": true, "shutdown": true, "debug": true, "config": true,
	"replicaof": true, "slaveof": true, "failover": true, "cluster": true, "readonly": true, "readwrite": true,
	"asking": true, "acl": true, "module": true, "wait": true, "waitaof": true, "save": true, "bgsave": true,
	"bgrewriteaof": true, "latency": true, "lock.acquire": true, "lock.release": true, "lock.extend": true,
	"lock.info": true, "reset": true,
}

func onOracle(cmd []string) bool {
	name := strings.ToLower(cmd[0])
	if notOnOracle[name] {
		return false
	}
	if len(cmd) > 1 && (name == "function" || name == "script") {
		switch strings.ToLower(cmd[1]) {
		case "flush", "delete", "restore", "kill":
			return false
		}
	}
	return true
}

// scripted reports whether a command runs code that may name any key.
func scripted(cmd []string) bool {
	switch strings.ToLower(cmd[0]) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

// destroys lists the honest keys that cmds, sent in order on one
// connection, may end a lock of on one Redis. learned and holders are
// the tokens and Redisson holders the adversary read through a proxy.
func (o *oracle) destroys(cmds [][]string, learned, holders map[string]string) []string {
	hit := map[string]bool{}
	named := map[string]bool{}
	script := false
	for _, c := range cmds {
		if scripted(c) {
			script = true
		}
		for _, a := range c[1:] {
			if slices.Contains(o.keys, a) {
				named[a] = true
			}
		}
		o.static(c, learned, hit)
	}
	if len(named) == 0 && !script {
		return nil
	}
	var run [][]string
	for _, c := range cmds {
		if onOracle(c) {
			run = append(run, c)
		}
	}
	for _, st := range oracleStates {
		for _, k := range o.try(st, run, learned, holders, named, script) {
			hit[k] = true
		}
	}
	out := make([]string, 0, len(hit))
	for _, k := range o.keys {
		if hit[k] {
			out = append(out, k)
		}
	}
	return out
}

// static marks the honest keys a command ends whatever the oracle says:
// RENAME, RENAMENX and COPY (their effect depends on another key); and
// the proxy's LOCK.* commands, which the oracle does not know: a release
// or an extend with a token the adversary read, or a reentry with one.
func (o *oracle) static(c []string, learned map[string]string, hit map[string]bool) {
	name := strings.ToLower(c[0])
	switch name {
	case "rename", "renamenx", "copy":
		for _, a := range c[1:] {
			if slices.Contains(o.keys, a) {
				hit[a] = true
			}
		}
	case "lock.release", "lock.extend", "lock.acquire":
		if len(c) < 2 || !slices.Contains(o.keys, c[1]) {
			return
		}
		for _, a := range c[2:] {
			for _, tok := range learned {
				if a == tok {
					hit[c[1]] = true
				}
			}
		}
	}
}

// try runs cmds on the oracle with the honest keys in state st, and lists
// those it ended. An oracle that does not answer in time counts as ending
// every key cmds name (all of them, for a script).
func (o *oracle) try(st oracleState, cmds [][]string, learned, holders map[string]string, named map[string]bool, script bool) []string {
	type was struct {
		key, value string
	}
	var held []was
	setup := [][]string{{"reset"}, {oracleFlush}}
	for i, k := range o.keys {
		if !st.held(i) {
			continue
		}
		v := o.sentinel[k]
		if st.hash {
			v += ":1"
			if h := holders[k]; st.learned && h != "" {
				v = h
			}
			setup = append(setup, []string{"hset", k, v, "2"})
		} else {
			if t := learned[k]; st.learned && t != "" {
				v = t
			}
			setup = append(setup, []string{"set", k, v})
		}
		setup = append(setup, []string{"pexpire", k, strconv.FormatInt(st.ttl, 10)})
		held = append(held, was{k, v})
	}
	all := func() []string {
		o.failed++
		var out []string
		for _, h := range held {
			if named[h.key] || script {
				out = append(out, h.key)
			}
		}
		return out
	}
	if o.rc == nil {
		rc, err := dialRaw(o.srv.Addr, time.Second)
		if err != nil {
			return all()
		}
		o.rc = rc
	}
	if _, err := o.rc.do(setup, time.Second); err != nil {
		o.rc.Close()
		o.rc = nil
		return all()
	}
	set := time.Now()
	if len(cmds) > 0 {
		if _, err := o.rc.do(cmds, 2*time.Second); err != nil {
			o.rc.Close() // blocked, or the command closed it
			o.rc = nil
			return all()
		}
	}
	var check [][]string
	for _, h := range held {
		check = append(check, []string{"type", h.key}, []string{"pttl", h.key})
		if st.hash {
			check = append(check, []string{"hget", h.key, h.value})
		} else {
			check = append(check, []string{"get", h.key})
		}
	}
	rs, err := o.rc.do(append([][]string{{"reset"}}, check...), time.Second)
	if err != nil || len(rs) != len(check)+1 {
		if o.rc != nil {
			o.rc.Close()
			o.rc = nil
		}
		return all()
	}
	rs = rs[1:]
	// What the TTL may have lost while the commands ran, with a margin.
	slack := time.Since(set).Milliseconds() + 50
	var out []string
	for i, h := range held {
		typ, pttl, val := rs[3*i], rs[3*i+1], rs[3*i+2]
		left, _ := pttl.int()
		want := "string"
		if st.hash {
			want = "hash"
		}
		ended := typ.str != want || left == -2 || left >= 0 && left < st.ttl-slack
		if st.hash {
			n, _ := strconv.Atoi(val.str)
			ended = ended || val.null || n < 2
		} else {
			ended = ended || val.null || val.str != h.value
		}
		if ended {
			out = append(out, h.key)
		}
	}
	return out
}

// TestOracle checks the oracle's verdicts on what it exists for: what ends
// a lock on one Redis, and what does not.
func TestOracle(t *testing.T) {
	keys := []string{"lock:a", "lock:b"}
	o := newOracle(t, keys)
	tok := "0123456789abcdef01234567"
	learned := map[string]string{"lock:a": tok}
	hidden := "-- x\rdo return 0 end\n" + unlockScript
	for _, c := range []struct {
		cmds [][]string
		want []string
	}{
		{[][]string{{"GET", "lock:a"}}, nil},
		{[][]string{{"DEL", "lock:a"}}, []string{"lock:a"}},
		{[][]string{{"SET", "lock:a", "x", "NX", "PX", "100"}}, nil},
		{[][]string{{"SET", "lock:b", "x", "XX", "KEEPTTL"}}, []string{"lock:b"}},
		{[][]string{{"PEXPIRE", "lock:a", "60000"}}, nil},
		{[][]string{{"PEXPIRE", "lock:a", "100"}}, []string{"lock:a"}},
		{[][]string{{"PEXPIRE", "lock:a", "9223372036854775807"}}, nil},
		{[][]string{{"PERSIST", "lock:a"}}, nil},
		{[][]string{{"MSETNX", "lock:a", "x", "adv:1", "y"}}, nil},
		{[][]string{{"EVAL", unlockScript, "1", "lock:a", "adv-1"}}, nil},
		{[][]string{{"EVAL", unlockScript, "1", "lock:a", tok}}, []string{"lock:a"}},
		{[][]string{{"EVAL", hidden, "1", "lock:a", tok}}, nil},
		{[][]string{{"EVAL", redistest.BsmObtain, "1", "lock:a", "adv-1", "0", "1000"}}, nil},
		{[][]string{{"EVAL", "return redis.call('del', ARGV[1])", "0", "lock:b"}}, []string{"lock:b"}},
		{[][]string{{"EVAL", "return redis.call('flushall')", "0"}}, nil},
		{[][]string{{"FLUSHALL"}}, nil},
		{[][]string{{"HSET", "redlock-proxy:dataset", "born", "x"}}, nil},
		{[][]string{{"RENAME", "adv:1", "lock:a"}}, []string{"lock:a"}},
		{[][]string{{"RENAMENX", "lock:a", "lock:b"}}, []string{"lock:a", "lock:b"}},
		{[][]string{{"SUNIONSTORE", "lock:b", "adv:1"}}, []string{"lock:b"}},
		{[][]string{{"LOCK.RELEASE", "lock:a", tok}}, []string{"lock:a"}},
		{[][]string{{"LOCK.RELEASE", "lock:a", "adv-1"}}, nil},
		{[][]string{{"MULTI"}, {"DEL", "lock:b"}, {"EXEC"}}, []string{"lock:b"}},
		{[][]string{{"SET", "lock:a", strings.Repeat("x", 4<<20), "NX", "PX", "1000"}}, nil},
	} {
		if got := o.destroys(c.cmds, learned, nil); !slices.Equal(got, c.want) {
			t.Errorf("%s: the oracle says it ends %v, want %v", describe(c.cmds), got, c.want)
		}
	}
}
