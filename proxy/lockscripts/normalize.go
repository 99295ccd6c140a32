package lockscripts

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// Normalize folds the spellings of one Lua script onto one form:
// comments dropped, case folded, single quotes made double, semicolons
// dropped, and white space kept only where it separates two words.
func Normalize(src string) string {
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

// Digest is the key of the recognition table: the SHA1 of the normalised
// text.
func Digest(src string) string {
	sum := sha1.Sum([]byte(Normalize(src)))
	return hex.EncodeToString(sum[:])
}

// SHA1 is what Redis calls a script's SHA1: that of its exact bytes.
func SHA1(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}
