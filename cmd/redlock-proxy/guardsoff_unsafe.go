//go:build unsafeguards

package main

import (
	"os"
	"strings"

	"github.com/rs/zerolog"
)

// guardsOffEnv names the environment variable that switches safety guards
// off (proxy.Guards lists them, comma-separated): only for the tests that
// show what each guard prevents, and only in a binary built with the
// unsafeguards tag (go build -tags unsafeguards); the production binary
// has no such switch (guardsoff.go). It is not a configuration key, so
// that no configuration file can carry it by mistake.
const guardsOffEnv = "REDLOCK_PROXY_UNSAFE_GUARDS_OFF"

func guardsOffFromEnv() []string {
	if v := os.Getenv(guardsOffEnv); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

// warnGuardsOff says, as the first thing in the log, that guards are off.
func warnGuardsOff(log zerolog.Logger, off []string) {
	if len(off) > 0 {
		log.Error().Strs("guards_off", off).Msg("UNSAFE: safety guards switched off by " + guardsOffEnv + ", for tests that show what they prevent; this proxy can grant a lock to two holders at once")
	}
}
