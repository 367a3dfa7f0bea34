package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttnRowKernels checks attnSoftmax and attnGrad (the AVX2 kernels
// where the CPU has them) against attnSoftmaxGo and attnGradGo bit for
// bit over odd lengths, masked scores (−1e30), ±Inf and NaN, and that each
// is the softmax it claims to be within rounding.
func TestAttnRowKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for _, n := range []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 1001} {
		for trial := range 9 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 4)
			}
			mPrev := float32(math.Inf(-1))
			special := float32(0)
			switch trial {
			case 1:
				mPrev = float32(rng.NormFloat64() * 8)
			case 2: // masked entries
				for i := range x {
					if rng.IntN(3) == 0 {
						x[i] = -1e30
					}
				}
			case 3:
				special = inf
			case 4:
				special = -inf
			case 5:
				special = nan
			case 6, 7: // around the fast path's bound x − m ≥ −86, and subnormal e^x
				for i := range x {
					x[i] = -80 - 19*float32(rng.Float64())
				}
				if trial == 7 {
					for i := range x {
						x[i] = -84 - 2*float32(rng.Float64())
					}
				}
				if n > 0 {
					x[rng.IntN(n)] = 0
				}
			case 8: // every whole vector in the fast range, then one past it
				for i := range x {
					x[i] = -86 * float32(rng.Float64())
				}
				if n > 0 {
					x[0] = 0
					x[rng.IntN(n)] = -86
				}
			}
			if special != 0 && n > 0 {
				x[rng.IntN(n)] = special
			}
			t.Run(fmt.Sprintf("n%d_trial%d", n, trial), func(t *testing.T) {
				got, want := append([]float32(nil), x...), append([]float32(nil), x...)
				gm, gs := attnSoftmax(got, mPrev)
				wm, ws := attnSoftmaxGo(want, mPrev)
				if special != special { // NaN: the sum says so
					if n > 0 && (gs == gs || ws == ws) {
						t.Fatalf("sum with a NaN = %g (Go %g), want NaN", gs, ws)
					}
					return
				}
				if gm != wm || math.Float32bits(gs) != math.Float32bits(ws) {
					t.Fatalf("m, sum = %g, %g; Go %g, %g", gm, gs, wm, ws)
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("x[%d] = %g, Go %g", i, got[i], want[i])
					}
				}
				// The softmax itself, in float64.
				if special == 0 && n > 0 {
					m := float64(mPrev)
					for _, v := range x {
						m = math.Max(m, float64(v))
					}
					s := 0.0
					for i, v := range x {
						e := math.Exp(float64(v - float32(m))) // the float32 difference
						s += e
						if d := math.Abs(float64(got[i]) - e); d > 1e-6*e+1e-38 {
							t.Fatalf("x[%d] = %g, want %g", i, got[i], e)
						}
					}
					if math.Abs(float64(gs)-s) > 1e-6*s*math.Sqrt(float64(n)) || float64(gm) != m {
						t.Fatalf("m, sum = %g, %g, want %g, %g", gm, gs, m, s)
					}
				}
				// The backward's row: p from the same scores, ds from random
				// dP; with the row's m, and with m lower and higher (p − m
				// across the fast path's bounds 88 and −86).
				for _, m := range []float32{wm, wm - 87.9, wm - 88.5, wm + 60, wm - 200} {
					p1, p2 := append([]float32(nil), x...), append([]float32(nil), x...)
					ds1 := make([]float32, n)
					for i := range ds1 {
						ds1[i] = float32(rng.NormFloat64())
					}
					ds2 := append([]float32(nil), ds1...)
					inv, d := 1/max(ws, 1), float32(rng.NormFloat64())
					attnGrad(p1, ds1, m, inv, d)
					attnGradGo(p2, ds2, m, inv, d)
					for i := range p1 {
						if math.Float32bits(p1[i]) != math.Float32bits(p2[i]) || math.Float32bits(ds1[i]) != math.Float32bits(ds2[i]) {
							t.Fatalf("attnGrad (m %g): p, ds[%d] = %g, %g; Go %g, %g", m, i, p1[i], ds1[i], p2[i], ds2[i])
						}
					}
				}
			})
		}
	}
}

