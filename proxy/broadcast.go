package proxy

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Commands sent as they are to every master, and the answer a quorum of
// them gave: SET without NX, SETEX, GETDEL, GETEX, DEL and the EXPIRE
// family of lock keys (quorumcmds.go), and a few writes of scripts and
// mixed mode. Acquires, releases, extends and reads have the engine's own
// operations.

func toAny(args [][]byte) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out
}

func isLarge(v any) bool { _, ok := v.(engine.LargeValue); return ok }

// answerKey groups equal answers of different masters.
func answerKey(r engine.Result) (string, bool) {
	var re redis.Error
	switch {
	case r.Err == redis.Nil:
		return "nil", true
	case errors.As(r.Err, &re):
		return "err:" + re.Error(), true
	case r.Err != nil:
		return "", false // not an answer: the master failed
	}
	return fmt.Sprintf("%T:%v", r.Val, r.Val), true
}

// broadcastMajority sends a write to every master and answers what a quorum
// of them answered. Writes of lock keys wait for every master (each within
// the node timeout), so that a read that follows sees the write everywhere
// it landed, as on a single Redis. Only answers that may count as votes
// (engine.Result.Counts) are counted; with too few of them the answer is
// NOQUORUM. A write of a TTL on a lock key passes w (engine.NoteTTL), and
// applied, which says from a master's answer whether it took effect there.
// With valued (GETDEL, GETEX, SET … GET: the reply is the key's value), a
// master where the value is longer than proxy.max_lock_value changes
// nothing (engine.BroadcastValue), and a quorum of them answers the error
// that says so.
func (s *Server) broadcastMajority(st *client, c redcon.Conn, args []any, w *engine.TTLWrite, applied func(engine.Result) bool, valued bool) {
	if r, ok := s.majority(st, c, args, w, applied, valued); ok {
		s.writeResult(c, r)
	}
}

// majority is broadcastMajority's write and count: it returns the answer a
// quorum of masters gave, or writes the error (NOQUORUM, or TRYAGAIN when
// no answer holds a quorum) and reports false.
func (s *Server) majority(st *client, c redcon.Conn, args []any, w *engine.TTLWrite, applied func(engine.Result) bool, valued bool) (engine.Result, bool) {
	ctx, cancel := s.opContext()
	defer cancel()
	q := s.eng(st).Quorum()
	key := fmt.Sprint(args[1])
	s.eng(st).WaitWrites(ctx, key)
	var got []engine.Result
	if valued {
		got = s.eng(st).BroadcastValue(ctx, key, nil, args...)
	} else {
		got = s.eng(st).Broadcast(ctx, key, nil, args...)
	}
	w.Done(got, applied)
	counts := map[string]int{}
	answered := 0
	for _, r := range got {
		k, ok := answerKey(r)
		if !ok || !r.Counts {
			continue
		}
		answered++
		if counts[k]++; counts[k] >= q {
			return r, true
		}
	}
	if answered < q {
		quorum.WriteErr(c, s.eng(st).NoQuorum(answered, key))
		return engine.Result{}, false
	}
	c.WriteError("TRYAGAIN redlock-proxy: the masters disagree and no answer holds a quorum")
	return engine.Result{}, false
}

func (s *Server) writeResult(c redcon.Conn, r engine.Result) {
	var re redis.Error
	switch {
	case r.Err == redis.Nil:
		c.WriteNull()
	case r.Err == nil && isLarge(r.Val):
		c.WriteError(quorum.TooLargeReply(r.Val.(engine.LargeValue).Len, int(s.cfg.Proxy.MaxLockValue)))
	case errors.As(r.Err, &re):
		c.WriteError(re.Error())
	default:
		switch v := r.Val.(type) {
		case string:
			if v == "OK" {
				c.WriteString(v)
			} else {
				c.WriteBulkString(v)
			}
		case int64:
			c.WriteInt64(v)
		default:
			c.WriteAny(v)
		}
	}
}

// broadcastCount sends a command answering 0 or 1 to every master and
// reports whether a quorum answered 1. It answers false only when a quorum
// of 1s is out of reach even if every master that did not answer, or whose
// answer does not count (engine.Result.Counts), had answered 1; otherwise
// the error is a master's own error reply, or NOQUORUM. A write of a TTL
// on a lock key passes w (engine.NoteTTL): it took effect where a master
// answered 1.
func (s *Server) broadcastCount(st *client, w *engine.TTLWrite, args ...[]byte) (bool, error) {
	ok, _, err := s.broadcastOnes(st, w, args...)
	return ok, err
}

// broadcastOnes is broadcastCount, and also counts the masters whose
// answer (one that counts) was 1: those that held the key. Where the
// backend holds data beside the locks, a NOQUORUM with ones > 0 says that
// the key is a lock on masters that answered, which the command could not
// end on a quorum; with ones = 0 no master that answered held it.
func (s *Server) broadcastOnes(st *client, w *engine.TTLWrite, args ...[]byte) (bool, int, error) {
	ctx, cancel := s.opContext()
	defer cancel()
	q, n := s.eng(st).Quorum(), s.eng(st).Masters()
	key := string(args[1])
	s.eng(st).WaitWrites(ctx, key)
	ones, zeros := 0, 0
	var errReply error
	got := s.eng(st).Broadcast(ctx, key, func(got []engine.Result) bool {
		r := got[len(got)-1]
		var re redis.Error
		switch {
		case r.Err == nil && r.Counts:
			if v, _ := r.Val.(int64); v == 1 {
				ones++
			} else {
				zeros++
			}
		case errors.As(r.Err, &re):
			errReply = r.Err
		}
		return false // wait for every master, as broadcastMajority does
	}, toAny(args)...)
	w.Done(got, func(r engine.Result) bool { v, _ := r.Val.(int64); return r.Err == nil && v == 1 })
	switch {
	case ones >= q:
		return true, ones, nil
	case errReply != nil:
		return false, ones, errReply
	case n-zeros < q: // even with every other master answering 1
		return false, ones, nil
	}
	return false, ones, s.eng(st).NoQuorum(ones+zeros, key)
}
