package lockscripts

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// NotRecognisedError is the answer of Normalize and Digest for a text the
// proxy does not read as a script with certainty (see lex): such a text is
// never taken for a known script.
type NotRecognisedError struct{ Err *LexError }

func (e *NotRecognisedError) Error() string {
	return "not a script the proxy recognises: " + e.Err.Error()
}

func (e *NotRecognisedError) Unwrap() error { return e.Err }

// Normalize folds the spellings of one Lua script onto one text: its
// tokens as Lua 5.1 reads them, with
//
//   - comments and white space dropped (a line break kept before a "(",
//     where Lua 5.1 refuses a call),
//   - each string literal written by the bytes it stands for, in one
//     quoting ('a', "a", "\97" and [[a]] are one literal),
//   - names, keywords and numerals exactly as written (KEYS is not keys),
//   - a ";" dropped only where it ends a statement that the next token
//     cannot continue (not before "(", not in a table constructor),
//   - the case of a string folded only where Redis ignores it: the command
//     name, the first argument of redis.call( or redis.pcall(, in a script
//     that names redis only to call its functions.
//
// Two texts with the same form run alike on Redis (up to the line numbers
// in error messages). A text that Lua would refuse, or that the lexer does
// not read with certainty, has no form: the error is a
// *NotRecognisedError.
func Normalize(src string) (string, error) {
	toks, err := lex(src)
	if err != nil {
		return "", &NotRecognisedError{Err: err}
	}
	return canonical(toks), nil
}

// Digest is the key of the recognition table: the SHA1 of the normalised
// text, or a *NotRecognisedError for a text that has none.
func Digest(src string) (string, error) {
	n, err := Normalize(src)
	if err != nil {
		return "", err
	}
	return SHA1(n), nil
}

