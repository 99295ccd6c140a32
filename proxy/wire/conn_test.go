package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// fakeConn is a net.Conn whose reads come from r, at most chunk bytes at a
// time, and whose writes go to out.
type fakeConn struct {
	r     io.Reader
	chunk int
	reads int
	out   bytes.Buffer
}

func (f *fakeConn) Read(p []byte) (int, error) {
	f.reads++
	if f.chunk > 0 && len(p) > f.chunk {
		p = p[:f.chunk]
	}
	return f.r.Read(p)
}
func (f *fakeConn) Write(p []byte) (int, error)      { return f.out.Write(p) }
func (f *fakeConn) Close() error                     { return nil }
func (f *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (f *fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (f *fakeConn) SetDeadline(time.Time) error      { return nil }
func (f *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (f *fakeConn) SetWriteDeadline(time.Time) error { return nil }

// readAll reads commands until an error: their arguments, and the error.
func readAll(rd *redcon.Reader) ([][]string, error) {
	var out [][]string
	for {
		cmds, err := rd.ReadCommands()
		for _, c := range cmds {
			args := make([]string, len(c.Args))
			for i, a := range c.Args {
				args[i] = string(a)
			}
			out = append(out, args)
		}
		if err != nil {
			return out, err
		}
	}
}

// segments feeds data to a framer one byte at a time and returns the input
// split at the end of each command it completed, up to an error, and that
// error.
func segments(data []byte, lim Limits) ([][]byte, error) {
	f := inputFramer{lim: lim}
	buf := make([]byte, 2)
	var segs [][]byte
	last := 0
	for k, c := range data {
		buf[1] = c
		_, cut, err := f.scan(buf, 0, 1, 2)
		if err != nil {
			return segs, err
		}
		if cut >= 0 {
			segs = append(segs, data[last:k+1])
			last = k + 1
		}
	}
	return segs, nil
}

// framed parses data with redcon through a Conn, chunk bytes per read.
func framed(data []byte, lim Limits, chunk int) ([][]string, *fakeConn, error) {
	fc := &fakeConn{r: bytes.NewReader(data), chunk: chunk}
	cmds, err := readAll(redcon.NewReader(NewConn(fc, lim, nil)))
	return cmds, fc, err
}

// checkAgainstRedcon asserts that each command the framer delimits is one
// command to redcon (or one redcon refuses), and that redcon reading through
// the framer yields those commands. redcon drops the commands read along
// with one it refuses, so then a prefix of them is enough.
func checkAgainstRedcon(t *testing.T, data []byte, lim Limits, chunk int) {
	t.Helper()
	segs, ferr := segments(data, lim)
	var want [][]string
	refused := false
	for _, seg := range segs {
		cmds, err := readAll(redcon.NewReader(bytes.NewReader(seg)))
		if err != io.EOF {
			refused = true
			if len(cmds) != 0 || !strings.Contains(err.Error(), "Protocol error") {
				t.Fatalf("input %q: redcon reads segment %q as %q, %v", data, seg, cmds, err)
			}
			break
		}
		if len(cmds) != 1 {
			t.Fatalf("input %q: redcon reads segment %q as %d commands %q", data, seg, len(cmds), cmds)
		}
		want = append(want, cmds[0])
	}
	got, _, err := framed(data, lim, chunk)
	protoErr := err != nil && strings.Contains(err.Error(), "Protocol error")
	if len(got) > len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want[:len(got)])) || (!protoErr && len(got) != len(want)) {
		t.Fatalf("input %q (chunk %d): through the framer %q (%v), command by command %q", data, chunk, got, err, want)
	}
	if (ferr != nil || refused) != protoErr {
		t.Fatalf("input %q (chunk %d): framer error %v, redcon refused a command: %v, but the reader ended with %v", data, chunk, ferr, refused, err)
	}
}

var testLimits = Limits{maxBulk: 1 << 10, maxQuery: 4 << 10, maxArgs: 64, maxInline: 512}

var framerCases = []string{
	"PING\r\n",
	"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n",
	"\r\n\n   \r\n  PING\r\n",
	"   *1\r\n$4\r\nPING\r\n",
	" \r*x\r\n",
	"\r\rPING\r\n",
	"\rPING\n",
	"set a 'b c' \"d\\te\"\r\n",
	"set a \"unbalanced\r\nPING\r\n",
	"PING\r\n*1\r\n$-1\r\n",
	"*-1\r\n",
	"*0\r\n",
	"*\r\n",
	"*1\n",
	"*1\r\nX",
	"*1\r\n\n",
	"*1\r\n$\r\n\r\n",
	"*1\r\n$-0\r\n\r\n",
	"*1\r\n$4\r\nPINGXY",
	"*1\r\n$9223372036854775807\r\nabc",
	"*1\r\n$99999999999999999999999\r\n",
	"*1\r\n$1025\r\n",
	"*1\r\n$0001\r\na\r\n",
	"*65\r\n",
	"*4611686018427387904\r\n",
	"*2\r\n$1000\r\n" + strings.Repeat("x", 1000) + "\r\n$1000\r\n",
	strings.Repeat("y", 600),
	strings.Repeat("\r\n", 3000) + "PING\r\n",
	"\x00\xff\xfe\x01 \"unterminated\r\n",
}

func TestFramerMatchesRedcon(t *testing.T) {
	for _, in := range framerCases {
		for _, chunk := range []int{1, 2, 3, 7, 4096} {
			checkAgainstRedcon(t, []byte(in), testLimits, chunk)
		}
	}
}

func TestFramerErrors(t *testing.T) {
	for _, tc := range []struct{ in, reply string }{
		{"*-1\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*65\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n$1025\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*1\r\n$9223372036854775807\r\nabc", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*1\r\n\n", "-ERR Protocol error: expected '$', got '\\x0a'\r\n"},
		{"*1\r\n$4\r\nPINGXY", "-ERR Protocol error: invalid bulk length\r\n"},
		{strings.Repeat("y", 600), "-ERR Protocol error: too big inline request\r\n"},
		{"*3\r\n$1000\r\n" + strings.Repeat("x", 1000) + "\r\n$1000\r\n" + strings.Repeat("x", 1000) + "\r\n$1000\r\n" +
			strings.Repeat("x", 1000) + "\r\n", "-ERR Protocol error: query buffer limit reached (proxy.max_query_buffer)\r\n"},
	} {
		_, fc, err := framed([]byte(tc.in), Limits{maxBulk: 1 << 10, maxQuery: 2500, maxArgs: 64, maxInline: 512}, 0)
		var pe *ProtoError
		if !errors.As(err, &pe) {
			t.Fatalf("%q: error %v, want a protocol error", tc.in, err)
		}
		if fc.out.String() != tc.reply {
			t.Fatalf("%q: answered %q, want %q", tc.in, fc.out.String(), tc.reply)
		}
	}
}

// redcon's reader recurses once per read that does not finish a command: a
// 4 MB bulk read a byte at a time would overflow the goroutine stack (a
// fatal error for the whole process) without the framer, which makes every
// read fill redcon's buffer. The reads redcon makes stay few.
func TestTrickledBulkKeepsReaderShallow(t *testing.T) {
	const size = 4 << 20
	data := append([]byte("*2\r\n$4\r\nECHO\r\n$4194304\r\n"), bytes.Repeat([]byte("z"), size)...)
	data = append(data, "\r\n"...)
	lim := Limits{maxBulk: 8 << 20, maxQuery: 8 << 20, maxArgs: maxArgs, maxInline: maxInline}
	fc := &fakeConn{r: bytes.NewReader(data), chunk: 1}
	cc := NewConn(fc, lim, nil)
	counter := &countingReader{r: cc}
	cmds, err := redcon.NewReader(counter).ReadCommands()
	if err != nil || len(cmds) != 1 || len(cmds[0].Args[1]) != size {
		t.Fatalf("got %d commands, err %v", len(cmds), err)
	}
	if counter.n > 100 {
		t.Fatalf("redcon read %d times for one 4 MB command (each read is one level of recursion)", counter.n)
	}
	t.Logf("%d underlying reads, %d reads by redcon", fc.reads, counter.n)
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) { c.n++; return c.r.Read(p) }

// A giant declared bulk that never arrives costs only the bytes that did.
func TestDeclaredBulkIsNotPreallocated(t *testing.T) {
	lim := Limits{maxBulk: 2 << 30, maxQuery: 2 << 30, maxArgs: maxArgs, maxInline: maxInline}
	data := append([]byte("*2\r\n$4\r\nECHO\r\n$1000000000\r\n"), bytes.Repeat([]byte("z"), 1<<20)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := framed(data, lim, 4096)
	runtime.ReadMemStats(&after)
	if err != io.EOF {
		t.Fatalf("err %v, want EOF (the command is unfinished)", err)
	}
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > 64<<20 {
		t.Fatalf("reading 1 MB of a declared 1 GB bulk allocated %d bytes", grew)
	}
}

// The framer passes on every byte of a well-formed stream unchanged, so
// nothing is copied or moved in the common case.
func TestFramerPassesRESPUnchanged(t *testing.T) {
	in := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n$4\r\nPING\r\n")
	f := inputFramer{lim: testLimits}
	buf := append([]byte(nil), in...)
	w, cut, err := f.scan(buf, 0, 0, len(buf))
	if err != nil || w != len(in) || cut != len(in) || !bytes.Equal(buf, in) {
		t.Fatalf("w=%d cut=%d err=%v out=%q", w, cut, err, buf[:w])
	}
}

// scanBytewise runs data through a framer one byte per call, as reads of
// one byte would: what it passes on, where its last whole command ends, and
// the error that stops it.
func scanBytewise(data []byte, lim Limits) ([]byte, int, error) {
	f := inputFramer{lim: lim}
	buf := make([]byte, len(data)+1)
	w, cut := 0, -1
	for _, c := range data {
		start := w
		if f.holding() {
			start++
		}
		buf[start] = c
		nw, got, err := f.scan(buf, w, start, start+1)
		w = nw
		if got >= 0 {
			cut = got
		}
		if err != nil {
			return buf[:w], cut, err
		}
	}
	return buf[:w], cut, nil
}

// checkWholeCommands asserts that the framer reads data in one call, where
// whole commands take the fast path, exactly as it does byte by byte.
func checkWholeCommands(t *testing.T, data []byte, lim Limits) {
	t.Helper()
	wantOut, wantCut, wantErr := scanBytewise(data, lim)
	f := inputFramer{lim: lim}
	buf := append([]byte(nil), data...)
	w, cut, err := f.scan(buf, 0, 0, len(buf))
	if !bytes.Equal(buf[:w], wantOut) || cut != wantCut || fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("input %q: in one call %q, cut %d, %v; byte by byte %q, cut %d, %v", data, buf[:w], cut, err, wantOut, wantCut, wantErr)
	}
}

// The one-step path for whole commands agrees with the byte-by-byte one,
// at and around every limit.
func TestFramerWholeCommandsAsByteByByte(t *testing.T) {
	lim := Limits{maxBulk: 100, maxQuery: 200, maxArgs: 4, maxInline: 512}
	bulk := func(n int) string { return fmt.Sprintf("$%d\r\n%s\r\n", n, strings.Repeat("x", n)) }
	cases := append([]string{}, framerCases...)
	cases = append(cases,
		"*1\r\n"+bulk(100),         // the largest bulk
		"*1\r\n"+bulk(101),         // one more
		"*2\r\n"+bulk(92)+bulk(90), // 200 bytes: max_query
		"*2\r\n"+bulk(93)+bulk(90), // 201
		"*4\r\n"+bulk(1)+bulk(1)+bulk(1)+bulk(1),
		"*5\r\n"+bulk(1)+bulk(1)+bulk(1)+bulk(1)+bulk(1),
		"*1\r\n$000000000000000004\r\nPING\r\n",   // 18 digits
		"*1\r\n$0000000000000000004\r\nPING\r\n",  // 19
		"*1\r\n$00000000000000000004\r\nPING\r\n", // 20
		"*1\r\n$999999999999999999\r\n",
		"*1\r\n$4\r\nPING\n\n",
		"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI",
		"*2\r\n$4\r\nECHO\r\n",
		"*1\r\n$4\r\nPING\r\n  PING\r\n*1\r\n$4\r\nPING\r\n",
		"*1\r\n$4\r\nPING\r\n*1\r\n%4\r\nPING\r\n",
		"*01\r\n$4\r\nPING\r\n",
		"*+1\r\n$4\r\nPING\r\n",
		"*1\r\n$+4\r\nPING\r\n",
	)
	for _, in := range cases {
		checkWholeCommands(t, []byte(in), lim)
		checkWholeCommands(t, []byte(in), testLimits)
	}
	// And the one-step path is taken.
	f := inputFramer{lim: lim}
	for _, in := range []string{"*1\r\n$4\r\nPING\r\n", "*2\r\n" + bulk(92) + bulk(90)} {
		if k := f.whole([]byte(in), 0, len(in)); k != len(in) {
			t.Fatalf("whole(%q) = %d, want %d", in, k, len(in))
		}
	}
	if k := f.whole([]byte("*2\r\n"+bulk(93)+bulk(90)), 0, 201); k != 0 {
		t.Fatalf("whole of a command over max_query = %d", k)
	}
}

// FuzzFramerWholeCommands: see TestFramerWholeCommandsAsByteByByte.
func FuzzFramerWholeCommands(f *testing.F) {
	for _, in := range framerCases {
		f.Add([]byte(in))
	}
	f.Add([]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkWholeCommands(t, data, Limits{maxBulk: 100, maxQuery: 200, maxArgs: 4, maxInline: 512})
	})
}

// FuzzInputFramer feeds arbitrary bytes, in arbitrary read sizes, through
// the framer to redcon's reader: nothing panics, and redcon sees exactly the
// commands it would see in the raw bytes the framer accepted.
func FuzzInputFramer(f *testing.F) {
	for _, in := range framerCases {
		f.Add([]byte(in), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		checkAgainstRedcon(t, data, testLimits, 1+int(chunk%32))
	})
}
