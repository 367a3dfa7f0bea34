package vector

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"

	"github.com/cas-engine/cas/tensor"
)

// Exact batched F32 flat search screened on AMX-BF16 tiles. The F32 GEMM
// (flat_gemm.go) runs at the FMA's rate; AMX's TDPBF16PS multiplies
// bfloat16 tiles several times faster. So a batch of F32 queries is first
// scored against every row in bfloat16, each 1,024-row tile of F32 rows
// rounded on the fly (tensor.PackF32Norms, which also bounds each row's
// norm and rounding error), each query keeping its L best screened keys
// (screenCandidates: a few times k); then those candidates are rescored
// exactly in F32, best screened first and only while one can still enter
// (once a candidate's screened key + B, the bound below, is under the k-th
// exact key so far, no later one can), and the top k returned. The result is exact, not
// probably exact, by the bound below; a query whose candidates cannot
// prove it is searched again by the exact F32 path (the fallback, counted
// in ScreenStats).
//
// The bound. With q̃, x̃ the bfloat16 roundings (nearest, ties to even) and
// e_q = q − q̃, e_x = x − x̃:
//
//	q·x − q̃·x̃ = e_q·x + q̃·e_x,  so  |q·x − q̃·x̃| ≤ ‖e_q‖‖x‖ + ‖q̃‖‖e_x‖
//
// (Cauchy–Schwarz), to which the tiles' float32 accumulation adds at most
// γ_K·Σ|q̃_i x̃_i| ≤ γ_K‖q̃‖‖x̃‖ (γ_K = K·u/(1 − K·u), K the padded
// dimension, u = 2⁻²³ — twice float32's unit roundoff, covering any
// summation order and rounding; products of two bfloat16 values are exact
// in float32), and AMX's flushing of subnormal inputs, products and sums
// at most 2⁻¹²⁶·(√d·(‖q̃‖ + ‖x̃‖) + 2K). ‖e_q‖ and ‖q̃‖ are computed per
// query, ‖x‖ and ‖e_x‖ per row while rounding (their maxima X and E over
// the rows bound every row's, ‖x̃‖ ≤ X + E). The F32 rescoring and the
// exact path each sum in float32 too: γ_d·‖q‖·X each. Together, for every
// row j, |key_j − screened_j| ≤ B (twice that, plus the key formula's
// roundings, for L2 keys 2⟨q,x⟩ − ‖x‖² − ‖q‖²).
//
// Every row that is not a candidate was rejected by a full selection whose
// worst kept key is at most T (the largest such threshold over the
// workers), so its exact key is at most T + B. After rescoring, if T + B
// is below the k-th exact key, no row outside the candidates can enter
// the top k: the result equals the exact search's (ties within float32
// rounding of a dot product aside). Otherwise the query falls back.
// Nothing is assumed about the data: a wide range of norms only widens B
// (more fallbacks), a NaN or infinity makes B NaN (every query falls back).

// screenMode chooses whether F32 batches are screened on bfloat16 tiles.
type screenMode uint8

const (
	screenAuto screenMode = iota // where the CPU has AMX-BF16
	screenOff                    // never (the exact GEMM path)
	screenOn                     // always (tests: the plain-Go tile loop without AMX)
)

// ScreenStats counts the queries of F32 batches screened on AMX-BF16 and
// how many of them fell back to the exact F32 scan because the candidates
// could not prove the top k (see flat_screen.go).
type ScreenStats struct {
	Queries, Fallbacks int64
}

// screenCounters are the Flat's running ScreenStats.
type screenCounters struct {
	queries, fallbacks atomic.Int64
}

// ScreenStats returns the counts since the index was made.
func (f *Flat) ScreenStats() ScreenStats {
	return ScreenStats{Queries: f.screenStats.queries.Load(), Fallbacks: f.screenStats.fallbacks.Load()}
}

// BatchKernel names what scores a large batch (hundreds of queries):
// "AMX-BF16 screen + exact F32 rescoring", "AMX-BF16" (F16 codes, scores
// in bfloat16), "F32 GEMM", or the dot-block kernels.
func (f *Flat) BatchKernel() string {
	switch {
	case f.useScreen(screenMinQueries):
		return "AMX-BF16 screen + exact F32 rescoring"
	case f.useBF16():
		return "AMX-BF16"
	case f.codes.enc == F32:
		return "F32 GEMM"
	}
	return f.codes.enc.String() + " dot-block kernels"
}

