package qwen

import (
	"runtime"
	"sync/atomic"
	"time"
)

// team runs the parallel phases of a host step (hoststep.go) on the
// calling goroutine and a fixed set of helper goroutines. A batch-1 decode
// step is a few dozen phases of tens of microseconds each (the row blocks
// of one layer's matrix-vector products), so starting goroutines per phase
// (about a microsecond each, plus waking an idle thread) would be a large
// share of it: the helpers instead spin on a phase counter for a short
// while after each phase (linger) and only then sleep on a channel.
//
// A phase may name the weights of the phase expected next (after): a
// helper that finds no item left to claim reads them ahead — while the
// caller finishes its last items and then does the serial work between the
// two phases — until the next phase is posted, so that the next phase
// starts on weights already in the caches and the serial time overlaps
// with memory traffic.
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
	linger  atomic.Int64  // how long helpers poll for the next phase, ns
	helped  atomic.Int64  // items the helpers ran, all phases together
	items   int64         // items of all phases (the caller's count)
	quit    atomic.Bool
	helpers []*teamHelper
}

// teamPhase is one call of team.run.
type teamPhase struct {
	fn    func(worker, item int)
	items int
	gen   uint64
	after *teamAhead   // read ahead once the items are taken, or nil
	ahead atomic.Int64 // the next block of after to read
}

// teamAhead is memory to read ahead (see team): spans in the order the
// next phase reads them, in blocks that the helpers take in turn.
type teamAhead struct {
	spans [][]byte
}

// teamAheadBlock is the bytes a helper reads ahead between two looks at
// the phase counter (about 2 µs of streaming; 16 KiB blocks read at 25
// GB/s, 64 KiB ones at 33, see touchLines).
const teamAheadBlock = 64 << 10

// teamHelper is one helper goroutine's sleep state.
type teamHelper struct {
	asleep atomic.Bool // the helper is (about to be) blocked on wake
	wake   chan struct{}
}

// teamSpin is how many times the caller polls for the last items before
// it yields its thread.
const teamSpin = 1 << 14

// teamLinger is how long a helper polls for the next phase by default:
// the gaps between the phases of a prefill step (a GEMM on the backend's
// own pool in between, which a polling helper would slow down), and of a
// decode step on a machine where other processes want the cores (see
// hostStep). teamDecodeLinger is the linger of a decode step's phases
// otherwise: longer than any gap between two of them, the work between
// two decode steps included (sampling, Generate's bookkeeping), since a
// helper that went to sleep joins the next phase only some tens of
// microseconds after it starts.
const (
	teamLinger       = 20 * time.Microsecond
	teamDecodeLinger = 500 * time.Microsecond
)

// newTeam starts workers−1 helpers (workers ≤ 1: none; the caller runs
// every phase alone).
func newTeam(workers int) *team {
	t := &team{}
	t.linger.Store(int64(teamLinger))
	for w := 1; w < workers; w++ {
		h := &teamHelper{wake: make(chan struct{}, 1)}
		t.helpers = append(t.helpers, h)
		go t.loop(w, h)
	}
	return t
}

// workers returns the number of workers, the caller included.
func (t *team) workers() int { return 1 + len(t.helpers) }

// share returns the items of all phases so far and how many of them the
// helpers ran (up to the last phase that returned).
func (t *team) share() (items, helped int64) { return t.items, t.helped.Load() }

// setLinger sets how long the helpers poll for the next phase after one
// (from the next phase on).
func (t *team) setLinger(d time.Duration) { t.linger.Store(int64(d)) }

// run calls fn(worker, item) for every item < items, spread over the
// workers (worker 0 is the calling goroutine; each worker index runs on
// one goroutine at a time), and returns when all have returned.
func (t *team) run(items int, fn func(worker, item int)) { t.runAhead(items, fn, nil) }

// runAhead is run, after which (and while the caller finishes) the
// helpers read the spans of after ahead until the next phase (nil: none).
// after is only read, and must not be changed afterwards.
func (t *team) runAhead(items int, fn func(worker, item int), after *teamAhead) {
	if len(t.helpers) == 0 || items <= 1 {
		for it := range items {
			fn(0, it)
		}
		return
	}
	p := &teamPhase{fn: fn, items: items, gen: t.posted.Load() + 1, after: after}
	t.items += int64(items)
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

// work claims and runs items of phase p until none is left; then a
// helper reads p.after ahead.
func (t *team) work(w int, p *teamPhase) {
	ran := int64(0)
	for ; ; ran++ {
		c := t.claim.Load()
		if c>>32 != p.gen&0xffffffff || int(c&0xffffffff) >= p.items {
			if w != 0 {
				t.helped.Add(ran)
				if p.after != nil {
					t.readAhead(p)
				}
			}
			return
		}
		if !t.claim.CompareAndSwap(c, c+1) {
			ran--
			continue
		}
		p.fn(w, int(c&0xffffffff))
		t.done.Add(1)
	}
}

// readAhead reads the blocks of p.after not yet taken, one at a time,
// until none is left or a later phase is posted.
func (t *team) readAhead(p *teamPhase) {
	a := p.after
	for t.posted.Load() == p.gen {
		b := p.ahead.Add(1) - 1
		for _, s := range a.spans {
			n := int64(len(s)+teamAheadBlock-1) / teamAheadBlock
			if b >= n {
				b -= n
				continue
			}
			touchLines(s[b*teamAheadBlock : min(int64(len(s)), (b+1)*teamAheadBlock)])
			b = -1
			break
		}
		if b >= 0 {
			return // all taken
		}
	}
}

// touchSink keeps touchLines' loads.
var touchSink atomic.Uint32

// touchLines reads one byte of every 64-byte line of s, bringing s into
// the caches: as 4 ascending streams, one per quarter of s, which the
// hardware prefetchers follow (one core, 64 KiB blocks: 33 GB/s, where one
// stream reached 21–22 and vek32.Sum 25).
func touchLines(s []byte) {
	var sum byte
	n := len(s) / 4 &^ 63 // bytes per stream
	if n > 0 {
		a := s[: 4*n : 4*n]
		for i := 0; i < n; i += 64 {
			sum += a[i] + a[n+i] + a[2*n+i] + a[3*n+i]
		}
	}
	for i := 4 * n; i < len(s); i += 64 {
		sum += s[i]
	}
	if sum == 1 {
		touchSink.Store(1)
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
// (polling for the linger, then asleep), work on it.
//
// The sleep handshake: the helper marks itself asleep, then checks the
// counter once more. If a phase was posted meanwhile, whichever of the
// two clears the mark first decides: the helper (it goes on without
// sleeping) or the caller (it sends a wake-up, which the helper takes).
func (t *team) loop(w int, h *teamHelper) {
	seen := uint64(0)
	for {
		deadline := time.Now().Add(time.Duration(t.linger.Load()))
		for spins := 1; t.posted.Load() == seen; spins++ {
			if spins%64 != 0 || time.Now().Before(deadline) {
				continue
			}
			h.asleep.Store(true)
			if t.posted.Load() == seen || !h.asleep.CompareAndSwap(true, false) {
				<-h.wake
			}
			break
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
