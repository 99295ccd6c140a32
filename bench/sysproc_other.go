//go:build !linux

package main

import "syscall"

// childAttr leaves the child's attributes as they are.
func childAttr() *syscall.SysProcAttr { return nil }
