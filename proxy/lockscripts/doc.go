// Package lockscripts recognises the lock scripts of the lock libraries:
// it folds a script's spellings onto one normalised text (normalize.go),
// keys it by the SHA1 of that text, and maps it to a Spec, the quorum
// operation it stands for and the replies its library expects. The
// libraries' scripts are known by digest and by the SHA1 of the exact text
// each sends (builtin.go); the operator's [[scripts]] entries (Config,
// config.go) add to them and override them; Cache (cache.go) holds the
// scripts loaded or evaluated through the proxy, for EVALSHA.
//
// Running the operations is the proxy's (package proxy, eval.go); this
// package imports neither the proxy nor its RESP server.
package lockscripts
