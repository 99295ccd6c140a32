package scripteq

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// keyState is a key as the test writes it before a case and reads it
// after: its type, content and PTTL.
type keyState struct {
	typ    string      // none, string, hash, list, zset, set
	str    string      // string
	fields [][2]string // hash: field, value; zset: member, score; list, set: value in [0]
	pttl   int64       // ms; -1 no expiry; -2 absent
}

func absent() keyState { return keyState{typ: "none", pttl: -2} }

func (s keyState) String() string {
	switch s.typ {
	case "none":
		return "absent"
	case "string":
		return fmt.Sprintf("string %q pttl %d", clip(s.str), s.pttl)
	}
	parts := make([]string, len(s.fields))
	for i, f := range s.fields {
		parts[i] = clip(f[0])
		if f[1] != "" {
			parts[i] += "=" + clip(f[1])
		}
	}
	return fmt.Sprintf("%s {%s} pttl %d", s.typ, strings.Join(parts, " "), s.pttl)
}

// write makes key hold s on a server.
func write(c *conn, key string, s keyState) {
	c.must("DEL", key)
	switch s.typ {
	case "none":
		return
	case "string":
		c.must("SET", key, s.str)
	case "hash":
		args := []string{"HSET", key}
		for _, f := range s.fields {
			args = append(args, f[0], f[1])
		}
		c.must(args...)
	case "list", "set":
		args := []string{map[string]string{"list": "RPUSH", "set": "SADD"}[s.typ], key}
		for _, f := range s.fields {
			args = append(args, f[0])
		}
		c.must(args...)
	case "zset":
		args := []string{"ZADD", key}
		for _, f := range s.fields {
			args = append(args, f[1], f[0])
		}
		c.must(args...)
	default:
		panic("write: type " + s.typ)
	}
	if s.pttl > 0 {
		c.must("PEXPIRE", key, strconv.FormatInt(s.pttl, 10))
	}
}

// read reads key's state on a server.
func read(c *conn, key string) keyState {
	s := keyState{typ: c.must("TYPE", key).s}
	pairs := func(r reply) {
		for i := 0; i+1 < len(r.a); i += 2 {
			s.fields = append(s.fields, [2]string{r.a[i].s, r.a[i+1].s})
		}
	}
	switch s.typ {
	case "none":
		s.pttl = -2
		return s
	case "string":
		s.str = c.must("GET", key).s
	case "hash":
		pairs(c.must("HGETALL", key))
		slices.SortFunc(s.fields, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	case "zset":
		pairs(c.must("ZRANGE", key, "0", "-1", "WITHSCORES"))
		slices.SortFunc(s.fields, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	case "list":
		for _, x := range c.must("LRANGE", key, "0", "-1").a {
			s.fields = append(s.fields, [2]string{x.s, ""})
		}
	case "set":
		for _, x := range c.must("SMEMBERS", key).a {
			s.fields = append(s.fields, [2]string{x.s, ""})
		}
		slices.SortFunc(s.fields, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	}
	s.pttl = c.must("PTTL", key).n
	if s.pttl == -2 { // expired between the two reads
		return absent()
	}
	return s
}

// compareMode says what of a key's state must match.
type compareMode int

const (
	compareAll     compareMode = iota
	compareMembers             // a semaphore's permits: the members, not their scores or the key's TTL (the two formats differ)
)

// sameState reports whether a and b are the same state: the same type and
// content, PTTLs within tol ms of each other (a key about to expire on one
// side may be gone on the other), zset scores within tol.
func sameState(a, b keyState, tol int64, mode compareMode) bool {
	if a.typ == "none" || b.typ == "none" {
		if a.typ == b.typ {
			return true
		}
		other := a
		if a.typ == "none" {
			other = b
		}
		return other.pttl >= 0 && other.pttl <= tol && mode == compareAll
	}
	if a.typ != b.typ || a.str != b.str || len(a.fields) != len(b.fields) {
		return false
	}
	for i := range a.fields {
		fa, fb := a.fields[i], b.fields[i]
		if fa[0] != fb[0] {
			return false
		}
		switch {
		case mode == compareMembers && a.typ == "zset":
		case a.typ == "zset":
			x, err1 := strconv.ParseFloat(fa[1], 64)
			y, err2 := strconv.ParseFloat(fb[1], 64)
			if err1 != nil || err2 != nil || math.Abs(x-y) > float64(tol) {
				return false
			}
		case fa[1] != fb[1]:
			return false
		}
	}
	if mode == compareMembers {
		return true
	}
	if a.pttl < 0 || b.pttl < 0 {
		return a.pttl == b.pttl
	}
	d := a.pttl - b.pttl
	return d <= tol && d >= -tol
}
