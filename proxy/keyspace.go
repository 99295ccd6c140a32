package proxy

import (
	"errors"
	"slices"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// DBSIZE, KEYS and SCAN count and list the keys one Redis holding the
// application's data and its locks would hold:
//
//   - with a backend of its own, the backend's keys and the locks a quorum
//     of masters holds that the backend has no key for (a LOCK.ACQUIRE
//     lock, any lock when locks have a prefix of their own, a lock whose
//     mirror was lost): SCAN adds them to the page that ends the scan (a
//     page may hold more keys than COUNT, as SCAN allows), KEYS to its
//     reply, DBSIZE to its count;
//   - on a voting backend, the backend master's keys without the proxy's
//     records (cmdKeyspace), and DBSIZE without them either.
//
// The locks are found with KEYS on every master (the masters hold locks
// and the proxy's records only), and each is read from the quorum as GET
// reads it.

// cmdDBSize serves DBSIZE.
func cmdDBSize(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if len(args) != 1 || !s.bnd.voting && st.sub != nil && st.sub.resp3 {
		return toBackend
	}
	v, err := s.backendValue(st, args)
	if err != nil {
		backendAnswer(c, nil, err)
		return replied
	}
	n, _ := v.(int64)
	switch {
	case s.bnd.voting && s.bnd.reserved:
		r, err := s.backendReserved(st)
		if err != nil {
			backendAnswer(c, nil, err)
			return replied
		}
		n -= r
	case !s.bnd.voting:
		n += int64(len(s.quorumOnlyLocks(st, "*", "")))
	}
	c.WriteInt64(n)
	return replied
}

// backendReserved counts the proxy's records on the backend.
func (s *Server) backendReserved(st *client) (int64, error) {
	n, cursor := int64(0), "0"
	for {
		v, err := s.backendValue(st, [][]byte{[]byte("SCAN"), []byte(cursor), []byte("MATCH"), append(reservedPrefix[:len(reservedPrefix):len(reservedPrefix)], '*'), []byte("COUNT"), []byte("1000")})
		if err != nil {
			return 0, err
		}
		a, _ := v.([]any)
		if len(a) != 2 {
			return 0, errors.New("unexpected SCAN reply")
		}
		keys, _ := a[1].([]any)
		n += int64(len(keys))
		if cursor, _ = a[0].(string); cursor == "0" || cursor == "" {
			return n, nil
		}
	}
}

// ownKeyspace serves SCAN and KEYS with a backend of its own: the
// backend's reply, and the locks it has no key for.
func (s *Server) ownKeyspace(c redcon.Conn, st *client, args [][]byte) route {
	name := strings.ToLower(string(args[0]))
	if st.sub != nil && st.sub.resp3 {
		return toBackend
	}
	v, err := s.backendValue(st, args)
	var er wire.ErrorReply
	switch {
	case errors.As(err, &er):
		c.WriteError(string(er))
		return replied
	case err != nil:
		c.WriteError("ERR redlock-proxy: passthrough backend failed")
		return replied
	}
	if name == "keys" {
		keys, _ := v.([]any)
		more := s.quorumOnlyLocks(st, string(args[1]), "")
		c.WriteArray(len(keys) + len(more))
		for _, k := range keys {
			c.WriteAny(k)
		}
		for _, k := range more {
			c.WriteBulkString(k)
		}
		return replied
	}
	a, _ := v.([]any)
	if len(a) != 2 {
		c.WriteAny(v)
		return replied
	}
	keys, _ := a[1].([]any)
	var more []string
	if cursor, _ := a[0].(string); cursor == "0" {
		pattern, typ := "*", ""
		for i := 2; i+1 < len(args); i += 2 {
			switch strings.ToLower(string(args[i])) {
			case "match":
				pattern = string(args[i+1])
			case "type":
				typ = strings.ToLower(string(args[i+1]))
			}
		}
		more = s.quorumOnlyLocks(st, pattern, typ)
	}
	c.WriteArray(2)
	c.WriteAny(a[0])
	c.WriteArray(len(keys) + len(more))
	for _, k := range keys {
		c.WriteAny(k)
	}
	for _, k := range more {
		c.WriteBulkString(k)
	}
	return replied
}

// quorumOnlyLocks lists the lock keys matching pattern (and of type typ,
// unless "") that a quorum of masters holds and the backend has no key
// for. Masters that do not answer count as not holding; a lock that
// cannot be read from the quorum is left out.
func (s *Server) quorumOnlyLocks(st *client, pattern, typ string) []string {
	var out []string
	for _, k := range s.quorumKeys(st, pattern) {
		if v, err := s.backendValue(st, [][]byte{[]byte("EXISTS"), []byte(k)}); err != nil || v != int64(0) {
			continue // the backend's own listing has it
		}
		ks, t, err := s.op(st).ReadAnyType([]byte(k))
		if err != nil || !ks.Exists || typ != "" && t != typ {
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// quorumKeys lists the lock keys of st's database matching pattern that a
// quorum of masters holds (KEYS on every master; the proxy's records left
// out). Masters that do not answer count as not holding.
func (s *Server) quorumKeys(st *client, pattern string) []string {
	ctx, cancel := s.opContext()
	defer cancel()
	rl := s.eng(st)
	seen := map[string]int{}
	for _, r := range rl.Broadcast(ctx, "", nil, "KEYS", pattern) {
		keys, _ := r.Val.([]any)
		if r.Err != nil {
			continue
		}
		for _, k := range keys {
			if ks, ok := k.(string); ok && !isReserved([]byte(ks)) && s.isLockKey([]byte(ks)) {
				seen[ks]++
			}
		}
	}
	var out []string
	for k, n := range seen {
		if n >= rl.Quorum() {
			out = append(out, k)
		}
	}
	return out
}
