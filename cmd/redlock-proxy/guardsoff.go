//go:build !unsafeguards

package main

import "github.com/rs/zerolog"

// The production binary has no switch for the safety guards: only a
// binary built with the unsafeguards tag, for the tests that show what
// each guard prevents, reads one (guardsoff_unsafe.go). Here the
// configuration's GuardsOff stays empty, whatever the environment holds.

func guardsOffFromEnv() []string { return nil }

func warnGuardsOff(zerolog.Logger, []string) {}
