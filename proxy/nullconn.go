package proxy

import (
	"net"

	"github.com/tidwall/redcon"
)

// nullConn discards what is written to it: for commands the proxy sends on a
// client's behalf whose replies the client must not see.
type nullConn struct{}

var _ redcon.Conn = nullConn{}

func (nullConn) RemoteAddr() string             { return "" }
func (nullConn) Close() error                   { return nil }
func (nullConn) WriteError(string)              {}
func (nullConn) WriteString(string)             {}
func (nullConn) WriteBulk([]byte)               {}
func (nullConn) WriteBulkString(string)         {}
func (nullConn) WriteInt(int)                   {}
func (nullConn) WriteInt64(int64)               {}
func (nullConn) WriteUint64(uint64)             {}
func (nullConn) WriteArray(int)                 {}
func (nullConn) WriteNull()                     {}
func (nullConn) WriteRaw([]byte)                {}
func (nullConn) WriteAny(any)                   {}
func (nullConn) Context() any                   { return nil }
func (nullConn) SetContext(any)                 {}
func (nullConn) SetReadBuffer(int)              {}
func (nullConn) Detach() redcon.DetachedConn    { return nil }
func (nullConn) ReadPipeline() []redcon.Command { return nil }
func (nullConn) PeekPipeline() []redcon.Command { return nil }
func (nullConn) NetConn() net.Conn              { return nil }
