package wire

import (
	"testing"

	"github.com/tidwall/redcon"
)

// The stand-ins keep what the proxy reads of a reply: Capture the raw
// reply or the error, Tee a copy of the last reply it passed on, BufConn
// the reply in its buffer.
func TestStandIns(t *testing.T) {
	var c Capture
	c.WriteRaw([]byte(":3\r\n"))
	c.WriteInt(9) // discarded
	if string(c.Raw) != ":3\r\n" || c.Err != "" {
		t.Fatalf("Capture: %q %q", c.Raw, c.Err)
	}
	c.WriteError("ERR x")
	if c.Err != "ERR x" {
		t.Fatalf("Capture: error %q", c.Err)
	}

	var got Capture
	tee := &Tee{Conn: &got}
	tee.WriteRaw([]byte("+OK\r\n"))
	tee.WriteRaw([]byte(":1\r\n"))
	if string(tee.Last) != ":1\r\n" || string(got.Raw) != "+OK\r\n:1\r\n" {
		t.Fatalf("Tee: last %q, passed on %q", tee.Last, got.Raw)
	}

	var b Buf
	var bc redcon.Conn = BufConn{W: &b}
	bc.WriteString("OK")
	bc.WriteInt(2)
	if string(b.B) != "+OK\r\n:2\r\n" {
		t.Fatalf("BufConn: %q", b.B)
	}
	var d redcon.Conn = Discard{}
	d.WriteString("x")
	if d.Context() != nil || d.NetConn() != nil {
		t.Fatal("Discard: not empty")
	}
}
