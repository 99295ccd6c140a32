//go:build !unix

package main

import "errors"

func raiseNoFile(uint64) (uint64, error) { return 0, errors.New("not supported on this system") }
