package tensor

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// Grouped-query attention (Ainslie et al. 2023) as a blocked, flash-style
// kernel (Dao 2023, "FlashAttention-2"), forward and backward, that never
// writes the [B, H, T, S] score matrix: each task holds the scores of one
// tile of queries against one tile of keys (in L2), with the softmax kept
// online (running row maximum m and sum l, the output rescaled when m
// grows). For queries qs (already multiplied by the scale 1/√h), keys k,
// values v and an additive bias (0 where a query may see a key, the
// model's masked score −1e30 where it may not):
//
//	s = qs·kᵀ + bias,   o = softmax_s(s)·v,   m = max_s s,   l = Σ_s e^(s − m)
//
// (per row) and for the gradient dO of o, with P = e^(s − m)/l recomputed
// tile by tile from the saved m and l (FlashAttention-2 saves
// lse = m + log l; for a row with no unmasked key, −1e30 + log l rounds to
// −1e30 in float32, and e^(s − lse) would be 1 where the softmax is 1/S)
// and D = Σ_h dO ⊙ o per row:
//
//	dV = Pᵀ·dO,   dS = P ⊙ (dO·vᵀ − D),   dQs = dS·k,   dK = dSᵀ·qs.
//
// Bias entries ≤ AttentionMaskedBias count as masked: a chunk of keys
// masked for every row of a panel of query rows that has an unmasked key
// is skipped (e^s there is exactly 0 in float32, so the result is that of
// the full sum); the causal mask's upper triangle costs nothing (see
// attention_tiles.go for the tiles and their products). A row with no
// unmasked key gets the full sum, the uniform average of v, as the unfused
// softmax of equal scores gives it.

// AttentionMaskedBias is the largest bias an attention kernel treats as
// masked (model/qwen's masked score is −1e30).
const AttentionMaskedBias = -1e29

// Attention is one grouped-query attention problem. Layouts (row-major):
//
//	qs, dO   [Batch, T, Heads, HeadDim]       heads in KV-group order: head = j·r + i,
//	                                          r = Heads/KVHeads, j < KVHeads
//	k, v     [Batch, S, KVHeads, HeadDim]
//	bias     [Batch, T, S]                    broadcast over heads
//	fwd      [Batch, KVHeads, T, r, HeadDim+2]  o, m, l in each row
//	grads    [Batch, KVHeads, T, r+2, HeadDim]  dQs rows i < r, then dK, dV at
//	                                          row t of the key axis (needs S = T)
type Attention struct {
	Batch, Heads, KVHeads, T, S, HeadDim int
	// QueryTile and KeyTile are the query positions and keys of one tile
	// (≤ 0: defaults, about 96 rows of queries (positions × the r heads of
	// a KV group) by 256 keys: the scores, probabilities and their
	// gradient, 2 × 96 KiB, stay in L2 with K and V of the KV group).
	// KeyTile is rounded up to a multiple of the GEMM micro-kernel's
	// width (16 with AVX2).
	QueryTile, KeyTile int
	// Workers bounds the goroutines (≤ 0: GOMAXPROCS).
	Workers int
	// Buffers, when not nil, keeps the working buffers from call to call
	// (nil: each call allocates its own).
	Buffers *AttentionBuffers
}

func (a *Attention) groups() int { return a.Heads / a.KVHeads }

// tiles returns the query positions and keys of one tile, the keys
// rounded up to a multiple of the kernel set's nr.
func (a *Attention) tiles(ks *gemmKernelSet) (bq, bk int) {
	bq, bk = a.QueryTile, a.KeyTile
	if bq <= 0 {
		bq = max(1, 96/max(1, a.groups()))
	}
	if bk <= 0 {
		bk = 256
	}
	return bq, roundUp(bk, ks.nr)
}

func (a *Attention) check(what string, lens map[string][2]int) {
	if a.Batch < 0 || a.T < 0 || a.S < 0 || a.HeadDim <= 0 || a.KVHeads <= 0 || a.Heads <= 0 || a.Heads%a.KVHeads != 0 {
		panic(fmt.Sprintf("tensor.Attention.%s: bad shape %+v", what, *a))
	}
	for name, l := range lens {
		if l[0] != l[1] {
			panic(fmt.Sprintf("tensor.Attention.%s: %s has length %d, want %d", what, name, l[0], l[1]))
		}
	}
}

// lengths pairs the lengths of the forward's operands with the lengths
// their layouts need (for check).
func (a *Attention) lengths(qs, k, v, bias, fwd []float32) map[string][2]int {
	h, kv := a.HeadDim, a.KVHeads
	return map[string][2]int{
		"qs": {len(qs), a.Batch * a.T * a.Heads * h}, "k": {len(k), a.Batch * a.S * kv * h},
		"v": {len(v), a.Batch * a.S * kv * h}, "bias": {len(bias), a.Batch * a.T * a.S},
		"fwd": {len(fwd), a.Batch * a.T * a.Heads * (h + 2)}}
}

