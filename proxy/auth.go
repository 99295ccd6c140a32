package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

const wrongPass = "WRONGPASS invalid username-password pair or user is disabled."

// errNoPermKeys is Redis 7.0's answer to a command that names a key its
// user may not access.
const errNoPermKeys = "NOPERM this user has no permissions to access one of the keys used as arguments"

// defaultUser is the name of the user of proxy.password, and of a
// connection that has not authenticated as another.
const defaultUser = "default"

// clientAuth is what client AUTH is checked against: proxy.password and
// proxy.users, and what each user may do. A reload swaps it whole;
// connections that already authenticated stay authenticated, as on Redis,
// and what their user may do is read from the new one at each command (a
// connection whose user a reload removed is closed at its next command, as
// Redis closes those of a deleted user).
type clientAuth struct {
	password string
	users    map[string]*user
	names    []string // every user, the default one among them, sorted (ACL USERS)
}

// user is one of proxy.users.
type user struct {
	name, password string
	// allKeys: the user may name every key; else the keys that match one
	// of patterns (glob patterns, as Redis ACL's "~pattern" reads them).
	allKeys  bool
	patterns [][]byte
	// locks: the user may take locks (UserConfig.Locks).
	locks bool
}

func newClientAuth(p ProxyConfig) *clientAuth {
	a := &clientAuth{password: p.Password, users: make(map[string]*user, len(p.Users)), names: []string{defaultUser}}
	for _, uc := range p.Users {
		u := &user{name: uc.Name, password: uc.Password, allKeys: uc.Keys == nil, locks: uc.Locks == nil || *uc.Locks}
		for _, k := range uc.Keys {
			if k == "allkeys" || k == "~*" {
				u.allKeys, u.patterns = true, nil
				break
			}
			pat := []byte(strings.TrimPrefix(k, "~"))
			if !slices.ContainsFunc(u.patterns, func(p []byte) bool { return string(p) == string(pat) }) {
				u.patterns = append(u.patterns, pat)
			}
		}
		a.users[uc.Name] = u
		a.names = append(a.names, uc.Name)
	}
	slices.Sort(a.names)
	return a
}

// mayName reports whether the user may name key in a command.
func (u *user) mayName(key []byte) bool {
	if u.allKeys {
		return true
	}
	for _, p := range u.patterns {
		if redisMatch(p, key) {
			return true
		}
	}
	return false
}

// validateUsers checks proxy.users: each has a name of its own, as Redis
// allows it (no spaces), that is not "default" (proxy.password's), and
// key patterns in Redis ACL's syntax.
func validateUsers(users []UserConfig) error {
	seen := map[string]bool{}
	for i, u := range users {
		key := fmt.Sprintf("proxy.users[%d]", i)
		switch {
		case u.Name == "":
			return fmt.Errorf("%s: name is missing", key)
		case u.Name == defaultUser:
			return fmt.Errorf("%s: the user %q is proxy.password's; name this one otherwise", key, defaultUser)
		case hasSpaces(u.Name):
			return fmt.Errorf("%s: user names cannot contain spaces or null characters, as in Redis", key)
		case seen[u.Name]:
			return fmt.Errorf("%s: the user %q is listed twice", key, u.Name)
		}
		seen[u.Name] = true
		all := false
		for _, k := range u.Keys {
			switch {
			case all:
				return fmt.Errorf("%s: keys: %q comes after \"~*\" (or \"allkeys\"), which already allows every key", key, k)
			case k == "allkeys" || k == "~*":
				all = true
			case strings.HasPrefix(k, "%"):
				return fmt.Errorf("%s: keys: %q: read-only and write-only key patterns (%%R~, %%W~) are not supported; write \"~pattern\"", key, k)
			case !strings.HasPrefix(k, "~"):
				return fmt.Errorf("%s: keys: %q is not a key pattern as Redis ACL writes it: \"~pattern\" (\"~app:*\"), or \"allkeys\"", key, k)
			case hasSpaces(k):
				return fmt.Errorf("%s: keys: %q: key patterns cannot contain spaces or null characters, as in Redis", key, k)
			}
		}
	}
	return nil
}

// hasSpaces is Redis's ACLStringHasSpaces: white space or NUL.
func hasSpaces(s string) bool {
	return strings.ContainsAny(s, " \t\n\v\f\r\x00")
}

// authRequired reports whether clients must authenticate: proxy.password or
// proxy.users is set.
func (s *Server) authRequired() bool {
	a := s.auth.Load()
	return a.password != "" || len(a.users) > 0
}

// checkAuth checks AUTH's arguments: a password for the "default" user, or
// a user and a password. It returns the user's name ("" for the default
// user).
func (s *Server) checkAuth(args [][]byte) (string, bool) {
	a := s.auth.Load()
	name, pass := defaultUser, args[0]
	if len(args) == 2 {
		name, pass = string(args[0]), args[1]
	}
	if name == defaultUser {
		return "", a.password != "" && same(pass, a.password)
	}
	u := a.users[name]
	if u == nil || !same(pass, u.password) {
		return "", false
	}
	return name, true
}

