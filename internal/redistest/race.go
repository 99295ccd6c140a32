//go:build race

package redistest

// RaceEnabled reports that the test binary is built with -race, where the
// code runs several times slower: the few tests whose value is a
// measurement under load, not the concurrency the race detector checks,
// skip themselves under it (docs/development.md).
const RaceEnabled = true
