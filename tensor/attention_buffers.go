package tensor

import "sync"

// AttentionBuffers keeps the working buffers of Attention calls (per
// worker the packed K and V of one KV group, one block of query rows, one
// tile of scores and their gradient, the dKᵀ and dVᵀ accumulators: about
// 0.3 MB forward and 0.6 MB backward at the 25M model's layer) and the
// rows' mask ranges for the next call that shares it, instead of
// allocating them per call (fresh memory costs first-touch page faults).
// Every buffer is written before it is read within a call, so results do
// not depend on what an earlier call left in them (TestAttentionBuffers).
// The zero value is empty; safe for concurrent use (a call takes what it
// needs and gives it back when it returns; concurrent calls get their
// own).
type AttentionBuffers struct {
	mu      sync.Mutex
	scratch []*attnScratch
	rows    [][]attnRow
}

// attnBuffersKept bounds the scratches an AttentionBuffers keeps (more
// are dropped when given back).
const attnBuffersKept = 16

// scratch returns a worker's scratch for a on ks: one from a.Buffers with
// the same sizes, or a new one.
func (a *Attention) scratch(ks *gemmKernelSet, backward bool) *attnScratch {
	key := a.scratchKey(ks, backward)
	if p := a.Buffers; p != nil {
		p.mu.Lock()
		for i, w := range p.scratch {
			if w.key == key {
				last := len(p.scratch) - 1
				p.scratch[i] = p.scratch[last]
				p.scratch[last] = nil
				p.scratch = p.scratch[:last]
				p.mu.Unlock()
				w.a = a
				return w
			}
		}
		p.mu.Unlock()
	}
	return a.newScratch(ks, backward)
}

// release gives w back to a.Buffers (if any).
func (a *Attention) release(w *attnScratch) {
	p := a.Buffers
	if p == nil {
		return
	}
	w.a, w.kRows, w.vRows = nil, nil, nil // not the caller's K and V
	p.mu.Lock()
	if len(p.scratch) < attnBuffersKept {
		p.scratch = append(p.scratch, w)
	}
	p.mu.Unlock()
}

// rowsBuffer returns a slice of n attnRows, from a.Buffers when it holds
// one that long.
func (a *Attention) rowsBuffer(n int) []attnRow {
	if p := a.Buffers; p != nil {
		p.mu.Lock()
		for i, r := range p.rows {
			if cap(r) >= n {
				last := len(p.rows) - 1
				p.rows[i] = p.rows[last]
				p.rows[last] = nil
				p.rows = p.rows[:last]
				p.mu.Unlock()
				return r[:n]
			}
		}
		p.mu.Unlock()
	}
	return make([]attnRow, n)
}

// releaseRows gives rows back to a.Buffers (if any).
func (a *Attention) releaseRows(rows []attnRow) {
	p := a.Buffers
	if p == nil {
		return
	}
	p.mu.Lock()
	if len(p.rows) < attnBuffersKept {
		p.rows = append(p.rows, rows)
	}
	p.mu.Unlock()
}

// attnScratchKey is what the sizes of an attnScratch depend on.
type attnScratchKey struct {
	ks              *gemmKernelSet
	backward        bool
	h, r, s, bq, bk int
}

func (a *Attention) scratchKey(ks *gemmKernelSet, backward bool) attnScratchKey {
	bq, bk := a.tiles(ks)
	return attnScratchKey{ks: ks, backward: backward, h: a.HeadDim, r: a.groups(), s: a.S, bq: bq, bk: bk}
}