func same(got []byte, want string) bool {
	return subtle.ConstantTimeCompare(got, []byte(want)) == 1
}

// preAuth lists what a client may send before it authenticates, as Redis
// allows: AUTH, HELLO with AUTH, and QUIT.
func preAuth(name string, args [][]byte) bool {
	switch name {
	case "auth", "quit":
		return true
	case "hello":
		for _, a := range args[1:] {
			if strings.EqualFold(string(a), "auth") {
				return true
			}
		}
	}
	return false
}

// userGone reports whether the user a connection authenticated as is no
// longer one of proxy.users (a reload removed it).
func (s *Server) userGone(st *client) bool {
	return st.user != "" && s.auth.Load().users[st.user] == nil
}

// aclList is ACL LIST's lines, one per user, in Redis's format: every
// channel and command (the proxy checks neither), the keys as the user's
// patterns say, passwords as their SHA-256 (never the passwords).
func (a *clientAuth) aclList() []string {
	lines := make([]string, 0, len(a.names))
	for _, name := range a.names {
		var b strings.Builder
		b.WriteString("user " + name)
		if name == defaultUser {
			switch {
			case a.password != "":
				b.WriteString(" on #" + sha256Hex(a.password))
			case len(a.users) == 0:
				b.WriteString(" on nopass") // no AUTH: every client is the default user
			default:
				b.WriteString(" off") // users, and no password for the default one: it cannot authenticate
			}
			b.WriteString(" ~*")
		} else {
			u := a.users[name]
			b.WriteString(" on #" + sha256Hex(u.password))
			if u.allKeys {
				b.WriteString(" ~*")
			}
			for _, p := range u.patterns {
				b.WriteString(" ~" + string(p))
			}
		}
		b.WriteString(" &* +@all")
		lines = append(lines, b.String())
	}
	return lines
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// userRefusal is the error for a command its user may not run: one that
// names a key outside the user's patterns (NOPERM, as Redis answers it;
// SORT's BY and GET options for a user without every key, as Redis
// refuses them), or a lock operation of a user that may not take locks;
// "" when the user may run it. The default user may run everything.
// mayLock reports whether the client's user may take locks (and end
// them): the default user, and a user without locks = false.
func (s *Server) mayLock(st *client) bool {
	if st == nil || st.user == "" {
		return true
	}
	u := s.auth.Load().users[st.user]
	return u != nil && u.locks
}

func (s *Server) userRefusal(st *client, e *command, args [][]byte) string {
	if st == nil || st.user == "" {
		return ""
	}
	u := s.auth.Load().users[st.user]
	if u == nil {
		return errNoPermKeys // a reload removed the user (handle closes the connection)
	}
	if !u.allKeys {
		key, err := s.keyWhere(e, args, true, func(k []byte) bool { return !u.mayName(k) })
		switch {
		case errors.Is(err, errBackendUnreachable):
			return "ERR redlock-proxy: passthrough backend unreachable"
		case err != nil:
			s.log.Warn().Err(err).Msg("the keys of a command are not known")
			return fmt.Sprintf("ERR redlock-proxy: the keys of '%s' are not known (the backend's COMMAND failed), and user '%s' may name only some keys", nameOf(e, args[0]), u.name)
		case key != nil:
			return errNoPermKeys
		}
		if e == nil {
			if msg := sortPatternRefusal(args); msg != "" {
				return msg
			}
		}
	}
	if !u.locks && s.takesLock(e, args) {
		return "NOPERM redlock-proxy: user '" + u.name + "' may not take locks (proxy.users: locks = false), and '" + strings.ToUpper(nameOf(e, args[0])) + "' of a lock key is a lock operation"
	}
	return ""
}

// sortPatternRefusal is Redis's answer to SORT or SORT_RO with a BY or GET
// pattern from a user who may not name every key ("" for other commands):
// the pattern reads keys that nobody can check beforehand. Redis reads the
// options in order and stops at the first it refuses, or at a syntax
// error, which the backend then answers as Redis does.
func sortPatternRefusal(args [][]byte) string {
	name := strings.ToLower(string(args[0]))
	if name != "sort" && name != "sort_ro" {
		return ""
	}
	for j := 2; j < len(args); j++ {
		left := len(args) - j - 1
		switch o := strings.ToLower(cString(args[j])); {
		case o == "asc" || o == "desc" || o == "alpha":
		case o == "limit" && left >= 2:
			if _, err := parseInt(args[j+1]); err != nil {
				return ""
			}
			if _, err := parseInt(args[j+2]); err != nil {
				return ""
			}
			j += 2
		case o == "store" && name == "sort" && left >= 1:
			j++
		case o == "by" && left >= 1:
			if strings.Contains(cString(args[j+1]), "*") {
				return "ERR BY option of SORT denied due to insufficient ACL permissions."
			}
			j++
		case o == "get" && left >= 1:
			return "ERR GET option of SORT denied due to insufficient ACL permissions."
		default:
			return ""
		}
	}
	return ""
}

// cString is b as C reads it: up to its first NUL.
func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
