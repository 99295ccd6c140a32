// Package peek tells what a connection has waiting to be read, without
// taking it and without waiting: whether the other side closed it, sent
// something, or nothing is there. The proxy uses it for clients that left
// while they wait, and both the proxy and the redlock package for
// connections a server closed while they sat idle.
package peek

// State is what a connection has waiting.
type State int

const (
	Unknown State = iota // cannot be told on this platform or connection
	Nothing              // nothing to read now
	Data                 // bytes are waiting
	EOF                  // the other side closed it
	Failed               // the socket reports an error
)

// Broken reports whether an idle connection, one with no reply owed to it,
// cannot be used: closed, failed, or holding bytes nobody asked for.
func (s State) Broken() bool { return s == EOF || s == Data || s == Failed }
