package lockscripts

import (
	"fmt"
	"strings"
)

// The lexer of Lua 5.1, the Lua of Redis: the same tokens, the same
// comments and the same line breaks as Lua's own (llex.c), so that the
// proxy reads a script's text as Redis will run it. What Lua would refuse,
// or what Lua accepts in a way the manual does not document, is an error
// here: such a text is not recognised as any script.

// tokKind is the kind of a token.
type tokKind uint8

const (
	tName    tokKind = iota // a name, as written
	tKeyword                // a reserved word, as written
	tNumber                 // a numeral, as written
	tString                 // a string literal, by the bytes it stands for
	tOp                     // an operator or punctuation, as written
)

// token is one token of a script.
type token struct {
	kind tokKind
	// text is the token as written, except for a string literal: its
	// value, escapes decoded and long brackets removed.
	text string
	// nl: a line break (in white space or a comment) stands between this
	// token and the one before. Lua 5.1 refuses a call whose "(" starts a
	// line ("ambiguous syntax").
	nl bool
}

// keywords are Lua 5.1's reserved words (goto is a name in 5.1).
var keywords = map[string]bool{
	"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true,
	"false": true, "for": true, "function": true, "if": true, "in": true, "local": true,
	"nil": true, "not": true, "or": true, "repeat": true, "return": true, "then": true,
	"true": true, "until": true, "while": true,
}

// LexError says why a text is not read as a Lua script, and where.
type LexError struct {
	Line   int // from 1, as Lua counts lines
	Offset int // of the byte that stopped the reading
	Msg    string
}

