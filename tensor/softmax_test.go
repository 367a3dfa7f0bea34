package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSoftmaxRows compares the fused softmax and its gradient with the
// float64 reference over random rows of odd and even lengths, zero rows,
// a single element (T = 1), long rows, and rows with masked (−1e30)
// entries as attention's causal mask gives them, in and out of place.
func TestSoftmaxRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	cases := []struct{ rows, n int }{{0, 5}, {1, 1}, {7, 1}, {3, 7}, {5, 16}, {4, 33}, {2, 256}, {300, 200}, {2, 4099}, {1, 40000}}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%d", c.rows, c.n), func(t *testing.T) {
			x := make([]float32, c.rows*c.n)
			g := make([]float32, len(x))
			for i := range x {
				x[i] = float32(r.NormFloat64() * 4)
				g[i] = float32(r.NormFloat64())
				if c.n > 2 && r.IntN(4) == 0 {
					x[i] = -1e30 // masked
				}
			}
			p := make([]float32, len(x))
			SoftmaxRows(p, x, c.n, 2)
			dx := make([]float32, len(x))
			SoftmaxGradRows(dx, p, g, c.n, 2)
			for row := range c.rows {
				xs := x[row*c.n : (row+1)*c.n]
				want := refSoftmax(xs)
				dot := 0.0
				for i, pv := range want {
					dot += pv * float64(g[row*c.n+i])
				}
				sum := 0.0
				for i, w := range want {
					got := float64(p[row*c.n+i])
					sum += got
					// Float32 sums of n terms: relative error up to about n·2⁻²⁴/8.
					if math.Abs(got-w) > (2e-6+2e-10*float64(c.n))*w+1e-12 {
						t.Fatalf("row %d: p[%d] = %g, want %g", row, i, got, w)
					}
					wd := w * (float64(g[row*c.n+i]) - dot)
					scale := w * (math.Abs(float64(g[row*c.n+i])) + math.Abs(dot) + 1)
					if d := math.Abs(float64(dx[row*c.n+i]) - wd); d > 1e-5*scale+1e-12 {
						t.Fatalf("row %d: dx[%d] = %g, want %g", row, i, dx[row*c.n+i], wd)
					}
				}
				if math.Abs(sum-1) > 1e-5 {
					t.Fatalf("row %d sums to %g", row, sum)
				}
			}
			// In place: dst = x for the softmax, dst = g for the gradient.
			SoftmaxRows(x, x, c.n, 1)
			SoftmaxGradRows(g, p, g, c.n, 1)
			for i := range x {
				if x[i] != p[i] || g[i] != dx[i] {
					t.Fatalf("in place [%d]: %g, %g, want %g, %g", i, x[i], g[i], p[i], dx[i])
				}
			}
		})
	}
	// A row with NaN gives NaN, as the unfused graph does.
	p := make([]float32, 3)
	SoftmaxRows(p, []float32{1, float32(math.NaN()), 2}, 3, 1)
	for _, v := range p {
		if !math.IsNaN(float64(v)) {
			t.Fatalf("softmax with a NaN = %v", p)
		}
	}
}

func TestSoftmaxRowsBadLength(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a length that is not a multiple of the row")
		}
	}()
	SoftmaxRows(make([]float32, 10), make([]float32, 10), 3, 1)
}

// BenchmarkSoftmaxRows times the fused softmax and its gradient on one
// layer's attention scores of the 25M benchmark model ([8, 8, 256, 256]).
func BenchmarkSoftmaxRows(b *testing.B) {
	const n = 256
	x := randVec(rand.New(rand.NewPCG(1, 2)), 8*8*256*n)
	p, g := make([]float32, len(x)), make([]float32, len(x))
	copy(g, x)
	benchBytes(b, "forward", 8*len(x), func() { SoftmaxRows(p, x, n, 0) })
	benchBytes(b, "gradient", 12*len(x), func() { SoftmaxGradRows(x, p, g, n, 0) })
}

