package tensor

import (
	"runtime"
	"sync"
)

// Workers resolves a requested worker count: n ≤ 0 means GOMAXPROCS.
func Workers(n int) int {
	if n <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return n
}

// ParallelFor splits [0, n) into at most workers contiguous ranges whose
// inner boundaries are multiples of align (align ≤ 0: 1), runs fn(worker,
// lo, hi) for each range on its own goroutine and waits. With one range fn
// runs on the calling goroutine. Ranges are never empty.
func ParallelFor(n, workers, align int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	align = max(align, 1)
	w := Workers(workers)
	units := (n + align - 1) / align
	w = min(w, units)
	if w <= 1 {
		fn(0, 0, n)
		return
	}
	per, extra := units/w, units%w
	var wg sync.WaitGroup
	lo := 0
	for i := range w {
		u := per
		if i < extra {
			u++
		}
		hi := min(n, lo+u*align)
		if i == w-1 {
			hi = n
		}
		wg.Add(1)
		go func(i, lo, hi int) {
			defer wg.Done()
			fn(i, lo, hi)
		}(i, lo, hi)
		lo = hi
	}
	wg.Wait()
}

// parallelCopyBytes is the size from which Copy splits a copy over workers.
const parallelCopyBytes = 1 << 20

// Copy is the built-in copy(dst, src) for float32s, split into contiguous
// ranges (cache-line aligned) over up to workers goroutines (≤ 0:
// GOMAXPROCS) when it moves at least 1 MiB: one core does not saturate
// the memory bandwidth on a large copy such as a forward pass's logits
// (2048 × 16384 floats, 134 MB). It returns the number of elements
// copied, min(len(dst), len(src)).
func Copy(dst, src []float32, workers int) int {
	n := min(len(dst), len(src))
	if 4*n < parallelCopyBytes {
		return copy(dst, src)
	}
	ParallelFor(n, workers, 16, func(_, lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
	return n
}