func (e *LexError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

type lexer struct {
	src  string
	i    int
	line int
	nl   bool
	toks []token
}

// lex reads src as Lua 5.1 reads it into tokens, dropping white space and
// comments. It fails on what Lua refuses (an unfinished string or long
// bracket, a long bracket of a bad level, an escape too large, a malformed
// numeral, a byte no token starts with), on what Lua builds read
// differently (a "[[" inside a level-0 long bracket), and on what this
// lexer does not take on trust: a NUL byte anywhere (Lua 5.1 reads one
// after a numeral as part of the numeral), an escape the manual does not
// list (Lua 5.1 reads "\q" as "q"; the manual does not say so), a numeral
// in a form the manual does not give (such as 0x1p4, which glibc reads).
func lex(src string) ([]token, *LexError) {
	l := &lexer{src: src, line: 1}
	if err := l.run(); err != nil {
		return nil, err
	}
	return l.toks, nil
}

func (l *lexer) fail(at int, format string, args ...any) *LexError {
	return &LexError{Line: l.line, Offset: at, Msg: fmt.Sprintf(format, args...)}
}

func (l *lexer) emit(kind tokKind, text string) {
	l.toks = append(l.toks, token{kind: kind, text: text, nl: l.nl})
	l.nl = false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isNameByte(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '_'
}

// newline steps over the line break at l.i: "\n", "\r", "\r\n" or "\n\r"
// are one line break, as in Lua's inclinenumber.
func (l *lexer) newline() {
	c := l.src[l.i]
	l.i++
	if l.i < len(l.src) && (l.src[l.i] == '\n' || l.src[l.i] == '\r') && l.src[l.i] != c {
		l.i++
	}
	l.line++
}

// sep reads the opening or closing of a long bracket at p ("[" or "]"
// followed by "="s): its level and the offset after the "="s, where the
// second bracket stands if the level is not negative. As Lua's skip_sep,
// the level is -n-1 when the n "="s are not followed by the same bracket.
func (l *lexer) sep(p int) (level, next int) {
	b := l.src[p]
	q := p + 1
	for q < len(l.src) && l.src[q] == '=' {
		q++
	}
	n := q - p - 1
	if q < len(l.src) && l.src[q] == b {
		return n, q
	}
	return -n - 1, q
}

func (l *lexer) run() *LexError {
	src := l.src
	if k := strings.IndexByte(src, 0); k >= 0 {
		l.line = 1 + strings.Count(src[:k], "\n") // near enough for a message
		return l.fail(k, "a NUL byte")
	}
	for l.i < len(src) {
		c := src[l.i]
		switch {
		case c == '\n' || c == '\r':
			l.newline()
			l.nl = true
		case c == ' ' || c == '\t' || c == '\v' || c == '\f':
			l.i++
		case c == '-':
			if l.i+1 >= len(src) || src[l.i+1] != '-' {
				l.i++
				l.emit(tOp, "-")
				continue
			}
			l.i += 2
			if l.i < len(src) && src[l.i] == '[' {
				if level, next := l.sep(l.i); level >= 0 {
					if _, err := l.long(next+1, level, true); err != nil {
						return err
					}
					continue
				}
			}
			// A short comment: to the end of the line, "\n" or "\r".
			for l.i < len(src) && src[l.i] != '\n' && src[l.i] != '\r' {
				l.i++
			}
		case c == '[':
			level, next := l.sep(l.i)
			switch {
			case level >= 0:
				s, err := l.long(next+1, level, false)
				if err != nil {
					return err
				}
				l.emit(tString, s)
			case level == -1:
				l.i++
				l.emit(tOp, "[")
			default:
				return l.fail(l.i, "invalid long string delimiter")
			}
		case c == '=' || c == '<' || c == '>' || c == '~':
			if l.i+1 < len(src) && src[l.i+1] == '=' {
				l.emit(tOp, src[l.i:l.i+2])
				l.i += 2
				continue
			}
			if c == '~' {
				return l.fail(l.i, "unexpected '~'")
			}
			l.i++
			l.emit(tOp, string(c))
		case c == '"' || c == '\'':
			s, err := l.short(c)
			if err != nil {
				return err
			}
			l.emit(tString, s)
		case c == '.':
			switch {
			case strings.HasPrefix(src[l.i:], "..."):
				l.i += 3
				l.emit(tOp, "...")
			case strings.HasPrefix(src[l.i:], ".."):
				l.i += 2
				l.emit(tOp, "..")
			case l.i+1 < len(src) && isDigit(src[l.i+1]):
				if err := l.numeral(); err != nil {
					return err
				}
			default:
				l.i++
				l.emit(tOp, ".")
			}
		case isDigit(c):
			if err := l.numeral(); err != nil {
				return err
			}
		case isAlpha(c) || c == '_':
			start := l.i
			for l.i < len(src) && isNameByte(src[l.i]) {
				l.i++
			}
			w := src[start:l.i]
			if keywords[w] {
				l.emit(tKeyword, w)
			} else {
				l.emit(tName, w)
			}
		case strings.IndexByte("+*/%^#(){}];:,", c) >= 0:
			l.i++
			l.emit(tOp, string(c))
		default:
			return l.fail(l.i, "unexpected byte 0x%02x", c)
		}
	}
	return nil
}

// long reads a long string or comment of the given level whose body
// starts at p (after its opening bracket), up to its closing bracket of
// the same level, and returns its value: a line break right after the
// opening bracket skipped, every line break made "\n". A "[[" inside a
// level-0 long bracket is an error: Lua 5.1 builds disagree on it (with
// LUA_COMPAT_LSTR 1, the default, Lua refuses it, "nesting of [[...]] is
// deprecated"; the Lua in Debian's redis-server 7.0 reads it as text).
func (l *lexer) long(p, level int, comment bool) (string, *LexError) {
	what := "long string"
	if comment {
		what = "long comment"
	}
	src := l.src
	l.i = p
	if l.i < len(src) && (src[l.i] == '\n' || src[l.i] == '\r') {
		l.newline()
		if comment {
			l.nl = true
		}
	}
	var b strings.Builder
	for {
		if l.i >= len(src) {
			return "", l.fail(l.i, "unfinished %s", what)
		}
		switch c := src[l.i]; c {
		case '[':
			lv, next := l.sep(l.i)
			if lv == level {
				if level == 0 {
					return "", l.fail(l.i, "nesting of [[...]] in a %s", what)
				}
				next++ // the second "[" is part of the body
			}
			b.WriteString(src[l.i:next])
			l.i = next
		case ']':
			lv, next := l.sep(l.i)
			if lv == level {
				l.i = next + 1
				return b.String(), nil
			}
			b.WriteString(src[l.i:next])
			l.i = next
		case '\n', '\r':
			b.WriteByte('\n')
			l.newline()
			if comment {
				l.nl = true
			}
		default:
			b.WriteByte(c)
			l.i++
		}
	}
}

// short reads a string literal between quotes q, starting at l.i, and
// returns its value.
func (l *lexer) short(q byte) (string, *LexError) {
	src := l.src
	start := l.i
	l.i++
	var b strings.Builder
	for {
		if l.i >= len(src) {
			return "", l.fail(start, "unfinished string")
		}
		c := src[l.i]
		switch c {
		case q:
			l.i++
			return b.String(), nil
		case '\n', '\r':
			return "", l.fail(l.i, "unfinished string")
		case '\\':
			l.i++
			if l.i >= len(src) {
				return "", l.fail(start, "unfinished string")
			}
			e := src[l.i]
			switch e {
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			case '\\', '"', '\'':
				b.WriteByte(e)
			case '\n', '\r':
				// An escaped line break is one "\n", whichever it was.
				b.WriteByte('\n')
				l.newline()
				continue
			default:
				if !isDigit(e) {
					return "", l.fail(l.i-1, "escape sequence \\%c is not one of Lua's", e)
				}
				v, n := 0, 0
				for n < 3 && l.i < len(src) && isDigit(src[l.i]) {
					v = v*10 + int(src[l.i]-'0')
					l.i++
					n++
				}
				if v > 255 {
					return "", l.fail(l.i, "escape sequence too large")
				}
				b.WriteByte(byte(v))
				continue
			}
			l.i++
		default:
			b.WriteByte(c)
			l.i++
		}
	}
}

// numeral reads a numeral as Lua 5.1 does (digits and dots, an exponent
// mark and its sign, then any letters, digits and "_") and accepts it only
// in the forms the manual gives: a decimal with an optional fraction and
// exponent, or a hexadecimal integer.
func (l *lexer) numeral() *LexError {
	src := l.src
	start := l.i
	for l.i < len(src) && (isDigit(src[l.i]) || src[l.i] == '.') {
		l.i++
	}
	if l.i < len(src) && (src[l.i] == 'e' || src[l.i] == 'E') {
		l.i++
		if l.i < len(src) && (src[l.i] == '+' || src[l.i] == '-') {
			l.i++
		}
	}
	for l.i < len(src) && isNameByte(src[l.i]) {
		l.i++
	}
	n := src[start:l.i]
	if !validNumeral(n) {
		return l.fail(start, "malformed number near '%s'", n)
	}
	l.emit(tNumber, n)
	return nil
}

// validNumeral: [0-9]+(\.[0-9]*)?|\.[0-9]+ with an optional exponent
// [eE][+-]?[0-9]+, or 0[xX][0-9a-fA-F]+.
func validNumeral(n string) bool {
	if len(n) > 2 && n[0] == '0' && (n[1] == 'x' || n[1] == 'X') {
		return strings.Trim(n[2:], "0123456789abcdefABCDEF") == ""
	}
	i := 0
	digits := func() int {
		s := i
		for i < len(n) && isDigit(n[i]) {
			i++
		}
		return i - s
	}
	d := digits()
	if i < len(n) && n[i] == '.' {
		i++
		d += digits()
	}
	if d == 0 {
		return false
	}
	if i < len(n) && (n[i] == 'e' || n[i] == 'E') {
		i++
		if i < len(n) && (n[i] == '+' || n[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(n)
}
