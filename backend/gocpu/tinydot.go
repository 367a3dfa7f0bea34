package gocpu

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// tinyMaxRHS bounds the elements of the right operand of a tinyPlan.
const tinyMaxRHS = 64

// tinyPlan is a float32 DotGeneral whose right operand is a tiny matrix
// (at most tinyMaxRHS elements) contracted over one axis of the left one,
// with no batch axes: RoPE's rotate_half, written as a 2×2 contraction
// ("btnjh,ij->btnih") so that its gradient needs no Pad, and that
// gradient. Seen as lhs [P, K, Q] (the axes before, at and after the
// contracting axis) and rhs B [K, N],
//
//	out[p, q, j] = Σ_c lhs[p, c, q] · B[c, j]
//
// which the GEMM would run with K and N padded to its 12×32 tiles, after
// copying lhs into [P·Q, K] order. Here every lhs row lhs[p, c, :] is read
// once, in place, and the sum runs over c in increasing order.
type tinyPlan struct {
	p, k, q, n int
	// bIndex[c·n + j] is the flat index in rhs of B[c, j].
	bIndex []int
}

// newTinyPlan returns the plan of a product that qualifies, or nil.
func newTinyPlan(ls shapes.Shape, lc, lb []int, rs shapes.Shape, rc, rb, rx []int) *tinyPlan {
	if ls.DType != dtypes.Float32 || rs.DType != dtypes.Float32 || len(lb) != 0 || len(rb) != 0 ||
		len(lc) != 1 || len(rc) != 1 || rs.Size() > tinyMaxRHS || rs.Size() == 0 || ls.Size() == 0 {
		return nil
	}
	ld, c := ls.Dimensions, lc[0]
	t := &tinyPlan{p: 1, k: ld[c], q: 1, n: prod(rs.Dimensions, rx)}
	for a := range c {
		t.p *= ld[a]
	}
	for a := c + 1; a < len(ld); a++ {
		t.q *= ld[a]
	}
	// B[c, j]: rhs element with contracting index c and cross index j
	// (the rhs cross axes in order, row-major).
	st := rowMajorStrides(rs.Dimensions)
	t.bIndex = make([]int, t.k*t.n)
	for ci := range t.k {
		for j := range t.n {
			off, rem := ci*st[rc[0]], j
			for x := len(rx) - 1; x >= 0; x-- {
				a := rx[x]
				off += rem % rs.Dimensions[a] * st[a]
				rem /= rs.Dimensions[a]
			}
			t.bIndex[ci*t.n+j] = off
		}
	}
	return t
}

// run computes out [P·Q·N] from lhs [P·K·Q] and rhs.
func (t *tinyPlan) run(be *Backend, out, lhs, rhs []float32) {
	var bm [tinyMaxRHS]float32
	for i, idx := range t.bIndex {
		bm[i] = rhs[idx]
	}
	k, q, n := t.k, t.q, t.n
	be.forRange(t.p, k*q*n, func(lo, hi int) {
		for p := lo; p < hi; p++ {
			o := out[p*q*n : (p+1)*q*n]
			for c := range k {
				row := lhs[(p*k+c)*q : (p*k+c+1)*q]
				b := bm[c*n : c*n+n]
				if n == 2 { // RoPE's rotation: two outputs per element
					b0, b1 := b[0], b[1]
					if c == 0 {
						for i, v := range row {
							o[2*i], o[2*i+1] = v*b0, v*b1
						}
					} else {
						for i, v := range row {
							o[2*i] += v * b0
							o[2*i+1] += v * b1
						}
					}
					continue
				}
				for i, v := range row {
					oi := o[i*n : i*n+n]
					if c == 0 {
						for j := range oi {
							oi[j] = v * b[j]
						}
					} else {
						for j := range oi {
							oi[j] += v * b[j]
						}
					}
				}
			}
		}
	})
}