// screenMinQueries is the smallest batch screened by default. Every row
// is rounded to bfloat16 once per batch, a pass over the whole index at
// memory speed, which the F32 GEMM's packing pays too: on 100,000 × 768
// rows at one thread the screen is ahead from the smallest GEMM batch on
// (queries per CPU-second, screen against GEMM: 261–285 / 218–255 at 16
// queries, 472–480 / 342–355 at 32, 824 / 512 at 64, 2,148 / 724 at 512;
// BenchmarkFlatBatchSizeCPUTime, load ≈ 9, with the prefetching rounding).
const screenMinQueries = gemmMinQueries

// useScreen reports whether a batch of nq queries is screened.
func (f *Flat) useScreen(nq int) bool {
	if f.codes.enc != F32 || nq < gemmMinQueries {
		return false
	}
	switch f.screen {
	case screenOn:
		return true
	case screenOff:
		return false
	}
	return nq >= screenMinQueries && tensor.HasAMXBF16()
}

// screenCandidates is L, how many screened candidates a query keeps: k
// plus a margin, 4k up to 256 for small k.
func screenCandidates(k int) int {
	return max(k+32, min(4*k, 256))
}

// screenTile is how many rows one AMX pass scores (the F16 path's tile).
const screenTile = 1024

// screenWorker is one worker's selections, buffers and row maxima.
type screenWorker struct {
	hs        []*tensor.TopK
	panels    tensor.BF16Panels
	scratch   []float32
	buf       []float32
	xx, ee    []float64
	maxX2     float64 // max ‖x_j‖² over the rows it scanned (bounds)
	maxE2     float64 // max ‖e_j‖²
	nonFinite bool    // a bound was NaN or infinite
}

// screenCand is a candidate row and its screened key.
type screenCand struct {
	key float32
	row int
}

// searchScreened is searchBlock for F32 batches on AMX (see above).
func (f *Flat) searchScreened(q []float32, nq, k int, p *SearchParams, scores []float32, ids []int64) {
	d, n := f.d, f.Len()
	L := screenCandidates(k)
	pq := prepareQueries(q, nq, d, F32, nil, f.metric)
	pq.qb = tensor.PadBF16Queries(nil, pq.qv, nq, d)
	kpad := (d + 31) &^ 31

	workers := max(1, min(tensor.Workers(p.threads()), n/4096))
	chunk := max(4096, (n/(16*workers)+screenTile-1)/screenTile*screenTile)
	ws := make([]screenWorker, workers)
	ldo := (min(screenTile, n) + 31) &^ 31
	forChunks(n, chunk, workers, func(w, lo, hi int) {
		sw := &ws[w]
		if sw.hs == nil {
			sw.hs = make([]*tensor.TopK, nq)
			for i := range sw.hs {
				sw.hs[i] = tensor.NewTopK(L)
			}
			sw.buf = make([]float32, ((nq+31)&^31)*ldo)
			sw.xx, sw.ee = make([]float64, screenTile), make([]float64, screenTile)
		}
		for r0 := lo; r0 < hi; r0 += screenTile {
			r1 := min(hi, r0+screenTile)
			m := r1 - r0
			sw.scratch = sw.panels.PackF32Norms(f.codes.f32[r0*d:r1*d], m, d, sw.scratch, sw.xx, sw.ee)
			for j := range m {
				x2, e2 := sw.xx[j], sw.ee[j]
				if !(x2 <= math.MaxFloat64) || !(e2 <= math.MaxFloat64) {
					sw.nonFinite = true
				}
				sw.maxX2, sw.maxE2 = max(sw.maxX2, x2), max(sw.maxE2, e2)
			}
			tensor.DotBF16Panels(sw.buf, ldo, pq.qb, nq, &sw.panels)
			for i := range nq {
				raw := sw.buf[i*ldo : i*ldo+m]
				var norms []float32
				if f.metric == L2 {
					norms = f.norms[r0:r1]
				}
				toKeys(f.metric, raw, pq.bias[i], pq.baseOf(i), norms)
				sw.hs[i].PushRows(raw, int64(r0))
			}
		}
	})

	// Row maxima over all workers.
	var maxX2, maxE2 float64
	nonFinite := false
	for _, sw := range ws {
		maxX2, maxE2 = max(maxX2, sw.maxX2), max(maxE2, sw.maxE2)
		nonFinite = nonFinite || sw.nonFinite
	}
	X, E := math.Sqrt(maxX2), math.Sqrt(maxE2)
	if nonFinite {
		X = math.NaN()
	}

	// Rescoring, queries split over the workers.
	fail := make([]bool, nq)
	var fails atomic.Int64
	forChunks(nq, max(1, nq/(4*workers)), workers, func(_, lo, hi int) {
		cs := make([]float32, L)
		cr := make([]int64, L)
		var cands []screenCand
		final := tensor.NewTopK(k)
		for i := lo; i < hi; i++ {
			final.Reset()
			qi := pq.qv[i*d : (i+1)*d]
			B := f.screenMargin(qi, pq.qb[i*kpad:i*kpad+d], float64(pq.baseOf(i)), X, E, kpad)
			// The candidates of every worker, best screened key first.
			T := math.Inf(-1)
			cands = cands[:0]
			for w := range ws {
				h := ws[w].hs
				if h == nil {
					continue
				}
				if h[i].Len() == L {
					T = max(T, float64(h[i].Threshold()))
				}
				c := h[i].Sorted(cs, cr)
				for a := range c {
					cands = append(cands, screenCand{cs[a], int(cr[a])})
				}
			}
			slices.SortFunc(cands, func(a, b screenCand) int { return cmp.Compare(b.key, a.key) })
			for _, c := range cands {
				// Every later candidate's exact key is at most its
				// screened key + B ≤ this one's + B: once that is below
				// the k-th exact key, none of them can enter.
				if final.Len() == k && float64(c.key)+B < float64(final.Threshold()) {
					break
				}
				key := tensor.Dot(qi, f.codes.f32[c.row*d:(c.row+1)*d])
				if f.metric == L2 {
					key = 2*key - f.norms[c.row] - pq.base[i]
				}
				final.Push(key, f.ID(c.row))
			}
			// Rows that are not candidates: exact keys at most T + B.
			if !math.IsInf(T, -1) && !(T+B < float64(final.Threshold())) {
				fail[i] = true
				fails.Add(1)
				continue
			}
			writeResults(f.metric, final, scores[i*k:(i+1)*k], ids[i*k:(i+1)*k])
		}
	})
	f.screenStats.queries.Add(int64(nq))
	nf := int(fails.Load())
	if nf == 0 {
		return
	}
	f.screenStats.fallbacks.Add(int64(nf))
	// The fallback: the failed queries through the exact F32 path.
	sub := make([]float32, 0, nf*d)
	var which []int
	for i, bad := range fail {
		if bad {
			sub = append(sub, q[i*d:(i+1)*d]...)
			which = append(which, i)
		}
	}
	ss, si := make([]float32, nf*k), make([]int64, nf*k)
	f.searchBlock(sub, nf, k, p, f.useGEMM(nf), ss, si)
	for a, i := range which {
		copy(scores[i*k:(i+1)*k], ss[a*k:(a+1)*k])
		copy(ids[i*k:(i+1)*k], si[a*k:(a+1)*k])
	}
}

