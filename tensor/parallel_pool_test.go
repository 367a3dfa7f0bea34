package tensor

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolFor checks that poolFor runs every unit exactly once and returns
// only after all have finished, for unit counts 0…1000 and 1–3 workers;
// with a pause longer than poolSpin before some calls (the helpers have
// parked and are woken); and from several goroutines at once (all but one
// find the pool busy and start goroutines of their own).
func TestPoolFor(t *testing.T) {
	check := func(t *testing.T, n, workers int) {
		t.Helper()
		hits := make([]atomic.Int32, n)
		poolFor(n, workers, func(u int) {
			if u%7 == 3 {
				time.Sleep(time.Microsecond) // finish out of order
			}
			hits[u].Add(1)
		})
		for u := range hits {
			if h := hits[u].Load(); h != 1 {
				t.Fatalf("n=%d workers=%d: unit %d ran %d times", n, workers, u, h)
			}
		}
	}
	for _, n := range []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 100, 1000} {
		for _, workers := range []int{0, 1, 2, 3} {
			t.Run(fmt.Sprintf("n%d/w%d", n, workers), func(t *testing.T) {
				check(t, n, workers)
				if n == 17 {
					time.Sleep(2 * poolSpin)
					check(t, n, workers)
				}
			})
		}
	}
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for i := range 200 {
					check(t, 1+i%40, 2)
				}
			})
		}
		wg.Wait()
	})
}

// BenchmarkPoolFor times a loop of two units of about 1.5 µs each on the
// spin pool and on two new goroutines (spawnFor), back to back and after a
// pause longer than poolSpin (helpers parked), in wall time.
//
//	go test -run '^$' -bench PoolFor ./tensor/
func BenchmarkPoolFor(b *testing.B) {
	var sink [2][8]float64 // a cache line each
	unit := func(u int) {
		x := 1.0
		for range 1000 {
			x = x*1.0000001 + 1e-9
		}
		sink[u%2][0] += x
	}
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"pool", func() { poolFor(2, 2, unit) }},
		{"spawn", func() { spawnFor(2, 2, unit) }},
	} {
		b.Run(c.name+"/back-to-back", func(b *testing.B) {
			for b.Loop() {
				c.run()
			}
		})
		b.Run(c.name+"/after-pause", func(b *testing.B) {
			var d time.Duration
			for b.Loop() {
				time.Sleep(2 * poolSpin)
				t0 := time.Now()
				c.run()
				d += time.Since(t0)
			}
			b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "ns/call")
		})
	}
}
