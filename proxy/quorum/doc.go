// Package quorum holds the commands the quorum serves, apart from any
// client session: it parses their arguments (SET's and GETEX's options,
// expiries), runs them on the engine (package redlock/engine) and forms
// their replies. Package proxy's handlers call it with what a command
// needs of the session (the client's engine, whether the backend holds
// data beside the locks) and act on what it returns (leases, mixed mode's
// mirrors, routes); this package never sees a client connection's state or
// the passthrough backend, and does not import package proxy.
package quorum
