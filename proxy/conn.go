package proxy

// client is the per-connection state.
type client struct {
	id      int64
	name    string
	libName string
	libVer  string
	pinned  *backendConn // backend connection owned by this client, once it needs one
	multi   bool         // inside MULTI
	dirty   bool         // a command was refused inside MULTI: EXEC must abort
	authed  bool         // AUTH (or HELLO … AUTH) succeeded
}
