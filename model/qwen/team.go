package qwen

import (
	"runtime"
	"sync/atomic"
)

// team runs the parallel phases of a host step (hoststep.go) on the
// calling goroutine and a fixed set of helper goroutines. A batch-1 decode
// step is a few dozen phases of tens of microseconds each (the row blocks
// of one layer's matrix-vector products), so starting goroutines per phase
// (about a microsecond each, plus waking an idle thread) would be a large
// share of it: the helpers instead spin on a phase counter for a short
// while after each phase and only then sleep on a channel.
//
// A phase is a number of items that the workers claim one at a time, the
// caller among them, and the caller returns once every item is finished —
// not once every helper has looked: on a loaded machine a helper whose
// thread is descheduled simply claims nothing, and the caller does its
// share. A claim names its phase (the high half of the claim counter), so
// a helper that wakes up late cannot take an item of a later phase for the
// function of an earlier one.
//
// A team is used by one goroutine at a time (its Session's).
type team struct {
	phase   atomic.Pointer[teamPhase]
	claim   atomic.Uint64 // phase generation << 32 | next item
	done    atomic.Int64  // items of the current phase finished
	posted  atomic.Uint64 // generation of the last phase posted
	quit    atomic.Bool
	helpers []*teamHelper
}

// teamPhase is one call of team.run.
type teamPhase struct {
	fn    func(worker, item int)
	items int
	gen   uint64
}

// teamHelper is one helper goroutine's sleep state.
type teamHelper struct {
	asleep atomic.Bool // the helper is (about to be) blocked on wake
	wake   chan struct{}
}

// teamSpin is how many times a helper polls the phase counter before it
// sleeps (some tens of microseconds: longer than the serial work between
// two phases of a step), and how many times the caller polls for the last
// items before it yields its thread.
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

// run calls fn(worker, item) for every item < items, spread over the
// workers (worker 0 is the calling goroutine; each worker index runs on
// one goroutine at a time), and returns when all have returned.
func (t *team) run(items int, fn func(worker, item int)) {
	if len(t.helpers) == 0 || items <= 1 {
		for it := range items {
			fn(0, it)
		}
		return
	}
	p := &teamPhase{fn: fn, items: items, gen: t.posted.Load() + 1}
	t.done.Store(0)
	t.claim.Store(p.gen << 32)
	t.phase.Store(p)
	t.posted.Store(p.gen)
	t.wakeAll()
	t.work(0, p)
	for spins := 0; t.done.Load() < int64(items); spins++ {
		if spins >= teamSpin {
			runtime.Gosched() // a helper's thread was descheduled mid-item
		}
	}
	// Drop fn: what it captures (a Session) must not stay reachable from
	// the helpers, or an unclosed Session's cleanup would never run.
	t.phase.Store(nil)
}

// work claims and runs items of phase p until none is left.
func (t *team) work(w int, p *teamPhase) {
	for {
		c := t.claim.Load()
		if c>>32 != p.gen&0xffffffff || int(c&0xffffffff) >= p.items {
			return
		}
		if !t.claim.CompareAndSwap(c, c+1) {
			continue
		}
		p.fn(w, int(c&0xffffffff))
		t.done.Add(1)
	}
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

// loop is helper w's life: wait for a phase newer than the last it saw
// (spinning, then asleep), work on it.
//
// The sleep handshake: the helper marks itself asleep, then checks the
// counter once more. If a phase was posted meanwhile, whichever of the
// two clears the mark first decides: the helper (it goes on without
// sleeping) or the caller (it sends a wake-up, which the helper takes).
func (t *team) loop(w int, h *teamHelper) {
	seen := uint64(0)
	for {
		for spins := 0; t.posted.Load() == seen; spins++ {
			if spins < teamSpin {
				continue
			}
			h.asleep.Store(true)
			if t.posted.Load() == seen || !h.asleep.CompareAndSwap(true, false) {
				<-h.wake
			}
			spins = 0
		}
		if t.quit.Load() {
			return
		}
		seen = t.posted.Load()
		if p := t.phase.Load(); p != nil {
			t.work(w, p)
		}
	}
}
