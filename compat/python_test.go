package compat

import "testing"

// TestPythonRedisPy runs redis-py's Lock (Debian's python3-redis) through the
// proxy binary and checks the lock on the masters.
func TestPythonRedisPy(t *testing.T) {
	need(t, "/usr/bin/python3")
	s := startStack(t)
	run(t, s, "python", "/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_redispy.py")
}