// BenchmarkAttnRowKernels times the row kernels on rows of 128 keys (the
// mean row of the causal 25M layer) against the unfused kernels they
// replace.
func BenchmarkAttnRowKernels(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, 128)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 4)
	}
	x, y := make([]float32, len(src)), make([]float32, len(src))
	b.Run("softmax", func(b *testing.B) {
		for b.Loop() {
			copy(x, src)
			attnSoftmax(x, float32(math.Inf(-1)))
		}
	})
	b.Run("softmax-unfused", func(b *testing.B) {
		for b.Loop() {
			copy(x, src)
			m := Max(x)
			SubScalar(x, x, m)
			Exp(x, x)
			_ = StreamSum(x)
		}
	})
	b.Run("grad", func(b *testing.B) {
		for b.Loop() {
			copy(x, src)
			copy(y, src)
			attnGrad(x, y, 3, 0.01, 0.5)
		}
	})
}

// maskRowRef is maskRow by plain scans.
func maskRowRef(row []float32) attnRow {
	first, last := -1, -1
	for s, x := range row {
		if x > AttentionMaskedBias {
			if first < 0 {
				first = s
			}
			last = s
		}
	}
	if first < 0 {
		return attnRow{0, int32(len(row)), false}
	}
	zero := true
	for _, x := range row[first : last+1] {
		zero = zero && x == 0
	}
	return attnRow{int32(first), int32(last + 1), zero}
}

// TestMaskRow checks maskRow against plain scans over causal and padded
// rows, NaNs (masked), −Inf, masked entries inside the range, random
// biases and −0.
func TestMaskRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	nan := float32(math.NaN())
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 40, 100, 257} {
		for trial := range 200 {
			row := make([]float32, n)
			lo, hi := rng.IntN(n+1), rng.IntN(n+1)
			for s := range row {
				switch {
				case s < lo || s > hi:
					row[s] = -1e30
				case trial%4 == 1:
					row[s] = float32(rng.NormFloat64())
				case trial%4 == 2 && rng.IntN(4) == 0:
					row[s] = float32(math.Copysign(0, -1))
				}
			}
			if n > 0 && trial%5 == 3 {
				row[rng.IntN(n)] = []float32{nan, -nan, float32(math.Inf(-1)), -1e29, -9.9e28}[rng.IntN(5)]
			}
			if got, want := maskRow(row), maskRowRef(row); got != want {
				t.Fatalf("n %d trial %d: maskRow = %+v, want %+v (row %v)", n, trial, got, want, row)
			}
		}
	}
}

// TestMaskScans checks maskedLead, maskedTrail and nonzero (the AVX2
// kernels where the CPU has them) against their Go references over
// lengths around the 8-element blocks, masked runs from either end, NaN
// (masked), −1e29 itself (masked), −9.9e28 (not) and ±0.
func TestMaskScans(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	vals := []float32{-1e30, float32(math.Inf(-1)), float32(math.NaN()), -1e29, -9.9e28, 0, float32(math.Copysign(0, -1)), 1e-45, 3}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 24, 64, 100, 257} {
		for trial := range 300 {
			x := make([]float32, n)
			lo, hi := rng.IntN(n+1), rng.IntN(n+1)
			for i := range x {
				if i < lo || i >= n-hi {
					x[i] = -1e30
				} else if trial%3 == 0 {
					x[i] = vals[rng.IntN(len(vals))]
				}
			}
			if n > 0 && trial%2 == 1 {
				x[rng.IntN(n)] = vals[rng.IntN(len(vals))]
			}
			if got, want := maskedLead(x), maskedLeadGo(x); got != want {
				t.Fatalf("n %d: maskedLead = %d, want %d (%v)", n, got, want, x)
			}
			x8 := x[:n&^7]
			if got, want := maskedTrail(x8), maskedTrailGo(x8); got != want {
				t.Fatalf("n %d: maskedTrail = %d, want %d (%v)", n, got, want, x8)
			}
			z := make([]float32, n)
			if n > 0 && trial%4 != 0 {
				z[rng.IntN(n)] = vals[rng.IntN(len(vals))]
			}
			if got, want := nonzero(z), nonzeroGo(z); got != want {
				t.Fatalf("n %d: nonzero = %v, want %v (%v)", n, got, want, z)
			}
		}
	}
}

// BenchmarkMaskRow times maskRow over the rows of one causal 256 × 256
// bias (the 25M model's) against maskRowRef's plain scans.
func BenchmarkMaskRow(b *testing.B) {
	const n = 256
	bias := make([]float32, n*n)
	for t := range n {
		for s := t + 1; s < n; s++ {
			bias[t*n+s] = -1e30
		}
	}
	for _, f := range []struct {
		name string
		fn   func([]float32) attnRow
	}{{"maskRow", maskRow}, {"plain", maskRowRef}} {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				for t := range n {
					f.fn(bias[t*n : (t+1)*n])
				}
			}
		})
	}
}