// SHA1 is what Redis calls a script's SHA1: that of its exact bytes.
func SHA1(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// canonical writes tokens as the normalised text: a Lua text that lexes
// back into the same tokens, so that two texts with the same form are the
// same sequence of tokens.
func canonical(toks []token) string {
	return render(toks, droppedSemicolons(toks), commandNames(toks))
}

// render writes toks, but those drop marks, lower-casing those fold marks
// (either may be nil), each separated from the one before only where the
// two would otherwise lex as something else, and a "(" that follows a line
// break after one.
func render(toks []token, drop, fold []bool) string {
	var b strings.Builder
	var prev token
	for i := range toks {
		if drop != nil && drop[i] {
			continue
		}
		t := toks[i]
		if fold != nil && fold[i] {
			t.text = asciiLower(t.text)
		}
		switch {
		case t.kind == tOp && t.text == "(" && t.nl:
			b.WriteByte('\n')
		case b.Len() > 0 && needSpace(&prev, &t):
			b.WriteByte(' ')
		}
		writeToken(&b, &t)
		prev = t
	}
	return b.String()
}

func writeToken(b *strings.Builder, t *token) {
	if t.kind != tString {
		b.WriteString(t.text)
		return
	}
	b.WriteByte('"')
	for i := 0; i < len(t.text); i++ {
		switch c := t.text[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(b, "\\%03d", c)
		}
	}
	b.WriteByte('"')
}

// needSpace: a and b written side by side would lex otherwise.
func needSpace(a, b *token) bool {
	word := func(t *token) bool { return t.kind == tName || t.kind == tKeyword || t.kind == tNumber }
	op := func(t *token, s string) bool { return t.kind == tOp && strings.HasPrefix(t.text, s) }
	switch {
	case word(a) && word(b): // x y, 1 x, x 1
		return true
	case a.kind == tNumber && op(b, "."): // 1 ..
		return true
	case a.kind == tOp && strings.HasSuffix(a.text, ".") && (b.kind == tNumber || op(b, ".")): // . 5, .. .
		return true
	case a.kind == tOp && a.text == "-" && op(b, "-"): // - -, a comment
		return true
	case a.kind == tOp && (a.text == "=" || a.text == "<" || a.text == ">") && op(b, "="): // = ==
		return true
	case a.kind == tOp && a.text == "[" && (op(b, "[") || op(b, "=")): // [ [, a long bracket
		return true
	}
	return false
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func isOp(t *token, s string) bool   { return t.kind == tOp && t.text == s }
func isKw(t *token, s string) bool   { return t.kind == tKeyword && t.text == s }
func isName(t *token, s string) bool { return t.kind == tName && t.text == s }

// droppedSemicolons marks the ";" a normalised text leaves out: those that
// end a statement in a block (not a field separator of a table
// constructor, nor inside parentheses or brackets) after a token that can
// end one, when the next token cannot continue it but starts another
// statement or ends the block. Lua 5.1 allows a ";" only after a
// statement, and "f;(g)()" is not "f(g)()": a ";" anywhere else is kept,
// so that no text Lua refuses takes the form of one it runs.
func droppedSemicolons(toks []token) []bool {
	drop := make([]bool, len(toks))
	// What each open bracket or block is: "{", "(", "[", "params" (a
	// function's parameter list), "function", "do", "if", "repeat".
	var stack []string
	top := func() string {
		if len(stack) == 0 {
			return ""
		}
		return stack[len(stack)-1]
	}
	pop := func() string {
		if len(stack) == 0 {
			return ""
		}
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		return s
	}
	function := false     // after "function", before its parameter list
	paramsClosed := false // the token before is the ")" of a parameter list
	for i := range toks {
		t := &toks[i]
		closedParams := false
		switch {
		case t.kind == tOp:
			switch t.text {
			case "(":
				if function {
					stack = append(stack, "params")
					function = false
				} else {
					stack = append(stack, "(")
				}
			case "{", "[":
				stack = append(stack, t.text)
			case ")":
				closedParams = pop() == "params"
			case "}", "]":
				pop()
			case ";":
				if i > 0 && blockContext(top()) && endsStatement(&toks[i-1], paramsClosed, nextOf(toks, i)) {
					drop[i] = true
				}
			}
		case t.kind == tKeyword:
			switch t.text {
			case "function":
				stack = append(stack, "function")
				function = true
			case "do", "if", "repeat":
				stack = append(stack, t.text)
			case "end", "until":
				pop()
			}
		}
		paramsClosed = closedParams
	}
	return drop
}

func nextOf(toks []token, i int) *token {
	if i+1 < len(toks) {
		return &toks[i+1]
	}
	return nil
}

func blockContext(s string) bool {
	return s == "" || s == "function" || s == "do" || s == "if" || s == "repeat"
}

// endsStatement: a ";" between x and y (nil: the end of the text) ends a
// statement that y cannot continue.
func endsStatement(x *token, xClosesParams bool, y *token) bool {
	blockEnd := y == nil || y.kind == tKeyword && (y.text == "end" || y.text == "else" || y.text == "elseif" || y.text == "until")
	if isKw(x, "return") || isKw(x, "break") {
		// Only last in a block.
		return blockEnd
	}
	switch {
	case x.kind == tName || x.kind == tNumber || x.kind == tString:
	case x.kind == tKeyword && (x.text == "nil" || x.text == "true" || x.text == "false" || x.text == "end"):
	case x.kind == tOp && (x.text == "]" || x.text == "}" || x.text == "..."):
	case x.kind == tOp && x.text == ")" && !xClosesParams:
	default:
		return false
	}
	if blockEnd || y.kind == tName {
		return true
	}
	if y.kind == tKeyword {
		switch y.text {
		case "local", "if", "function", "while", "for", "repeat", "return", "break":
			return true
		}
	}
	return false
}

// commandNames marks the string literals whose case Redis ignores: the
// first argument of redis.call( or redis.pcall( when it is only a string
// literal. None is marked unless the text can only mean Redis's own
// redis table and its functions: every "redis" not a field name is a
// call of one of its functions (redis.x(...)), never a declaration or an
// assignment, and no name reaches the globals or a table's internals
// another way (_G, getfenv, setfenv, rawset, setmetatable, debug, load...).
func commandNames(toks []token) []bool {
	fold := make([]bool, len(toks))
	at := func(i int) *token {
		if i >= 0 && i < len(toks) {
			return &toks[i]
		}
		return &token{kind: tOp}
	}
	for i := range toks {
		t := &toks[i]
		if t.kind != tName {
			continue
		}
		if dynamicAccess[t.text] {
			return fold
		}
		if t.text != "redis" || isOp(at(i-1), ".") || isOp(at(i-1), ":") {
			continue
		}
		if isKw(at(i-1), "function") || isKw(at(i-1), "local") ||
			!isOp(at(i+1), ".") || at(i+2).kind != tName || !isOp(at(i+3), "(") {
			return fold
		}
	}
	for i := range toks {
		if isName(at(i), "redis") && !isOp(at(i-1), ".") && !isOp(at(i-1), ":") &&
			(isName(at(i+2), "call") || isName(at(i+2), "pcall")) &&
			at(i+4).kind == tString && (isOp(at(i+5), ",") || isOp(at(i+5), ")")) {
			fold[i+4] = true
		}
	}
	return fold
}

// dynamicAccess are the names through which a script could reach the
// globals, or change a table behind its back, without naming it.
var dynamicAccess = map[string]bool{
	"_G": true, "getfenv": true, "setfenv": true, "rawset": true, "rawget": true,
	"setmetatable": true, "getmetatable": true, "debug": true, "loadstring": true,
	"load": true, "dofile": true, "loadfile": true, "require": true, "module": true,
	"package": true,
}
