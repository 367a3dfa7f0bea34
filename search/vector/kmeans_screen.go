package vector

import (
	"math"

	"github.com/viterin/vek/vek32"

	"github.com/cas-engine/cas/tensor"
)

// K-means assignment screened on AMX-BF16 tiles, as the flat F32 batch is
// (flat_screen.go): each point's keys against every centroid are first
// computed in bfloat16 (the centroids rounded and packed once an
// iteration, each chunk of points rounded on the fly), then only the
// centroids whose screened key is within 2B of the best screened key are
// rescored exactly in F32. Any other centroid c has exact key ≤ t_c + B <
// t_max − B ≤ the exact key of the screened best, so it cannot be the
// argmax: the assignment is the exact argmax (ties within float32
// rounding of a dot product aside; equal keys go to the lower index), the
// objective the sum of the exact best keys. Usually one or two centroids
// are rescored. Without AMX-BF16 assignPoints keeps the F32 GEMM.

// useScreenAssign reports whether assignPoints screens on AMX.
func useScreenAssign(k int) bool { return tensor.HasAMXBF16() && k >= 16 }

// assignScreened is assignPoints on AMX (see above); cnorm holds ‖c‖² for
// L2. It returns ok = false, having assigned nothing, when the centroids'
// norms are not finite.
func assignScreened(assign []int32, x, cent, cnorm []float32, n, d, k int, m Metric, threads int) (obj float64, ok bool) {
	var panels tensor.BF16Panels
	cx, ce := make([]float64, k), make([]float64, k)
	panels.PackF32Norms(cent, k, d, nil, cx, ce)
	var X2, E2 float64
	for c := range k {
		X2, E2 = max(X2, cx[c]), max(E2, ce[c])
	}
	X, E := math.Sqrt(X2), math.Sqrt(E2)
	if !(X < math.Inf(1)) || !(E < math.Inf(1)) {
		return 0, false
	}
	kpad, ldo := panels.KPad, panels.NPad
	// Points per chunk: a multiple of 32 up to 1,024, the score block
	// under 8 MiB; it depends on k only, so the objective's chunk order
	// does not depend on the thread count.
	chunk := max(32, min(1024, (8<<20)/(4*ldo))/32*32)
	nchunks := (n + chunk - 1) / chunk
	workers := max(1, min(tensor.Workers(threads), nchunks))
	partial := make([]float64, nchunks)
	type buffers struct {
		qb     []uint16
		out    []float32
		qq, qe []float64
	}
	bufs := make([]*buffers, workers)
	forChunks(nchunks, 1, workers, func(w, lo, hi int) {
		b := bufs[w]
		if b == nil {
			b = &buffers{qb: make([]uint16, chunk*kpad), out: make([]float32, chunk*ldo), qq: make([]float64, chunk), qe: make([]float64, chunk)}
			bufs[w] = b
		}
		for ch := lo; ch < hi; ch++ {
			p0 := ch * chunk
			p1 := min(n, p0+chunk)
			np := p1 - p0
			npad := (np + 31) &^ 31
			clear(b.qb[:npad*kpad])
			for i := range np {
				b.qq[i], b.qe[i] = tensor.F32ToBF16Norms(b.qb[i*kpad:i*kpad+d], x[(p0+i)*d:(p0+i+1)*d])
			}
			tensor.DotBF16Panels(b.out, ldo, b.qb, np, &panels)
			var sum float64
			for i := range np {
				xi := x[(p0+i)*d : (p0+i+1)*d]
				row := b.out[i*ldo : i*ldo+k]
				if m == L2 {
					vek32.MulNumber_Inplace(row, 2)
					vek32.Sub_Inplace(row, cnorm)
				}
				qn, eq := math.Sqrt(b.qq[i]), math.Sqrt(b.qe[i])
				B := screenBound(m, qn, qn+eq, eq, X, E, d, kpad, 0)
				// Candidates: screened key ≥ max − 2B (rounded down).
				thr := math.Nextafter32(float32(float64(vek32.Max(row))-2*B), float32(math.Inf(-1)))
				best, bestV := -1, float32(math.Inf(-1))
				exact := func(c int) {
					v := tensor.Dot(xi, cent[c*d:(c+1)*d])
					if m == L2 {
						v = 2*v - cnorm[c]
					}
					if best < 0 || v > bestV {
						best, bestV = c, v
					}
				}
				if B < math.Inf(1) {
					for c := tensor.IndexAtLeast(row, thr); c < k; c += 1 + tensor.IndexAtLeast(row[c+1:], thr) {
						exact(c)
					}
				}
				if best < 0 { // a NaN bound: every centroid exactly
					for c := range k {
						exact(c)
					}
				}
				assign[p0+i] = int32(best)
				if m == L2 {
					sum += float64(tensor.Dot(xi, xi) - bestV)
				} else {
					sum += float64(bestV)
				}
			}
			partial[ch] = sum
		}
	})
	for _, v := range partial {
		obj += v
	}
	return obj, true
}
