package vector

import (
	"sync"
	"sync/atomic"
)

// forChunks runs fn(worker, lo, hi) over [0, n) cut into chunks of size
// chunk, on workers goroutines that take the next chunk as they finish
// one, so a goroutine that the OS runs late does not hold the others up.
// With one worker it runs on the calling goroutine. Results must not
// depend on which worker ran a chunk (the per-worker top-k selections are
// merged with a total order, so they do not).
func forChunks(n, chunk, workers int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	chunk = max(chunk, 1)
	chunks := (n + chunk - 1) / chunk
	workers = max(1, min(workers, chunks))
	if workers == 1 {
		for lo := 0; lo < n; lo += chunk {
			fn(0, lo, min(n, lo+chunk))
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c := int(next.Add(1) - 1)
				if c >= chunks {
					return
				}
				lo := c * chunk
				fn(w, lo, min(n, lo+chunk))
			}
		}()
	}
	wg.Wait()
}
