package wire

import (
	"bufio"
	"bytes"
	"strconv"
)

// ErrorReply is an error reply of a backend, as a value.
type ErrorReply string

func (e ErrorReply) Error() string { return string(e) }

// ParseValue reads one whole reply (RESP2 or RESP3) into Go values:
// strings for simple, bulk and verbatim strings, int64 for integers,
// []any for arrays, sets, pushes and maps (a map's keys and values in
// turn), ErrorReply for errors, nil for nulls; doubles and big numbers as
// their text. It is for the proxy's own few reads of a backend's replies
// (COMMAND), not for relaying.
func ParseValue(b []byte) (any, error) {
	return parseValue(bufio.NewReader(bytes.NewReader(b)))
}

// ParseResult is ParseValue for a command's result: an error reply is
// returned as the error (its ErrorReply), with no value.
func ParseResult(b []byte) (any, error) {
	v, err := ParseValue(b)
	if err != nil {
		return nil, err
	}
	if er, ok := v.(ErrorReply); ok {
		return nil, er
	}
	return v, nil
}

func parseValue(r *bufio.Reader) (any, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, errBadReply
	}
	// line is valid until the next read: keep what is needed of it.
	kind, body := line[0], string(line[1:len(line)-2])
	switch kind {
	case '+', ',', '(':
		return body, nil
	case '-', '!':
		if kind == '!' {
			s, err := readBulk(r, body)
			return ErrorReply(s), err
		}
		return ErrorReply(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '_':
		return nil, nil
	case '#':
		return body == "t", nil
	case '$', '=':
		if body == "-1" {
			return nil, nil
		}
		s, err := readBulk(r, body)
		if kind == '=' && len(s) >= 4 {
			s = s[4:] // "txt:"
		}
		return s, err
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, errBadReply
		}
		if n == -1 {
			return nil, nil
		}
		if kind == '%' || kind == '|' {
			n *= 2
		}
		out := make([]any, 0, min(n, 1024))
		for i := 0; i < n; i++ {
			v, err := parseValue(r)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if kind == '|' { // attributes come before the reply they describe
			return parseValue(r)
		}
		return out, nil
	}
	return nil, errBadReply
}

func readBulk(r *bufio.Reader, length string) (string, error) {
	n, err := strconv.Atoi(length)
	if err != nil || n < 0 {
		return "", errBadReply
	}
	b := make([]byte, n+2)
	if _, err := readFull(r, b); err != nil {
		return "", err
	}
	return string(b[:n]), nil
}
