package qwen

import (
	"runtime"
	"sync/atomic"
)

// team runs the parallel phases of a host decode step (hoststep.go) on the
// calling goroutine and a fixed set of helper goroutines. A batch-1 decode
// step is a few dozen phases of tens of microseconds each (the row blocks
// of one layer's matrix-vector products), so starting goroutines per phase
// (about a microsecond each, plus waking an idle thread) would be a large
// share of it: the helpers instead spin on a phase counter for a short
// while after each phase and only then sleep on a channel, and the caller
// spins until they report the phase done.
//
// A team is used by one goroutine at a time (its Session's).
type team struct {
	fn      func(worker int) // the phase being run; set before posted grows
	posted  atomic.Uint64    // phases posted so far
	quit    atomic.Bool
	helpers []*teamHelper
}

// teamHelper is one helper goroutine's state.
type teamHelper struct {
	done   atomic.Uint64 // phases this helper has finished
	asleep atomic.Bool   // the helper is (about to be) blocked on wake
	wake   chan struct{}
}

// teamSpin is how many times a helper polls the phase counter before it
// sleeps (tens of microseconds: longer than the serial work between two
// phases of a step, shorter than sampling a token between steps over a
// large vocabulary), and how many times the caller polls a helper before
// it starts yielding its thread.
const teamSpin = 1 << 14

// newTeam starts workers−1 helpers (workers ≤ 1: none; the caller runs
// every phase alone).
func newTeam(workers int) *team {
	t := &team{}
	for w := 1; w < workers; w++ {
		h := &teamHelper{wake: make(chan struct{}, 1)}
		t.helpers = append(t.helpers, h)
		go t.loop(w, h)
	}
	return t
}

// workers returns the number of workers, the caller included.
func (t *team) workers() int { return 1 + len(t.helpers) }

// run calls fn(w) for every worker w < workers() concurrently, fn(0) on the
// calling goroutine, and returns when all have returned.
func (t *team) run(fn func(worker int)) {
	if len(t.helpers) == 0 {
		fn(0)
		return
	}
	t.fn = fn
	gen := t.posted.Add(1)
	t.wakeAll()
	fn(0)
	for _, h := range t.helpers {
		for spins := 0; h.done.Load() < gen; spins++ {
			if spins >= teamSpin {
				runtime.Gosched()
			}
		}
	}
	t.fn = nil
}

// wakeAll wakes the helpers that went to sleep.
func (t *team) wakeAll() {
	for _, h := range t.helpers {
		if h.asleep.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
	}
}

// stop ends the helpers (the team is unusable afterwards).
func (t *team) stop() {
	if len(t.helpers) == 0 || t.quit.Swap(true) {
		return
	}
	t.posted.Add(1)
	t.wakeAll()
}

// loop is helper w's life: wait for phase gen (spinning, then asleep), run
// it, report it done.
//
// The sleep handshake: the helper marks itself asleep, then checks the
// counter once more. If the phase was posted meanwhile, whichever of the
// two clears the mark first decides: the helper (it goes on without
// sleeping) or the caller (it sends a wake-up, which the helper takes).
func (t *team) loop(w int, h *teamHelper) {
	for gen := uint64(1); ; gen++ {
		for spins := 0; t.posted.Load() < gen; spins++ {
			if spins < teamSpin {
				continue
			}
			h.asleep.Store(true)
			if t.posted.Load() < gen || !h.asleep.CompareAndSwap(true, false) {
				<-h.wake
			}
			spins = 0
		}
		if t.quit.Load() {
			return
		}
		t.fn(w)
		h.done.Store(gen)
	}
}
