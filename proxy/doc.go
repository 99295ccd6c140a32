// Package proxy serves the Redis protocol in front of N independent Redis
// masters: lock commands and recognised lock scripts run as Redlock quorum
// operations (package redlock), reads and writes of lock keys are answered
// as one store, and every other command passes through to one backend. The
// proxy's own LOCK.* commands add fencing numbers, waiting, reentrancy and
// connection-bound leases (nativecmds.go).
package proxy
