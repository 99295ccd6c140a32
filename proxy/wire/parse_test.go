package wire

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// sessionRead reads data through a Conn, chunk bytes per read, as a
// session does, and parses it with ParseCommands: the commands' arguments,
// and the error that ended it.
func sessionRead(data []byte, lim Limits, chunk int) ([][]string, error) {
	fc := &fakeConn{r: bytes.NewReader(data), chunk: chunk}
	cc := NewConn(fc, lim, nil)
	buf, n := make([]byte, 512), 0
	var out [][]string
	for {
		if len(buf)-n < 2 {
			buf = append(buf, make([]byte, len(buf))...)
		}
		k, err := cc.Read(buf[n:])
		n += k
		if k > 0 {
			cmds, used, perr := ParseCommands(buf[:n])
			for _, c := range cmds {
				if c.Raw != nil && !bytes.Equal(c.Raw, AppendCommand(nil, c.Args)) {
					return out, &rawMismatch{raw: c.Raw, args: c.Args}
				}
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

// rawMismatch: a parsed command's Raw is not the encoding of its
// arguments, so passing it on would send the backend another command.
type rawMismatch struct {
	raw  []byte
	args [][]byte
}

func (e *rawMismatch) Error() string {
	return fmt.Sprintf("Raw %q is not the encoding of %q", e.raw, e.args)
}

// The session's parser reads what redcon's reader reads through the same
// framer: the same commands, and a protocol error exactly when redcon
// refuses the input (redcon drops the commands read along with a refused
// one, so then its commands are a prefix of the parser's).
func checkParserAgainstRedcon(t *testing.T, data []byte, chunk int) {
	t.Helper()
	got, gerr := sessionRead(data, testLimits, chunk)
	if rm, ok := gerr.(*rawMismatch); ok {
		t.Fatalf("input %q (chunk %d): %v", data, chunk, rm)
	}
	want, _, werr := framed(data, testLimits, chunk)
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

// A multibulk command keeps its own bytes (Raw), to be passed on as they
// are: they are what AppendCommand writes for its arguments, because a
// number written with a leading zero (which Redis refuses) is refused.
// Inline commands keep none.
func TestParsedCommandsKeepTheirBytes(t *testing.T) {
	ten := strings.Repeat("v", 10)
	for _, tc := range []struct {
		in  string
		raw bool
		err bool
	}{
		{in: "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", raw: true},
		{in: "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n" + ten + "\r\n", raw: true},
		{in: "*2\r\n$3\r\nGET\r\n$0\r\n\r\n", raw: true},
		{in: "GET k\r\n"},
		{in: "*2\r\n$03\r\nGET\r\n$1\r\nk\r\n", err: true},
		{in: "*02\r\n$3\r\nGET\r\n$1\r\nk\r\n", err: true},
		{in: "*2\r\n$3\r\nGET\r\n$00\r\n\r\n", err: true},
	} {
		cmds, used, err := ParseCommands([]byte(tc.in))
		if tc.err {
			if err == nil || len(cmds) != 0 {
				t.Errorf("%q: %q, %v; want a protocol error", tc.in, cmds, err)
			}
			continue
		}
		if err != nil || used != len(tc.in) || len(cmds) != 1 {
			t.Fatalf("%q: %d commands, %d of %d bytes, %v", tc.in, len(cmds), used, len(tc.in), err)
		}
		raw := cmds[0].Raw
		if (raw != nil) != tc.raw || (raw != nil && string(raw) != tc.in) {
			t.Errorf("%q: Raw %q", tc.in, raw)
		}
		if enc := AppendCommand(nil, cmds[0].Args); string(AppendRequest(nil, cmds[0])) != string(enc) {
			t.Errorf("%q: sent as %q, want %q", tc.in, AppendRequest(nil, cmds[0]), enc)
		}
	}
}

// Commands parsed from one buffer share an allocation for their arguments
// (parseMultibulk's slab): a handler that appends to one command's
// arguments must not overwrite the next command's, also where a slab runs
// out and where a command has more arguments than a slab holds.
func TestParsedCommandsDoNotShareArguments(t *testing.T) {
	var in strings.Builder
	var want [][]string
	for i := 0; i < 3*slabArgs; i++ {
		n := 1 + i%5
		if i == slabArgs+1 {
			n = slabArgs + 7
		}
		args := make([]string, n)
		fmt.Fprintf(&in, "*%d\r\n", n)
		for j := range args {
			args[j] = fmt.Sprintf("c%da%d", i, j)
			fmt.Fprintf(&in, "$%d\r\n%s\r\n", len(args[j]), args[j])
		}
		want = append(want, args)
	}
	cmds, used, err := ParseCommands([]byte(in.String()))
	if err != nil || used != in.Len() || len(cmds) != len(want) {
		t.Fatalf("parsed %d commands, %d of %d bytes, %v", len(cmds), used, in.Len(), err)
	}
	for _, c := range cmds {
		_ = append(c.Args, []byte("appended"))
	}
	for i, c := range cmds {
		if len(c.Args) != len(want[i]) {
			t.Fatalf("command %d: %d arguments, want %d", i, len(c.Args), len(want[i]))
		}
		for j, a := range c.Args {
			if string(a) != want[i][j] {
				t.Fatalf("command %d argument %d: %q, want %q", i, j, a, want[i][j])
			}
		}
	}
}
