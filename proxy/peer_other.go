//go:build !linux

package proxy

// peerClosed is not known on this platform without reading.
func (c *clientConn) peerClosed() bool { return false }
