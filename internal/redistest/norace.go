//go:build !race

package redistest

// RaceEnabled reports that the test binary is built with -race (race.go).
const RaceEnabled = false
