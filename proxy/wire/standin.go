package wire

import (
	"net"

	"github.com/tidwall/redcon"
)

// Stand-ins for a client connection (redcon.Conn), for the replies the
// proxy does not pass to a client as they come: those it discards, keeps
// for a moment, writes into a buffer, or passes on and looks at.

// Discard discards what is written to it: for commands the proxy sends on
// a client's behalf whose replies the client must not see.
type Discard struct{}

var _ redcon.Conn = Discard{}

func (Discard) RemoteAddr() string             { return "" }
func (Discard) Close() error                   { return nil }
func (Discard) WriteError(string)              {}
func (Discard) WriteString(string)             {}
func (Discard) WriteBulk([]byte)               {}
func (Discard) WriteBulkString(string)         {}
func (Discard) WriteInt(int)                   {}
func (Discard) WriteInt64(int64)               {}
func (Discard) WriteUint64(uint64)             {}
func (Discard) WriteArray(int)                 {}
func (Discard) WriteNull()                     {}
func (Discard) WriteRaw([]byte)                {}
func (Discard) WriteAny(any)                   {}
func (Discard) Context() any                   { return nil }
func (Discard) SetContext(any)                 {}
func (Discard) SetReadBuffer(int)              {}
func (Discard) Detach() redcon.DetachedConn    { return nil }
func (Discard) ReadPipeline() []redcon.Command { return nil }
func (Discard) PeekPipeline() []redcon.Command { return nil }
func (Discard) NetConn() net.Conn              { return nil }

// Capture keeps the raw reply a passed-through command got (Raw), or the
// error written to it (Err): for a reply the proxy reads before it
// answers.
type Capture struct {
	Discard
	Raw []byte
	Err string
}

func (c *Capture) WriteRaw(b []byte)     { c.Raw = append(c.Raw, b...) }
func (c *Capture) WriteError(msg string) { c.Err = msg }

// Tee passes what is written to it on to Conn, and keeps a copy of the
// last raw reply (Last): for a reply the client gets as it is, which the
// proxy then acts on (EXEC's, RENAME's, a flush's).
type Tee struct {
	redcon.Conn
	Last []byte
}

func (t *Tee) WriteRaw(b []byte) {
	t.Last = append(t.Last[:0], b...)
	t.Conn.WriteRaw(b)
}

// BufConn writes what is written to it into a Buf: the reply of a lock
// operation in flight, written out later in request order.
type BufConn struct{ W *Buf }

var _ redcon.Conn = BufConn{}

func (r BufConn) WriteError(msg string)        { r.W.WriteError(msg) }
func (r BufConn) WriteString(str string)       { r.W.WriteString(str) }
func (r BufConn) WriteBulk(bulk []byte)        { r.W.WriteBulk(bulk) }
func (r BufConn) WriteBulkString(bulk string)  { r.W.WriteBulkString(bulk) }
func (r BufConn) WriteInt(num int)             { r.W.WriteInt(num) }
func (r BufConn) WriteInt64(num int64)         { r.W.WriteInt64(num) }
func (r BufConn) WriteUint64(num uint64)       { r.W.WriteUint64(num) }
func (r BufConn) WriteArray(count int)         { r.W.WriteArray(count) }
func (r BufConn) WriteNull()                   { r.W.WriteNull() }
func (r BufConn) WriteMap(pairs int)           { r.W.WriteMap(pairs) }
func (r BufConn) WriteVerbatim(s string)       { r.W.WriteVerbatim(s) }
func (r BufConn) WriteRaw(data []byte)         { r.W.WriteRaw(data) }
func (r BufConn) WriteAny(v any)               { r.W.WriteAny(v) }
func (BufConn) RemoteAddr() string             { return "" }
func (BufConn) Close() error                   { return nil }
func (BufConn) Context() any                   { return nil }
func (BufConn) SetContext(any)                 {}
func (BufConn) SetReadBuffer(int)              {}
func (BufConn) Detach() redcon.DetachedConn    { return nil }
func (BufConn) ReadPipeline() []redcon.Command { return nil }
func (BufConn) PeekPipeline() []redcon.Command { return nil }
func (BufConn) NetConn() net.Conn              { return nil }
