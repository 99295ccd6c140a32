package redistest

import "strings"

// MetricValue finds one series (a name, with its labels if it has any:
// `name{label="v"}`) in a Prometheus text exposition such as the proxy's
// /metrics, and returns its value as written.
func MetricValue(body, series string) (string, bool) {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v, true
		}
	}
	return "", false
}