// TestSumExpRows compares SumExpRows and ExpShiftScaleRows with float64
// references over zero rows, T = 1, odd and long rows (past one block of
// exponentials) and masked entries.
func TestSumExpRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 10))
	for _, c := range []struct{ rows, n int }{{0, 3}, {1, 1}, {4, 7}, {3, 256}, {2, 1000}, {40, 4099}} {
		t.Run(fmt.Sprintf("%dx%d", c.rows, c.n), func(t *testing.T) {
			x := make([]float32, c.rows*c.n)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 5)
				if c.n > 2 && i%9 == 4 {
					x[i] = -1e30
				}
			}
			s := make([]float32, c.rows)
			SumExpRows(s, x, c.n, 2)
			lse := make([]float32, c.rows)
			LogSumExpRows(lse, x, c.n, 2)
			for j := range c.rows {
				// The float32s of ReduceMax, SumExpRows, Log and Add one by one.
				want := float32(math.Log(float64(s[j]))) + Max(x[j*c.n:(j+1)*c.n])
				if math.Float32bits(lse[j]) != math.Float32bits(want) {
					t.Fatalf("row %d: LogSumExpRows %g, want log(SumExpRows) + max = %g", j, lse[j], want)
				}
			}
			l, g := make([]float32, c.rows), make([]float32, c.rows)
			for j := range l {
				l[j], g[j] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			d := make([]float32, len(x))
			ExpShiftScaleRows(d, x, l, g, c.n, 2)
			for j := range c.rows {
				row := x[j*c.n : (j+1)*c.n]
				m := math.Inf(-1)
				for _, v := range row {
					m = max(m, float64(v))
				}
				want := 0.0
				for _, v := range row {
					want += math.Exp(float64(v) - m)
				}
				if math.Abs(float64(s[j])-want) > (2e-6+2e-10*float64(c.n))*want {
					t.Fatalf("row %d: sum %g, want %g", j, s[j], want)
				}
				for i, v := range row {
					w := float64(g[j]) * math.Exp(float64(v)-float64(l[j]))
					if got := float64(d[j*c.n+i]); math.Abs(got-w) > 4e-6*math.Abs(w)+1e-37 {
						t.Fatalf("row %d [%d]: %g, want %g", j, i, got, w)
					}
				}
			}
			ExpShiftScaleRows(x, x, l, g, c.n, 1) // in place
			for i := range x {
				if x[i] != d[i] {
					t.Fatalf("in place [%d] = %g, want %g", i, x[i], d[i])
				}
			}
		})
	}
}

// TestExpShiftScale checks the fused pass (expShiftScaleAVX2 on amd64)
// against the three passes it replaces (expShiftScaleGo), bit for bit,
// in and out of place, over lengths around the 8-lane blocks and a
// vocabulary row, shifts and scales of both signs, 1 (SumExpRows' scale)
// and values that overflow, underflow to subnormals and zero, ±Inf and
// NaN.
func TestExpShiftScale(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 12))
	special := []float32{0, -0.0, 88.7, 89, 200, -87, -103.9, -104, -150, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 63, 16384 + 3} {
		for _, c := range []struct{ shift, scale float32 }{{0, 1}, {3.5, 1}, {-20, 0.25}, {12, -3}, {0.5, 1e-30}, {-90, 1}} {
			t.Run(fmt.Sprintf("n%d/shift%g/scale%g", n, c.shift, c.scale), func(t *testing.T) {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 30)
					if i%5 == 2 {
						x[i] = special[r.IntN(len(special))]
					}
				}
				want := make([]float32, n)
				expShiftScaleGo(want, x, c.shift, c.scale)
				got := make([]float32, n)
				expShiftScale(got, x, c.shift, c.scale)
				in := append([]float32(nil), x...)
				expShiftScale(in, in, c.shift, c.scale)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(in[i]) != math.Float32bits(want[i]) {
						t.Fatalf("x[%d] = %g: fused %g (in place %g), three passes %g", i, x[i], got[i], in[i], want[i])
					}
				}
			})
		}
	}
}

// BenchmarkSumExpRows times the log-sum-exp kernels on 64 rows of the 25M
// benchmark model's vocabulary (16,384).
func BenchmarkSumExpRows(b *testing.B) {
	const rows, n = 64, 16384
	x := randVec(rand.New(rand.NewPCG(1, 2)), rows*n)
	s, l, g := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	d := make([]float32, len(x))
	benchBytes(b, "sum", 4*len(x), func() { SumExpRows(s, x, n, 0) })
	benchBytes(b, "gradient", 8*len(x), func() { ExpShiftScaleRows(d, x, l, g, n, 0) })
}

// benchBytes runs fn as the sub-benchmark name, reporting bytes per call
// as its throughput.
func benchBytes(b *testing.B, name string, bytes int, fn func()) {
	b.Run(name, func(b *testing.B) {
		b.SetBytes(int64(bytes))
		for b.Loop() {
			fn()
		}
	})
}
