// Package redlock takes locks with the Redlock algorithm over N
// independent Redis masters. Its quorum engine, and for now the whole API,
// is package redlock/engine.
package redlock
