//go:build !linux

package proxy

import "net"

// peerClosed is not known on this platform without reading.
func (c *clientConn) peerClosed() bool { return false }

// idleConnBroken is not known on this platform without reading: a closed
// backend connection shows as the error of the command sent on it.
func idleConnBroken(net.Conn) bool { return false }