// screenMargin is B of flat_screen.go's bound for one query (q its F32
// values, qb its bfloat16 ones, base ‖q‖² for L2) given the rows' maxima
// X ≥ ‖x_j‖ and E ≥ ‖e_j‖, in key units; NaN when anything is not finite.
func (f *Flat) screenMargin(q []float32, qb []uint16, base float64, X, E float64, kpad int) float64 {
	var qq, tt, ee float64
	for c, v := range q {
		t := float64(tensor.BF16ToF32(qb[c]))
		qq += float64(v) * float64(v)
		tt += t * t
		ee += (float64(v) - t) * (float64(v) - t)
	}
	// float64 sums of float32 values: relative error below 1e-12.
	const widen = 1 + 1e-9
	return screenBound(f.metric, math.Sqrt(qq*widen), math.Sqrt(tt*widen), math.Sqrt(ee*widen), X, E, len(q), kpad, base)
}

// screenBound is B of flat_screen.go's bound, in key units: for a query
// with ‖q‖ ≤ qn, ‖q̃‖ ≤ qt, ‖e_q‖ ≤ eq and rows with ‖x‖ ≤ X, ‖e_x‖ ≤ E,
// of dimension d padded to kpad, the largest difference between a row's
// screened key and its exact key (base: ‖q‖² for L2 keys, or 0 where the
// key omits it). NaN when anything is not finite.
func screenBound(m Metric, qn, qt, eq, X, E float64, d, kpad int, base float64) float64 {
	const u = 0x1p-23
	gamma := func(n int) float64 { return float64(n) * u / (1 - float64(n)*u) }
	xt := X + E
	tiny := 0x1p-126 * (math.Sqrt(float64(d))*(qt+xt) + 2*float64(kpad))
	screen := eq*X + qt*E + gamma(kpad)*qt*xt + tiny
	resc := gamma(d) * qn * X // the rescoring's float32 sum, and the exact path's
	if m == L2 {
		// key = 2⟨q,x⟩ − ‖x‖² − ‖q‖²: twice the dot's errors, and the
		// formula's float32 roundings in both keys.
		return 2*(screen+2*resc) + 2*3*u*(2*qn*X+X*X+base)
	}
	return screen + 2*resc
}
