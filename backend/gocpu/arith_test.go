package gocpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
)

// TestArithKernels compares the binary kernels (vv, vs and sv forms of
// Add, Sub, Mul: arithAVX2's where the CPU has AVX2; Div's divVV, divVS,
// divSV) with Go's float32 operation bit for bit (NaNs as NaNs) over odd
// lengths, with zeros of both signs, infinities, NaN, huge and subnormal
// values, into a new slice and in place.
func TestArithKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e38, -3e38, 1e-40, -1e-42, 1}
	gen := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			if r.IntN(4) == 0 {
				x[i] = special[r.IntN(len(special))]
			} else {
				x[i] = float32(r.NormFloat64())
			}
		}
		return x
	}
	ops := map[backends.OpType]func(a, b float32) float32{
		backends.OpTypeAdd: func(a, b float32) float32 { return a + b },
		backends.OpTypeSub: func(a, b float32) float32 { return a - b },
		backends.OpTypeMul: func(a, b float32) float32 { return a * b },
		backends.OpTypeDiv: func(a, b float32) float32 { return a / b },
	}
	for op, f := range ops {
		k := binaryKernels[op]
		same := func(what string, n int, got []float32, want func(i int) float32) {
			t.Helper()
			for i := range n {
				if w := want(i); math.Float32bits(got[i]) != math.Float32bits(w) && !(got[i] != got[i] && w != w) {
					t.Fatalf("%s %s n=%d: [%d] = %v, want %v", op, what, n, i, got[i], w)
				}
			}
		}
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 1000} {
			for _, s := range special {
				a, b := gen(n), gen(n)
				d := make([]float32, n)
				k.vv(d, a, b)
				same("vv", n, d, func(i int) float32 { return f(a[i], b[i]) })
				k.vs(d, a, s)
				same("vs", n, d, func(i int) float32 { return f(a[i], s) })
				k.sv(d, s, b)
				same("sv", n, d, func(i int) float32 { return f(s, b[i]) })
				ac, bc := slices.Clone(a), slices.Clone(b)
				k.vv(ac, ac, b)
				same("vv in a", n, ac, func(i int) float32 { return f(a[i], b[i]) })
				k.vv(bc, a, bc)
				same("vv in b", n, bc, func(i int) float32 { return f(a[i], b[i]) })
				ac, bc = slices.Clone(a), slices.Clone(b)
				k.vs(ac, ac, s)
				same("vs in place", n, ac, func(i int) float32 { return f(a[i], s) })
				k.sv(bc, s, bc)
				same("sv in place", n, bc, func(i int) float32 { return f(s, b[i]) })
			}
		}
	}
}

// BenchmarkArith times the binary kernels' vv, vs and sv forms into a
// separate destination on 4096 elements (a fused group's tile, in L1),
// with vek's kernels beside them for Add, Sub and Mul. ns per op:
//
//	go test -run '^$' -bench Arith ./backend/gocpu/
func BenchmarkArith(b *testing.B) {
	const n = 4096
	r := rand.New(rand.NewPCG(1, 2))
	x, y, d := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(r.NormFloat64()), float32(r.NormFloat64())+3
	}
	for _, op := range []backends.OpType{backends.OpTypeAdd, backends.OpTypeSub, backends.OpTypeMul, backends.OpTypeDiv} {
		sets := []struct {
			name string
			k    binaryKernel
		}{{"", binaryKernels[op]}}
		if op != backends.OpTypeDiv {
			sets = append(sets, struct {
				name string
				k    binaryKernel
			}{"/vek", vekKernels[op]})
		}
		for _, set := range sets {
			k := set.k
			b.Run(op.String()+set.name+"/vv", func(b *testing.B) {
				for b.Loop() {
					k.vv(d, x, y)
				}
			})
			b.Run(op.String()+set.name+"/vs", func(b *testing.B) {
				for b.Loop() {
					k.vs(d, x, 1.5)
				}
			})
			b.Run(op.String()+set.name+"/sv", func(b *testing.B) {
				for b.Loop() {
					k.sv(d, 1.5, y)
				}
			})
		}
	}
}

// TestSqrtF32 compares sqrtF32 with its reference sqrtGo bit for bit (NaNs
// as NaNs) over odd lengths and over random bit patterns of every class
// (negative, ±0, subnormal, ±Inf, NaN), into a new slice and in place.
func TestSqrtF32(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 1000, 1 << 20} {
		x := make([]float32, n)
		for i := range x {
			switch r.IntN(3) {
			case 0:
				x[i] = math.Float32frombits(r.Uint32()) // any class
			case 1:
				x[i] = math.Float32frombits(r.Uint32() & 0x807fffff) // ±0 and subnormals
			default:
				x[i] = float32(r.ExpFloat64())
			}
		}
		if n > 4 {
			x[0], x[1], x[2], x[3] = float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), float32(math.NaN())
		}
		want, got := make([]float32, n), make([]float32, n)
		sqrtGo(want, x)
		sqrtF32(got, x)
		inPlace := slices.Clone(x)
		sqrtF32(inPlace, inPlace)
		for i := range want {
			for _, g := range []float32{got[i], inPlace[i]} {
				if math.Float32bits(g) != math.Float32bits(want[i]) && !(g != g && want[i] != want[i]) {
					t.Fatalf("n=%d: sqrt(%v) [%d] = %v, want %v", n, x[i], i, g, want[i])
				}
			}
		}
	}
}

// BenchmarkSqrt times sqrtF32 and its reference sqrtGo on 4096 elements.
// ns per op:
//
//	go test -run '^$' -bench Sqrt ./backend/gocpu/
func BenchmarkSqrt(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x, d := make([]float32, 4096), make([]float32, 4096)
	for i := range x {
		x[i] = float32(r.ExpFloat64())
	}
	b.Run("sqrtF32", func(b *testing.B) {
		for b.Loop() {
			sqrtF32(d, x)
		}
	})
	b.Run("sqrtGo", func(b *testing.B) {
		for b.Loop() {
			sqrtGo(d, x)
		}
	})
}
