// Package lockscripts recognises the lock scripts of the lock libraries:
// it reads a script's tokens as Lua 5.1 does (lex.go), folds its spellings
// onto one normalised text built from them (normalize.go), keys it by the
// SHA1 of that text, and maps it to a Spec, the quorum operation it stands
// for and the replies its library expects. A text it cannot read with
// certainty is no script's.
//
// One vocabulary declares every script: the operator's [[scripts]] entries
// (Config, read by config.go) and the libraries' scripts, declared in the
// same keys in builtin.toml (builtin.go reads it at start, through the same
// Config.Spec), each known by digest and by the SHA1 of the exact text its
// library sends. The operator's entries add to the libraries' and take
// their place for the same text. Cache (cache.go) holds the scripts loaded
// or evaluated through the proxy, for EVALSHA.
//
// Running the operations is the proxy's (package proxy, eval.go); this
// package imports neither the proxy nor its RESP server.
package lockscripts
