// Package backend holds the proxy's connections to the passthrough
// backend: the pools of raw connections, in RESP2 or RESP3 and in any
// database (backend.go), which also give clients their own (pinned)
// connections; the shared connection that plain commands of every client
// travel on (mux.go); a Sentinel group as the backend, whose
// connections follow its primary (sentinel.go); and a Redis Cluster as
// the backend: its nodes' connections, the slot map read from CLUSTER
// SLOTS, and the MOVED, ASK and TRYAGAIN followed (cluster.go).
//
// Replies are returned raw, to be copied to the client byte for byte.
// What a command is, which client sent it and where it is served is
// package proxy's: this package imports proxy/wire and redlock/engine,
// never proxy.
package backend
