package tensor

import (
	"fmt"
	"math"

	"github.com/viterin/vek/vek32"
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
// Bias entries ≤ AttentionMaskedBias count as masked: a key range masked
// for every row of a query tile that has an unmasked key is skipped (e^s
// there is exactly 0 in float32, so the result is that of the full sum);
// the causal mask's upper triangle costs nothing. A row with no unmasked
// key gets the full sum, the uniform average of v, as the unfused softmax
// of equal scores gives it.

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
	// gradient, 3 × 96 KiB, stay in L2, and the GEMMs' packing of the
	// tiles is amortised. Measured on one thread in thread CPU time on the
	// 25M layer: 96–128 rows by 256 keys best; 32–64 rows or 128 keys
	// 15–70% slower, 256 rows about 25% slower).
	QueryTile, KeyTile int
	// Workers bounds the goroutines (≤ 0: GOMAXPROCS).
	Workers int
}

func (a *Attention) groups() int { return a.Heads / a.KVHeads }

func (a *Attention) tiles() (bq, bk int) {
	bq, bk = a.QueryTile, a.KeyTile
	if bq <= 0 {
		bq = max(1, 96/max(1, a.groups()))
	}
	if bk <= 0 {
		bk = 256
	}
	return bq, bk
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

// plan returns the tiles, the number of query tiles and their key spans.
func (a *Attention) plan(bias []float32) (bq, bk, nq int, spans [][2]int) {
	bq, bk = a.tiles()
	return bq, bk, (a.T + bq - 1) / bq, a.keySpans(bias, bq)
}

// keySpans returns, for each batch row and query tile, the key range
// [lo, hi) outside which every bias entry of the tile's rows is masked;
// [0, S) when a row of the tile has no unmasked key.
func (a *Attention) keySpans(bias []float32, bq int) [][2]int {
	nq := (a.T + bq - 1) / bq
	spans := make([][2]int, a.Batch*nq)
	for b := range a.Batch {
		for qt := range nq {
			lo, hi := a.S, 0
			for t := qt * bq; t < min(a.T, (qt+1)*bq); t++ {
				row := bias[(b*a.T+t)*a.S : (b*a.T+t+1)*a.S]
				first := -1
				for s, x := range row {
					if x > AttentionMaskedBias {
						first = s
						break
					}
				}
				if first < 0 {
					lo, hi = 0, a.S
					break
				}
				last := first
				for s := a.S - 1; s > first; s-- {
					if row[s] > AttentionMaskedBias {
						last = s
						break
					}
				}
				lo, hi = min(lo, first), max(hi, last+1)
			}
			if lo >= hi {
				lo, hi = 0, a.S
			}
			spans[b*nq+qt] = [2]int{lo, hi}
		}
	}
	return spans
}

// loadRows copies the rows (t, i), t0 ≤ t < t1, i < r, of KV group j of
// batch row b from x [Batch, T, Heads, HeadDim] into dst [(t1−t0)·r, h].
func (a *Attention) loadRows(dst, x []float32, b, j, t0, t1 int) {
	r, h := a.groups(), a.HeadDim
	for t := t0; t < t1; t++ {
		src := x[((b*a.T+t)*a.Heads+j*r)*h:]
		copy(dst[(t-t0)*r*h:(t-t0+1)*r*h], src[:r*h])
	}
}

// scores writes s[m, c] = q[m]·k[s0+c] + bias[b, t0 + m/r, s0+c] for the
// m rows of q and keys s0 ≤ s < s1 of group j.
func (a *Attention) scores(s, q []float32, m int, k, bias []float32, b, j, t0, s0, s1 int) {
	r, h, kv := a.groups(), a.HeadDim, a.KVHeads
	w := s1 - s0
	g := Gemm{Batch: 1, M: m, N: w, K: h, Workers: 1,
		A: RowMajor(q, m, h),
		B: Operand{F32: k, Offset: ((b*a.S+s0)*kv + j) * h, RowStride: 1, ColStride: kv * h}}
	g.mustRun(s[:m*w])
	for row := range m {
		t := t0 + row/r
		vek32.Add_Inplace(s[row*w:(row+1)*w], bias[(b*a.T+t)*a.S+s0:(b*a.T+t)*a.S+s1])
	}
}

// Forward writes fwd (o, m and l) for qs, k, v and bias (layouts on
// Attention).
func (a *Attention) Forward(fwd, qs, k, v, bias []float32) {
	h, kv := a.HeadDim, a.KVHeads
	a.check("Forward", a.lengths(qs, k, v, bias, fwd))
	r := a.groups()
	if len(fwd) == 0 {
		return
	}
	bq, bk, nq, spans := a.plan(bias)
	ParallelFor(a.Batch*kv*nq, a.Workers, 1, func(_, lo, hi int) {
		mMax := bq * r
		q := make([]float32, mMax*h)
		acc := make([]float32, mMax*h)
		s := make([]float32, mMax*min(bk, max(a.S, 1)))
		mx := make([]float32, mMax)
		l := make([]float32, mMax)
		for task := lo; task < hi; task++ {
			b, j, qt := task/(kv*nq), task/nq%kv, task%nq
			t0, t1 := qt*bq, min(a.T, (qt+1)*bq)
			m := (t1 - t0) * r
			a.loadRows(q, qs, b, j, t0, t1)
			clear(acc[:m*h])
			for i := range m {
				mx[i], l[i] = float32(math.Inf(-1)), 0
			}
			span := spans[b*nq+qt]
			for s0 := span[0]; s0 < span[1]; s0 += bk {
				s1 := min(span[1], s0+bk)
				w := s1 - s0
				a.scores(s, q, m, k, bias, b, j, t0, s0, s1)
				for row := range m {
					sr := s[row*w : (row+1)*w]
					mNew := max(mx[row], Max(sr))
					vek32.SubNumber_Inplace(sr, mNew)
					Exp(sr, sr)
					if alpha := float32(math.Exp(float64(mx[row] - mNew))); alpha != 1 {
						l[row] *= alpha
						vek32.MulNumber_Inplace(acc[row*h:(row+1)*h], alpha)
					}
					l[row] += vek32.Sum(sr)
					mx[row] = mNew
				}
				g := Gemm{Batch: 1, M: m, N: h, K: w, Workers: 1, Accumulate: true,
					A: RowMajor(s, m, w),
					B: Operand{F32: v, Offset: ((b*a.S+s0)*kv + j) * h, RowStride: kv * h, ColStride: 1}}
				g.mustRun(acc[:m*h])
			}
			base := ((b*kv+j)*a.T + t0) * r * (h + 2)
			for row := range m {
				dst := fwd[base+row*(h+2) : base+(row+1)*(h+2)]
				if a.S == 0 {
					clear(dst[:h])
					dst[h], dst[h+1] = float32(math.Inf(-1)), 0
					continue
				}
				vek32.MulNumber_Into(dst[:h], acc[row*h:(row+1)*h], 1/l[row])
				dst[h], dst[h+1] = mx[row], l[row]
			}
		}
	})
}

// Backward writes grads (dQs, dK, dV) for qs, k, v, bias, the forward's
// fwd and the gradient dO of o (layouts on Attention; S must equal T).
// dQs is the gradient with respect to qs (the scaled queries).
func (a *Attention) Backward(grads, qs, k, v, bias, fwd, dO []float32) {
	h, kv := a.HeadDim, a.KVHeads
	lens := a.lengths(qs, k, v, bias, fwd)
	lens["dO"] = [2]int{len(dO), a.Batch * a.T * a.Heads * h}
	lens["grads"] = [2]int{len(grads), a.Batch * kv * a.T * (a.groups() + 2) * h}
	a.check("Backward", lens)
	if a.S != a.T {
		panic(fmt.Sprintf("tensor.Attention.Backward: S = %d must equal T = %d", a.S, a.T))
	}
	r := a.groups()
	if len(grads) == 0 {
		return
	}
	bq, bk, nq, spans := a.plan(bias)
	ParallelFor(a.Batch*kv, a.Workers, 1, func(_, lo, hi int) {
		mMax := bq * r
		q := make([]float32, mMax*h)
		do := make([]float32, mMax*h)
		dq := make([]float32, mMax*h)
		mx := make([]float32, mMax)
		inv := make([]float32, mMax)
		d := make([]float32, mMax)
		w0 := min(bk, a.S)
		p := make([]float32, mMax*w0)
		ds := make([]float32, mMax*w0)
		dk := make([]float32, a.S*h)
		dv := make([]float32, a.S*h)
		for task := lo; task < hi; task++ {
			b, j := task/kv, task%kv
			clear(dk)
			clear(dv)
			gbase := (b*kv + j) * a.T * (r + 2) * h
			for qt := range nq {
				t0, t1 := qt*bq, min(a.T, (qt+1)*bq)
				m := (t1 - t0) * r
				a.loadRows(q, qs, b, j, t0, t1)
				a.loadRows(do, dO, b, j, t0, t1)
				fbase := ((b*kv+j)*a.T + t0) * r * (h + 2)
				for row := range m {
					f := fwd[fbase+row*(h+2) : fbase+(row+1)*(h+2)]
					mx[row], inv[row] = f[h], 1/f[h+1]
					d[row] = Dot(do[row*h:(row+1)*h], f[:h])
				}
				clear(dq[:m*h])
				span := spans[b*nq+qt]
				for s0 := span[0]; s0 < span[1]; s0 += bk {
					s1 := min(span[1], s0+bk)
					w := s1 - s0
					a.scores(p, q, m, k, bias, b, j, t0, s0, s1)
					for row := range m {
						pr := p[row*w : (row+1)*w]
						vek32.SubNumber_Inplace(pr, mx[row])
						Exp(pr, pr)
						vek32.MulNumber_Inplace(pr, inv[row])
					}
					kvOff := ((b*a.S+s0)*kv + j) * h
					// dV[s0:s1] += Pᵀ·dO
					runSerial(Gemm{Batch: 1, M: w, N: h, K: m, Accumulate: true,
						A: Operand{F32: p, RowStride: 1, ColStride: w}, B: RowMajor(do, m, h)}, dv[s0*h:s1*h])
					// dP = dO·vᵀ, then dS = P ⊙ (dP − D)
					runSerial(Gemm{Batch: 1, M: m, N: w, K: h,
						A: RowMajor(do, m, h), B: Operand{F32: v, Offset: kvOff, RowStride: 1, ColStride: kv * h}}, ds[:m*w])
					for row := range m {
						dr := ds[row*w : (row+1)*w]
						vek32.SubNumber_Inplace(dr, d[row])
						vek32.Mul_Inplace(dr, p[row*w:(row+1)*w])
					}
					// dQs += dS·k; dK[s0:s1] += dSᵀ·qs
					runSerial(Gemm{Batch: 1, M: m, N: h, K: w, Accumulate: true,
						A: RowMajor(ds, m, w), B: Operand{F32: k, Offset: kvOff, RowStride: kv * h, ColStride: 1}}, dq[:m*h])
					runSerial(Gemm{Batch: 1, M: w, N: h, K: m, Accumulate: true,
						A: Operand{F32: ds, RowStride: 1, ColStride: w}, B: RowMajor(q, m, h)}, dk[s0*h:s1*h])
				}
				for row := range m {
					t, i := t0+row/r, row%r
					copy(grads[gbase+(t*(r+2)+i)*h:gbase+(t*(r+2)+i+1)*h], dq[row*h:(row+1)*h])
				}
			}
			for s := range a.S {
				copy(grads[gbase+(s*(r+2)+r)*h:gbase+(s*(r+2)+r+1)*h], dk[s*h:(s+1)*h])
				copy(grads[gbase+(s*(r+2)+r+1)*h:gbase+(s*(r+2)+r+2)*h], dv[s*h:(s+1)*h])
			}
		}
	})
}

// runSerial runs g on the calling goroutine into out.
func runSerial(g Gemm, out []float32) {
	g.Workers = 1
	g.mustRun(out)
}
