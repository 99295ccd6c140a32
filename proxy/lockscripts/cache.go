package lockscripts

import (
	"strings"
	"sync"
)

// Cache remembers the text of every script loaded or evaluated through the
// proxy, by true SHA1, so EVALSHA works as on Redis. It holds at most max
// scripts; beyond that the oldest entries are forgotten and their EVALSHA
// answers NOSCRIPT, which clients answer with EVAL.
type Cache struct {
	mu     sync.RWMutex
	texts  map[string]Entry
	bySrc  map[string]string // true SHA1 by text: a script sent again is not hashed again
	order  []string
	max    int
	custom map[string]*Spec // from [[scripts]] in the config, by normalised digest; read-only
}

// Entry is a script's text and, if recognised, its operation.
type Entry struct {
	Src  string
	Spec *Spec
}

// NewCache returns a cache of at most max scripts that recognises the
// operator's scripts custom (from Specs) before the built-in ones.
func NewCache(max int, custom map[string]*Spec) *Cache {
	return &Cache{texts: map[string]Entry{}, bySrc: map[string]string{}, max: max, custom: custom}
}

// Lookup recognises a script: the operator's own scripts first, then the
// built-in ones. A text Digest does not recognise is no script's: nil.
func (s *Cache) Lookup(src string) *Spec {
	d, err := Digest(src)
	if err != nil {
		return nil
	}
	if sp, ok := s.custom[d]; ok {
		return sp
	}
	return builtin[d]
}

// Add remembers the script src and returns its true SHA1 and its entry:
// its text, and its operation if recognised. A script seen before costs a
// map look-up: no hashing, no copy.
func (s *Cache) Add(src []byte) (string, Entry) {
	s.mu.RLock()
	sha, ok := s.bySrc[string(src)]
	e := s.texts[sha]
	s.mu.RUnlock()
	if ok {
		return sha, e
	}
	text := string(src)
	sha = SHA1(text)
	e = Entry{Src: text, Spec: s.Lookup(text)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.texts[sha]; ok {
		return sha, old
	}
	if len(s.order) >= s.max {
		delete(s.bySrc, s.texts[s.order[0]].Src)
		delete(s.texts, s.order[0])
		s.order = s.order[1:]
	}
	s.texts[sha] = e
	s.bySrc[text] = sha
	s.order = append(s.order, sha)
	return sha, e
}

// Get returns the script loaded or evaluated with this SHA1, in any case.
func (s *Cache) Get(sha string) (Entry, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.texts[strings.ToLower(sha)]
	return e, ok
}

// Flush forgets every script, as SCRIPT FLUSH does.
func (s *Cache) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.texts, s.bySrc, s.order = map[string]Entry{}, map[string]string{}, nil
}
