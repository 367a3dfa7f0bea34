package tensor

import "fmt"

// Rotary position embedding (Su et al. 2021, "RoFormer"), Hugging Face's
// layout, forward and backward, fused: one pass each where the unfused
// graph rotates the halves (a 2×2 contraction), multiplies by cos and sin
// and adds (and its gradient runs those ops backwards). For a head vector
// x of h = 2·half values, rot(x) = [−x₂, x₁] with x₁, x₂ its halves:
//
//	y = x ⊙ cos + rot(x) ⊙ sin,   ∂L/∂x = g ⊙ cos − rot(g ⊙ sin)
//
// (rot is orthogonal with rotᵀ = −rot). cos and sin hold one row of h
// values per position, shared by the heads at that position.

// RopeRows writes dst = x ⊙ cos + rot(x) ⊙ sin for x of rows × heads × h
// (each position's heads contiguous) and cos, sin of rows × h; with grad,
// it writes the gradient g ⊙ cos − rot(g ⊙ sin) of x = g instead. h must
// be even; dst may not alias x. Positions are split over up to workers
// goroutines (≤ 0: GOMAXPROCS).
func RopeRows(dst, x, cos, sin []float32, heads, h int, grad bool, workers int) {
	if h%2 != 0 || heads <= 0 {
		panic(fmt.Sprintf("tensor.RopeRows: head size %d must be even, heads %d positive", h, heads))
	}
	checkLen("RopeRows: x", len(x), len(dst))
	if len(dst) == 0 {
		return
	}
	if len(dst)%(heads*h) != 0 {
		panic("tensor.RopeRows: length is not a multiple of heads × head size")
	}
	rows := len(dst) / (heads * h)
	checkLen("RopeRows: cos", len(cos), rows*h)
	checkLen("RopeRows: sin", len(sin), rows*h)
	half := h / 2
	run := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			c, s := cos[r*h:(r+1)*h], sin[r*h:(r+1)*h]
			c1, c2, s1, s2 := c[:half], c[half:], s[:half], s[half:]
			for k := range heads {
				o := (r*heads + k) * h
				x1, x2 := x[o:o+half], x[o+half:o+h]
				d1, d2 := dst[o:o+half], dst[o+half:o+h]
				if grad {
					// dx₁ = g₁c₁ + g₂s₂, dx₂ = g₂c₂ − g₁s₁.
					for i := range half {
						d1[i] = x1[i]*c1[i] + x2[i]*s2[i]
						d2[i] = x2[i]*c2[i] - x1[i]*s1[i]
					}
					continue
				}
				// y₁ = x₁c₁ − x₂s₁, y₂ = x₂c₂ + x₁s₂.
				for i := range half {
					d1[i] = x1[i]*c1[i] - x2[i]*s1[i]
					d2[i] = x2[i]*c2[i] + x1[i]*s2[i]
				}
			}
		}
	}
	if len(dst) < softmaxMinElems {
		run(0, rows)
		return
	}
	ParallelFor(rows, workers, 1, func(_, lo, hi int) { run(lo, hi) })
}
