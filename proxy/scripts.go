package proxy

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
)

// normalizeScript folds the spellings of one Lua script onto one form:
// comments dropped, case folded, single quotes made double, semicolons
// dropped, and white space kept only where it separates two words.
func normalizeScript(src string) string {
	src = stripComments(src)
	var b strings.Builder
	pendingSpace := false
	var prev byte
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			pendingSpace = true
			continue
		case c == ';':
			pendingSpace = true
			continue
		case c == '\'':
			c = '"'
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		}
		if pendingSpace && isWord(prev) && isWord(c) {
			b.WriteByte(' ')
		}
		pendingSpace = false
		b.WriteByte(c)
		prev = c
	}
	return b.String()
}

func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// stripComments removes Lua "--" comments (line and long-bracket forms)
// outside string literals.
func stripComments(src string) string {
	var b strings.Builder
	var quote byte
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(src) {
				b.WriteByte(c)
				i++
				c = src[i]
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '-' && strings.HasPrefix(src[i:], "--"):
			if strings.HasPrefix(src[i:], "--[[") {
				end := strings.Index(src[i:], "]]")
				if end < 0 {
					return b.String()
				}
				i += end + 1
			} else {
				for i < len(src) && src[i] != '\n' {
					i++
				}
				b.WriteByte('\n')
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// scriptDigest is the key of the recognition table: the SHA1 of the
// normalised text.
func scriptDigest(src string) string {
	sum := sha1.Sum([]byte(normalizeScript(src)))
	return hex.EncodeToString(sum[:])
}

// trueSHA is what Redis calls a script's SHA1: that of its exact bytes.
func trueSHA(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// scriptCache remembers the text of every script loaded or evaluated
// through the proxy, by true SHA1, so EVALSHA works as on Redis. It holds at
// most max scripts; beyond that the oldest entries are forgotten and their
// EVALSHA answers NOSCRIPT, which clients answer with EVAL.
type scriptCache struct {
	mu     sync.RWMutex
	texts  map[string]cachedScript
	bySrc  map[string]string // true SHA1 by text: a script sent again is not hashed again
	order  []string
	max    int
	custom map[string]*scriptSpec // from [[scripts]] in the config, by normalised digest; read-only
}

// cachedScript is a script's text and, if recognised, its operation.
type cachedScript struct {
	src  string
	spec *scriptSpec
}

func newScriptCache(max int, custom map[string]*scriptSpec) *scriptCache {
	return &scriptCache{texts: map[string]cachedScript{}, bySrc: map[string]string{}, max: max, custom: custom}
}

// lookup recognises a script: the operator's own scripts first, then the
// libraries' (knownScripts).
func (s *scriptCache) lookup(src string) *scriptSpec {
	d := scriptDigest(src)
	if sp, ok := s.custom[d]; ok {
		return sp
	}
	return knownScripts[d]
}

// add remembers the script src and returns its true SHA1 and its entry:
// its text, and its operation if recognised. A script seen before costs a
// map look-up: no hashing, no copy.
func (s *scriptCache) add(src []byte) (string, cachedScript) {
	s.mu.RLock()
	sha, ok := s.bySrc[string(src)]
	e := s.texts[sha]
	s.mu.RUnlock()
	if ok {
		return sha, e
	}
	text := string(src)
	sha = trueSHA(text)
	e = cachedScript{src: text, spec: s.lookup(text)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.texts[sha]; ok {
		return sha, old
	}
	if len(s.order) >= s.max {
		delete(s.bySrc, s.texts[s.order[0]].src)
		delete(s.texts, s.order[0])
		s.order = s.order[1:]
	}
	s.texts[sha] = e
	s.bySrc[text] = sha
	s.order = append(s.order, sha)
	return sha, e
}

func (s *scriptCache) get(sha string) (cachedScript, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.texts[strings.ToLower(sha)]
	return e, ok
}

func (s *scriptCache) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.texts, s.bySrc, s.order = map[string]cachedScript{}, map[string]string{}, nil
}
