package proxy

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// MasterAuthConfig gives one master (or the passthrough backend) credentials
// of its own, in place of redlock.username and redlock.password.
type MasterAuthConfig struct {
	Address  string `toml:"address"`  // as written in redlock.masters or proxy.backend
	Username string `toml:"username"` // ACL user; empty: the default user
	Password string `toml:"password"` // empty: no AUTH for this address
}

// credential is what the proxy sends in AUTH to one server.
type credential struct{ user, pass string }

// credTable holds the credentials for every address the proxy connects to.
type credTable struct {
	def    credential
	byAddr map[string]credential
}

// masterCreds holds the credentials for the masters and the backend. A
// reload swaps the table whole; each new connection reads it, so existing
// connections stay as they are and new ones use the new credentials.
type masterCreds struct{ t atomic.Pointer[credTable] }

func newMasterCreds(r RedlockConfig) *masterCreds {
	m := &masterCreds{}
	m.set(r)
	return m
}

func (m *masterCreds) set(r RedlockConfig) {
	t := &credTable{def: credential{r.Username, r.Password}, byAddr: map[string]credential{}}
	for _, a := range r.MasterAuth {
		t.byAddr[a.Address] = credential{a.Username, a.Password}
	}
	m.t.Store(t)
}

// get returns the username and password for addr (go-redis's
// CredentialsProvider shape).
func (m *masterCreds) get(addr string) (user, pass string) {
	t := m.t.Load()
	c, ok := t.byAddr[addr]
	if !ok {
		c = t.def
	}
	return c.user, c.pass
}

// provider returns a function that reads addr's current credentials.
func (m *masterCreds) provider(addr string) func() (string, string) {
	return func() (string, string) { return m.get(addr) }
}

// validateMasterAuth checks redlock.username and [[redlock.master_auth]]:
// every entry names a configured master or the backend, once, and a
// username comes with a password.
func validateMasterAuth(c *Config) error {
	if c.Redlock.Username != "" && c.Redlock.Password == "" {
		return errors.New("redlock.username: a username needs redlock.password")
	}
	known := map[string]bool{c.backendAddr(): true}
	for _, m := range c.Redlock.Masters {
		known[m] = true
	}
	seen := map[string]bool{}
	for i, a := range c.Redlock.MasterAuth {
		key := fmt.Sprintf("redlock.master_auth[%d]", i)
		switch {
		case a.Address == "":
			return fmt.Errorf("%s: address is missing", key)
		case !known[a.Address]:
			return fmt.Errorf("%s: address %q is not one of redlock.masters or proxy.backend (write it exactly as it is listed there)", key, a.Address)
		case seen[a.Address]:
			return fmt.Errorf("%s: address %q has credentials twice", key, a.Address)
		case a.Username != "" && a.Password == "":
			return fmt.Errorf("%s: username %q needs a password", key, a.Username)
		}
		seen[a.Address] = true
	}
	return nil
}
