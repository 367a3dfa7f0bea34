package cputime

import (
	"testing"
	"time"
)

// TestProcessAdvances: spinning for 30 ms of wall time adds CPU time, and
// not more than the wall time times the threads that could have run.
func TestProcessAdvances(t *testing.T) {
	t0, w0 := Process(), time.Now()
	x := 0.0
	for time.Since(w0) < 30*time.Millisecond {
		for i := range 1000 {
			x += float64(i)
		}
	}
	d := Process() - t0
	if x == 0 || d <= 0 {
		t.Fatalf("CPU time advanced by %v while spinning", d)
	}
	if wall := time.Since(w0); d > 64*wall {
		t.Fatalf("CPU time %v for %v of wall time", d, wall)
	}
}
