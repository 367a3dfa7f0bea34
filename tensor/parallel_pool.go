package tensor

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A spin pool runs short parallel loops, such as the matrix-vector products
// of batch-1 decoding (one every 20–300 µs, 43 per token of the 25M model),
// on helper goroutines that outlive the call. Starting a goroutine per call
// and waiting for it wakes a parked thread each time, which on the 2-vCPU
// Firecracker VM costs several microseconds (BenchmarkPoolFor: a loop of
// two 1.5 µs units took 4.7 µs on new goroutines, 2.1 µs on the pool), and
// the helper joins late. A helper instead polls for the next loop for
// poolSpin after it finishes one, and only then parks; the next loop wakes
// the parked ones through a channel, as a new goroutine would have been
// woken (about as slow: the after-pause case of BenchmarkPoolFor).
//
// The loop's units are taken in turn from one atomic counter by the
// caller and the helpers alike, so a helper that is late (parked, or its
// thread preempted by another process) takes fewer units instead of holding
// the caller up: the caller waits only for units a helper has already
// started. Only one loop runs on the pool at a time; a loop that finds it
// busy (another goroutine's) runs on goroutines of its own, as ParallelFor.

// poolSpin is how long a helper polls for the next loop before it parks:
// longer than the gaps between the products of a decode step, short
// enough that an idle process gives its cores back at once.
const poolSpin = 200 * time.Microsecond

// spinPool is the helpers of sharedPool.
type spinPool struct {
	busy    sync.Mutex // held while a loop runs
	seq     atomic.Uint64
	job     atomic.Pointer[poolJob]
	helpers []poolHelper
}

// poolHelper is one helper's parking state: parked is 1 while it waits on
// wake (or is about to), and whoever moves it back to 0 owns the wake-up.
type poolHelper struct {
	parked atomic.Int32
	wake   chan struct{}
}

// poolJob is one loop: units [0, n) of fn, of which slots more helpers
// may join.
type poolJob struct {
	fn     func(unit int)
	n      int64
	next   atomic.Int64 // next unit to take
	done   atomic.Int64 // units finished
	slots  atomic.Int32 // helpers that may still join
	waiter atomic.Int32 // 1: the caller sleeps on wake; 2: all done
	wake   chan struct{}
}

// sharedPool is the process's spin pool, GOMAXPROCS-1 helpers (at the
// first use) that start on the first loop.
var sharedPool = sync.OnceValue(func() *spinPool {
	p := &spinPool{helpers: make([]poolHelper, max(runtime.GOMAXPROCS(0)-1, 0))}
	for i := range p.helpers {
		p.helpers[i].wake = make(chan struct{}, 1)
		go p.helper(&p.helpers[i])
	}
	return p
})

// poolFor runs fn(u) for every unit u in [0, n), on the calling goroutine
// and up to workers-1 others (workers ≤ 0: GOMAXPROCS), each taking the
// next unit in turn, and returns when all have finished. Units run in no
// fixed order and concurrently, so fn must only write what its unit owns.
func poolFor(n, workers int, fn func(unit int)) {
	w := min(Workers(workers), n)
	if w <= 1 {
		for u := range n {
			fn(u)
		}
		return
	}
	p := sharedPool()
	if len(p.helpers) == 0 || !p.busy.TryLock() {
		spawnFor(n, w, fn)
		return
	}
	j := &poolJob{fn: fn, n: int64(n)}
	j.slots.Store(int32(min(w-1, len(p.helpers))))
	p.job.Store(j)
	p.seq.Add(1)
	for i := range p.helpers {
		h := &p.helpers[i]
		if h.parked.CompareAndSwap(1, 0) {
			h.wake <- struct{}{}
		}
	}
	j.work()
	j.wait()
	p.job.Store(nil) // a late helper finds nothing; fn is not kept alive
	p.busy.Unlock()
}

// spawnFor is poolFor on w new goroutines (the caller one of them).
func spawnFor(n, w int, fn func(unit int)) {
	j := &poolJob{fn: fn, n: int64(n)}
	var wg sync.WaitGroup
	for range w - 1 {
		wg.Go(j.work)
	}
	j.work()
	wg.Wait()
}

// work runs units of j until none is left.
func (j *poolJob) work() {
	for {
		u := j.next.Add(1) - 1
		if u >= j.n {
			return
		}
		j.fn(int(u))
		if j.done.Add(1) == j.n && j.waiter.Swap(2) == 1 {
			j.wake <- struct{}{}
		}
	}
}

// wait returns when every unit of j has finished: it polls for up to
// poolSpin (a helper's last unit is short), then sleeps until the helper
// that finishes the last one wakes it.
func (j *poolJob) wait() {
	if j.done.Load() == j.n {
		return
	}
	deadline := time.Now().Add(poolSpin)
	for i := 1; j.done.Load() != j.n; i++ {
		if i%64 == 0 && time.Now().After(deadline) {
			j.wake = make(chan struct{}, 1)
			if j.waiter.CompareAndSwap(0, 1) {
				<-j.wake
			}
			return
		}
	}
}

// helper runs the pool's loops: it joins each new one (while it has
// slots), then polls for the next for poolSpin, yielding its P now and
// then to other goroutines, and parks.
func (p *spinPool) helper(h *poolHelper) {
	seen := p.seq.Load()
	for {
		deadline := time.Now().Add(poolSpin)
		for i := 1; p.seq.Load() == seen; i++ {
			if i%64 != 0 {
				continue
			}
			if time.Now().Before(deadline) {
				if i%1024 == 0 {
					runtime.Gosched() // let this P's other goroutines run
				}
				continue
			}
			// Park: announce it, then look once more, so that a loop
			// published in between either is seen here or wakes us.
			h.parked.Store(1)
			if p.seq.Load() != seen && h.parked.CompareAndSwap(1, 0) {
				break
			}
			<-h.wake
			break
		}
		seen = p.seq.Load()
		if j := p.job.Load(); j != nil && j.slots.Add(-1) >= 0 {
			j.work()
		}
	}
}
