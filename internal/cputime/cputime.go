// Package cputime reads the CPU time of this process, for benchmarks on
// shared machines: other processes inflate wall time far more than the CPU
// time a measured piece of work uses.
package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time (user + system) this process has used so
// far; 0 when the system does not say.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
