// Package wire is the proxy's RESP framing: a client connection whose input
// is checked against Redis's limits before it is parsed (Conn, Listener,
// Limits, ProtoError), the parser of a read's commands (Parse), the reader
// of a backend's replies (ReadReply) and the encoding of requests
// (AppendRequest, AppendCommand), Buf, where replies are written in RESP2
// or RESP3, and the stand-ins for a client connection (Discard, Capture,
// Tee, BufConn) for replies the proxy does not pass on as they come. It
// knows nothing of locks or of the masters.
package wire
