//go:build linux

package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithTest has cmd's process killed when the test binary that started it
// dies: a panic or os.Exit skips the cleanups that would stop it, and it
// would keep its port. (The kernel sends the signal when the OS thread that
// started the process exits; Go's threads outlive their goroutines unless
// one is locked to its thread, which no test does.)
func dieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
