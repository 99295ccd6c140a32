package main

import "syscall"

// childAttr puts a child in its own process group (a Ctrl-C reaches the
// benchmark, which stops it) and kills it if the benchmark dies first.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
