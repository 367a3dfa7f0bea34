package vector

import (
	"sync"
	"testing"
)

func TestForChunksCoversEachIndexOnce(t *testing.T) {
	for _, c := range []struct{ n, chunk, workers int }{{0, 4, 2}, {1, 4, 2}, {10, 3, 1}, {10, 3, 4}, {1000, 64, 3}, {5, 0, 2}, {7, 100, 8}} {
		var mu sync.Mutex
		seen := make([]int, c.n)
		used := map[int]bool{}
		forChunks(c.n, c.chunk, c.workers, func(w, lo, hi int) {
			mu.Lock()
			defer mu.Unlock()
			used[w] = true
			if lo >= hi || w < 0 || w >= max(1, c.workers) {
				t.Errorf("%+v: chunk [%d,%d) on worker %d", c, lo, hi, w)
			}
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		for i, s := range seen {
			if s != 1 {
				t.Fatalf("%+v: index %d covered %d times", c, i, s)
			}
		}
	}
}
