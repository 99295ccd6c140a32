// Package redlock implements the Redlock distributed lock algorithm over N
// independent Redis masters: quorum acquire with drift-adjusted validity,
// release and extend by token, majority reads of lock keys, a restart
// guard that withholds the votes of masters that may have lost their data,
// a clock check that treats a master whose clock jumps like a restarted
// one (clock.go), and fenced locks whose every grant carries a number larger
// than all earlier grants of the key (fence.go).
//
// Commands bound for one master from concurrent operations are sent
// together, as pipelines on a connection per master (batch.go), and
// every operation answers as soon as its outcome is decided.
//
// The package has no logging and no configuration files; it can be used
// without the proxy that is built on it.
package redlock