// TestAttnOutRows checks attnOutRows (the AVX2 kernel where the CPU has
// it) against attnOutRowsGo bit for bit over odd row lengths and counts,
// strides, and NaN, ±Inf, 0 and subnormal sums and outputs.
func TestAttnOutRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, 1e-40}
	for _, h := range []int{1, 2, 7, 8, 9, 15, 16, 17, 64, 100} {
		for _, n := range []int{0, 1, 2, 7, 17} {
			ldo, ldd := h+rng.IntN(5), h+2+rng.IntN(5)
			o := make([]float32, max(0, (n-1)*ldo+h))
			mx, l := make([]float32, n), make([]float32, n)
			for i := range o {
				o[i] = float32(rng.NormFloat64() * 3)
			}
			for i := range n {
				mx[i], l[i] = float32(rng.NormFloat64()*5), float32(rng.Float64()*100)
			}
			if n > 1 {
				o[rng.IntN(len(o))] = special[rng.IntN(len(special))]
				l[rng.IntN(n)] = special[rng.IntN(len(special))]
				mx[rng.IntN(n)] = special[rng.IntN(len(special))]
			}
			got, want := make([]float32, max(0, (n-1)*ldd+h+2)), make([]float32, max(0, (n-1)*ldd+h+2))
			for i := range got {
				got[i] = float32(i)
				want[i] = float32(i)
			}
			attnOutRows(got, ldd, o, ldo, mx, l, n, h)
			attnOutRowsGo(want, ldd, o, ldo, mx, l, n, h)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("h %d n %d: dst[%d] = %g, Go %g", h, n, i, got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkAttnOutRows times the forward's output rows of one block (96
// rows of 64 features into rows of 66).
func BenchmarkAttnOutRows(b *testing.B) {
	const n, h = 96, 64
	o, dst := make([]float32, n*h), make([]float32, n*(h+2))
	mx, l := make([]float32, n), make([]float32, n)
	for i := range n {
		l[i] = float32(i + 1)
	}
	b.Run("kernel", func(b *testing.B) {
		for b.Loop() {
			attnOutRows(dst, h+2, o, h, mx, l, n, h)
		}
	})
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			attnOutRowsGo(dst, h+2, o, h, mx, l, n, h)
		}
	})
}

// TestAttnRowStats checks attnRowStats (the AVX2 kernel where the CPU has
// it) against attnRowStatsGo bit for bit over row lengths around vek32's
// blocks of 32, counts, strides, and NaN, ±Inf, 0 and subnormal entries.
func TestAttnRowStats(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, 1e-40}
	for _, h := range []int{1, 2, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 1000} {
		for _, n := range []int{0, 1, 2, 7, 17} {
			ldx, ldf := h+rng.IntN(5), h+2+rng.IntN(5)
			x, f := make([]float32, max(0, (n-1)*ldx+h)), make([]float32, max(0, (n-1)*ldf+h+2))
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			for i := range f {
				f[i] = float32(rng.NormFloat64() * 4)
			}
			if n > 1 {
				x[rng.IntN(len(x))] = special[rng.IntN(len(special))]
				f[rng.IntN(len(f))] = special[rng.IntN(len(special))]
				f[ldf+h+1] = special[rng.IntN(len(special))]
			}
			var got, want [3][]float32
			for k := range 3 {
				got[k], want[k] = make([]float32, n), make([]float32, n)
			}
			attnRowStats(got[0], got[1], got[2], x, ldx, f, ldf, n, h)
			attnRowStatsGo(want[0], want[1], want[2], x, ldx, f, ldf, n, h)
			for k := range 3 {
				for i := range n {
					if math.Float32bits(got[k][i]) != math.Float32bits(want[k][i]) {
						t.Fatalf("h %d n %d: output %d row %d = %g, Go %g", h, n, k, i, got[k][i], want[k][i])
					}
				}
			}
		}
	}
}

// BenchmarkAttnRowStats times the backward's per-row D, m and 1/l of one
// block (96 rows of 64 features).
func BenchmarkAttnRowStats(b *testing.B) {
	const n, h = 96, 64
	x, f := make([]float32, n*h), make([]float32, n*(h+2))
	for i := range f {
		f[i] = 1
	}
	d, mx, linv := make([]float32, n), make([]float32, n), make([]float32, n)
	b.Run("kernel", func(b *testing.B) {
		for b.Loop() {
			attnRowStats(d, mx, linv, x, h, f, h+2, n, h)
		}
	})
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			attnRowStatsGo(d, mx, linv, x, h, f, h+2, n, h)
		}
	})
}
