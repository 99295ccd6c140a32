package proxy

import (
	"crypto/subtle"
	"strings"
)

const wrongPass = "WRONGPASS invalid username-password pair or user is disabled."

// clientAuth is what client AUTH is checked against: proxy.password and
// proxy.users. A reload swaps it whole; connections that already
// authenticated stay authenticated, as on Redis.
type clientAuth struct {
	password string
	users    []UserConfig
}

func newClientAuth(p ProxyConfig) *clientAuth {
	return &clientAuth{password: p.Password, users: append([]UserConfig(nil), p.Users...)}
}

// authRequired reports whether clients must authenticate: proxy.password or
// proxy.users is set.
func (s *Server) authRequired() bool {
	a := s.auth.Load()
	return a.password != "" || len(a.users) > 0
}

// checkAuth checks AUTH's arguments: a password for the "default" user, or
// a user and a password.
func (s *Server) checkAuth(args [][]byte) bool {
	a := s.auth.Load()
	user, pass := "default", args[0]
	if len(args) == 2 {
		user, pass = string(args[0]), args[1]
	}
	if user == "default" {
		return a.password != "" && same(pass, a.password)
	}
	ok := false
	for _, u := range a.users {
		if u.Name == user && same(pass, u.Password) {
			ok = true
		}
	}
	return ok
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
