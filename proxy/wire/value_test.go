package wire

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseValue(t *testing.T) {
	cases := []struct {
		in   string
		want any
	}{
		{"+OK\r\n", "OK"},
		{"-ERR no\r\n", ErrorReply("ERR no")},
		{":-3\r\n", int64(-3)},
		{"$3\r\nabc\r\n", "abc"},
		{"$-1\r\n", nil},
		{"*-1\r\n", nil},
		{"_\r\n", nil},
		{"#t\r\n", true},
		{",1.5\r\n", "1.5"},
		{"(12345678901234567890\r\n", "12345678901234567890"},
		{"=7\r\ntxt:abc\r\n", "abc"},
		{"!5\r\nERR x\r\n", ErrorReply("ERR x")},
		{"*2\r\n$1\r\na\r\n:1\r\n", []any{"a", int64(1)}},
		{"%1\r\n+k\r\n*1\r\n_\r\n", []any{"k", []any{nil}}},
		{"~1\r\n+m\r\n", []any{"m"}},
		{">2\r\n+message\r\n+x\r\n", []any{"message", "x"}},
		{"|1\r\n+ttl\r\n:3\r\n+v\r\n", "v"},
	}
	for _, c := range cases {
		got, err := ParseValue([]byte(c.in))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %#v %v, want %#v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "+OK", "?x\r\n", "$5\r\nab\r\n", "*2\r\n:1\r\n"} {
		if _, err := ParseValue([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// An array's kind is kept while its elements are read: the line it came
// from is overwritten once the reader's buffer refills, and a byte '|'
// there (an attribute's kind) must not be taken for it (COMMAND's
// subcommands are named "name|sub").
func TestParseValueAcrossBufferRefills(t *testing.T) {
	body := strings.Repeat("|", 3000)
	var b strings.Builder
	var want []any
	const n = 50
	b.WriteString("*50\r\n")
	for i := 0; i < n; i++ {
		b.WriteString("$3000\r\n" + body + "\r\n")
		want = append(want, body)
	}
	got, err := ParseValue([]byte(b.String()))
	if err != nil || !reflect.DeepEqual(got, any(want)) {
		t.Fatalf("%v", err)
	}
}

func TestParseResult(t *testing.T) {
	if v, err := ParseResult([]byte("*1\r\n:1\r\n")); err != nil || !reflect.DeepEqual(v, []any{int64(1)}) {
		t.Errorf("an array: %#v, %v", v, err)
	}
	if v, err := ParseResult([]byte("-ERR no\r\n")); v != nil || err != ErrorReply("ERR no") {
		t.Errorf("an error reply: %#v, %v; want nil and the reply as the error", v, err)
	}
	if v, err := ParseResult([]byte("$3\r\nab")); v != nil || err == nil {
		t.Errorf("a short reply: %#v, %v; want nil and an error", v, err)
	}
}
