package proxy

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// sessionRead reads data through a clientConn, chunk bytes per read, as a
// session does, and parses it with parseCommands: the commands' arguments,
// and the error that ended it.
func sessionRead(data []byte, lim inputLimits, chunk int) ([][]string, error) {
	fc := &fakeConn{r: bytes.NewReader(data), chunk: chunk}
	cc := newClientConn(fc, lim, 0)
	buf, n := make([]byte, readBufMin), 0
	var out [][]string
	for {
		if len(buf)-n < 2 {
			buf = append(buf, make([]byte, len(buf))...)
		}
		k, err := cc.Read(buf[n:])
		n += k
		if k > 0 {
			cmds, used, perr := parseCommands(buf[:n])
			for _, c := range cmds {
				args := make([]string, len(c.Args))
				for i, a := range c.Args {
					args[i] = string(a)
				}
				out = append(out, args)
			}
			if perr != nil {
				return out, perr
			}
			n = copy(buf, buf[used:n])
		}
		if err != nil {
			return out, err
		}
	}
}

// The session's parser reads what redcon's reader reads through the same
// framer: the same commands, and a protocol error exactly when redcon
// refuses the input (redcon drops the commands read along with a refused
// one, so then its commands are a prefix of the parser's).
func checkParserAgainstRedcon(t *testing.T, data []byte, chunk int) {
	t.Helper()
	got, gerr := sessionRead(data, testLimits, chunk)
	want, werr, _ := framed(data, testLimits, chunk)
	gProto := gerr != nil && strings.Contains(gerr.Error(), "Protocol error")
	wProto := werr != nil && strings.Contains(werr.Error(), "Protocol error")
	if gProto != wProto {
		t.Fatalf("input %q (chunk %d): parser ended with %v, redcon with %v", data, chunk, gerr, werr)
	}
	if wProto {
		if len(want) > len(got) || (len(want) > 0 && !reflect.DeepEqual(want, got[:len(want)])) {
			t.Fatalf("input %q (chunk %d): parser %q, redcon %q (%v)", data, chunk, got, want, werr)
		}
		if gerr.Error() != werr.Error() && !strings.Contains(werr.Error(), "unbalanced") {
			t.Logf("input %q: error texts differ: %q vs %q", data, gerr, werr)
		}
		return
	}
	if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
		t.Fatalf("input %q (chunk %d): parser %q, redcon %q", data, chunk, got, want)
	}
}

func TestParserAgainstRedcon(t *testing.T) {
	cases := append([]string{
		`SET a "b c" 'd'` + "\r\n",
		`SET a "b\"c\n" x` + "\n",
		`SET a "b` + "\r\n",
		`SET a "b"c` + "\r\n",
		`SET a b"c` + "\r\n",
		`SET "" ''` + "\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$600\r\n" + strings.Repeat("x", 600) + "\r\nPING\r\n",
	}, framerCases...)
	for _, c := range cases {
		for _, chunk := range []int{1, 3, 7, 1 << 20} {
			checkParserAgainstRedcon(t, []byte(c), chunk)
		}
	}
}

func FuzzParseCommands(f *testing.F) {
	for _, in := range framerCases {
		f.Add([]byte(in), uint8(3))
	}
	f.Add([]byte(`SET a "b\"c" 'd e'`+"\r\n"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		checkParserAgainstRedcon(t, data, 1+int(chunk%32))
	})
}
