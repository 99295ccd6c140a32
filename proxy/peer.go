package proxy

import (
	"crypto/tls"

	"github.com/redlock-proxy/redlock-proxy/internal/peek"
)

// peerClosed reports whether the client has closed its side of the
// connection: a read would return end of file now. It looks without
// taking anything and without waiting. Input the client has already sent
// counts as alive; a TLS client is not known without reading.
func (c *clientConn) peerClosed() bool {
	if _, ok := c.Conn.(*tls.Conn); ok {
		return false
	}
	return peek.Of(c.Conn) == peek.EOF
}
