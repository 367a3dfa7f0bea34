package gocpu

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// OpTime is the time one op kind took over the executions profiled.
type OpTime struct {
	// Op is the op type; Where is "gocpu" for ops this backend runs and
	// "simplego" for delegated ones.
	Op, Where string
	// Size is the elements each call wrote, when the profile groups by
	// output size ("profile=shapes"; 0 otherwise).
	Size  int
	Calls int
	Time  time.Duration
	// Elements is the number of elements the op wrote, over all calls.
	Elements int64
}

// profiler accumulates per-op-kind wall time ("profile" option). Every
// delegated op then runs as its own simplego segment so that it can be
// timed alone; the plan is otherwise unchanged, and results are identical.
type profiler struct {
	mu  sync.Mutex
	ops map[profKey]*OpTime
	// bySize groups calls by output size too ("profile=shapes").
	bySize bool
}

type profKey struct {
	op, where string
	size      int
}

func (p *profiler) add(op, where string, d time.Duration, elems int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := profKey{op: op, where: where}
	if p.bySize {
		k.size = elems
	}
	t := p.ops[k]
	if t == nil {
		t = &OpTime{Op: op, Where: where, Size: k.size}
		p.ops[k] = t
	}
	t.Calls++
	t.Time += d
	t.Elements += int64(elems)
}

// Profile returns the time per op kind accumulated since the backend was
// created or last reset, longest first; nil unless the backend was created
// with the "profile" option (GOMLX_BACKEND=gocpu:profile). Reset clears the
// counts (to profile one phase, such as a training step after its warm-up).
func (b *Backend) Profile(reset bool) []OpTime {
	p := b.prof
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]OpTime, 0, len(p.ops))
	for _, t := range p.ops {
		out = append(out, *t)
	}
	if reset {
		p.ops = map[profKey]*OpTime{}
	}
	slices.SortFunc(out, func(a, b OpTime) int {
		if c := cmp.Compare(b.Time, a.Time); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Op+a.Where, b.Op+b.Where); c != 0 {
			return c
		}
		return cmp.Compare(a.Size, b.Size)
	})
	return out
}
