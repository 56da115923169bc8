package main

import (
	"syscall"
	"testing"
	"time"
)

// threadCPU: the process's user + system CPU time so far.
func threadCPU(t *testing.T) time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		t.Fatal(err)
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}
