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

// TestTeamAhead: phases that read the next one's memory ahead still run
// every item exactly once, whatever the spans (empty, shorter than a line,
// not a multiple of a block) and however long the gap between phases;
// share counts the items of the phases posted to the helpers; a readAhead
// over a current phase takes every block, and one over a phase already
// followed by another takes none.
func TestTeamAhead(t *testing.T) {
	var spans [][]byte
	for _, n := range []int{0, 1, 63, 64, 65, teamAheadBlock - 1, teamAheadBlock, teamAheadBlock + 1, 100_000} {
		spans = append(spans, make([]byte, n))
	}
	blocks := int64(0)
	for _, s := range spans {
		blocks += int64((len(s) + teamAheadBlock - 1) / teamAheadBlock)
	}
	after := &teamAhead{spans: spans}
	for _, workers := range []int{1, 2, 3} {
		tm := newTeam(workers)
		tm.setLinger(teamDecodeLinger)
		posted := int64(0)
		for p := range 300 {
			items := p%17 + 1
			if workers > 1 && items > 1 {
				posted += int64(items)
			}
			counts := make([]atomic.Int32, items)
			tm.runAhead(items, func(_, it int) { counts[it].Add(1) }, after)
			for it := range counts {
				if c := counts[it].Load(); c != 1 {
					t.Fatalf("workers %d phase %d: item %d ran %d times", workers, p, it, c)
				}
			}
			if p%50 == 0 {
				time.Sleep(time.Millisecond) // the helpers read everything ahead, or sleep
			}
		}
		if items, helped := tm.share(); items != posted || helped < 0 || helped > items {
			t.Errorf("workers %d: share() = %d items, %d helped; want %d items", workers, items, helped, posted)
		}
		tm.stop()
	}

	tm := &team{}
	tm.posted.Store(7)
	p := &teamPhase{gen: 7, after: after}
	tm.readAhead(p)
	if got := p.ahead.Load(); got != blocks+1 {
		t.Errorf("readAhead of the current phase took %d blocks, want %d (and one look past them)", got, blocks+1)
	}
	p = &teamPhase{gen: 6, after: after}
	tm.readAhead(p)
	if got := p.ahead.Load(); got != 0 {
		t.Errorf("readAhead of a phase already followed took %d blocks, want 0", got)
	}
}