// Forward writes fwd (o, m and l) for qs, k, v and bias (layouts on
// Attention).
func (a *Attention) Forward(fwd, qs, k, v, bias []float32) {
	a.forwardWith(gemmKernels, fwd, qs, k, v, bias)
}

// forwardWith is Forward on the GEMM micro-kernel of ks (the tests run
// every set the CPU has).
func (a *Attention) forwardWith(ks *gemmKernelSet, fwd, qs, k, v, bias []float32) {
	h, kv := a.HeadDim, a.KVHeads
	a.check("Forward", a.lengths(qs, k, v, bias, fwd))
	if len(fwd) == 0 {
		return
	}
	if a.S == 0 {
		for i := 0; i < len(fwd); i += h + 2 {
			clear(fwd[i : i+h])
			fwd[i+h], fwd[i+h+1] = float32(math.Inf(-1)), 0
		}
		return
	}
	bq, _ := a.tiles(ks)
	nq := (a.T + bq - 1) / bq
	rows := a.maskRows(bias)
	defer a.releaseRows(rows)
	// Work units: the (b, j) pairs, each packing K and V once; with fewer
	// pairs than workers, each pair's query blocks are dealt round-robin
	// to split tasks (so each gets early, cheap causal blocks and late,
	// costly ones alike), each packing K and V again.
	units, split := a.Batch*kv, 1
	if wk := Workers(a.Workers); units < wk {
		split = min(nq, (wk+units-1)/units)
	}
	a.eachUnit(ks, false, units*split, func(w *attnScratch, task int) {
		u, part := task/split, task%split
		b, j := u/kv, u%kv
		w.packKV(k, v, b, j)
		for qt := part; qt < nq; qt += split {
			w.forwardBlock(fwd, qs, bias, rows, b, j, qt*bq, min(a.T, (qt+1)*bq))
		}
	})
}

// eachUnit runs fn(w, u) for every u < n on up to a.Workers goroutines
// (≤ 0: GOMAXPROCS), each with its own scratch w, that take the next unit
// whenever they finish one: units differ in cost (padding masks), and a
// worker slowed by other load leaves the rest to the others instead of
// holding up the call with a fixed share. A unit's results do not depend
// on the worker that runs it.
func (a *Attention) eachUnit(ks *gemmKernelSet, backward bool, n int, fn func(w *attnScratch, u int)) {
	workers := min(Workers(a.Workers), n)
	if workers <= 1 {
		w := a.scratch(ks, backward)
		defer a.release(w)
		for u := range n {
			fn(w, u)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := a.scratch(ks, backward)
			defer a.release(w)
			for u := int(next.Add(1)) - 1; u < n; u = int(next.Add(1)) - 1 {
				fn(w, u)
			}
		}()
	}
	wg.Wait()
}

// Backward writes grads (dQs, dK, dV) for qs, k, v, bias, the forward's
// fwd and the gradient dO of o (layouts on Attention; S must equal T).
// dQs is the gradient with respect to qs (the scaled queries).
func (a *Attention) Backward(grads, qs, k, v, bias, fwd, dO []float32) {
	a.backwardWith(gemmKernels, grads, qs, k, v, bias, fwd, dO)
}

// backwardWith is Backward on the GEMM micro-kernel of ks.
func (a *Attention) backwardWith(ks *gemmKernelSet, grads, qs, k, v, bias, fwd, dO []float32) {
	h, kv := a.HeadDim, a.KVHeads
	lens := a.lengths(qs, k, v, bias, fwd)
	lens["dO"] = [2]int{len(dO), a.Batch * a.T * a.Heads * h}
	lens["grads"] = [2]int{len(grads), a.Batch * kv * a.T * (a.groups() + 2) * h}
	a.check("Backward", lens)
	if a.S != a.T {
		panic(fmt.Sprintf("tensor.Attention.Backward: S = %d must equal T = %d", a.S, a.T))
	}
	if len(grads) == 0 {
		return
	}
	bq, _ := a.tiles(ks)
	nq := (a.T + bq - 1) / bq
	rows := a.maskRows(bias)
	defer a.releaseRows(rows)
	a.eachUnit(ks, true, a.Batch*kv, func(w *attnScratch, u int) {
		b, j := u/kv, u%kv
		w.packKV(k, v, b, j)
		clear(w.dkt)
		clear(w.dvt)
		for qt := range nq {
			w.backwardBlock(grads, qs, dO, bias, fwd, rows, b, j, qt*bq, min(a.T, (qt+1)*bq))
		}
		w.storeKV(grads, b, j)
	})
}

// runSerial runs g on the calling goroutine into out.
func runSerial(g Gemm, out []float32) {
	g.Workers = 1
	g.mustRun(out)
}
