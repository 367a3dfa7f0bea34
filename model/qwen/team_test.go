package qwen

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestTeam: every item of every phase runs exactly once, on a worker
// index below workers(), whether the helpers are spinning (phases back to
// back) or asleep (a pause longer than their spin between phases), and
// stop ends the helpers.
func TestTeam(t *testing.T) {
	for _, tc := range []struct {
		workers, phases, items int
		pause                  time.Duration
	}{
		{1, 20, 7, 0}, {2, 2000, 13, 0}, {2, 50, 1, 0}, {3, 500, 64, 0}, {2, 20, 16, 2 * time.Millisecond}, {4, 10, 0, 0},
	} {
		t.Run(fmt.Sprintf("workers%d_items%d_pause%v", tc.workers, tc.items, tc.pause), func(t *testing.T) {
			before := runtime.NumGoroutine()
			tm := newTeam(tc.workers)
			if tm.workers() != max(tc.workers, 1) {
				t.Fatalf("workers() = %d, want %d", tm.workers(), tc.workers)
			}
			for p := range tc.phases {
				counts := make([]atomic.Int32, tc.items)
				var badWorker atomic.Int32
				tm.run(tc.items, func(w, it int) {
					if w < 0 || w >= tm.workers() {
						badWorker.Store(int32(w) + 1)
					}
					counts[it].Add(1)
				})
				if badWorker.Load() != 0 {
					t.Fatalf("phase %d: worker index %d", p, badWorker.Load()-1)
				}
				for it := range counts {
					if c := counts[it].Load(); c != 1 {
						t.Fatalf("phase %d: item %d ran %d times", p, it, c)
					}
				}
				if tc.pause > 0 {
					time.Sleep(tc.pause)
				}
			}
			tm.stop()
			for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d goroutines after stop, %d before the team", runtime.NumGoroutine(), before)
				}
			}
		})
	}
}
