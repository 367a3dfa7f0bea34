package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// vecPaths are the kernel widths this CPU runs (16: AVX-512, 8: AVX2, 0:
// Go), each tested by the tests below whatever Exp and Max pick.
func vecPaths() []int {
	p := []int{0}
	if hasAVX2 {
		p = append(p, 8)
	}
	if hasAVX512 {
		p = append(p, 16)
	}
	return p
}

// expKernelModel is the float32 that expAVX512 and expAVX2 compute for x,
// operation by operation in Go: clamp to [−104, 89] (NaN kept), k =
// round(x·log2 e) to nearest even, r by two FMAs, the degree-7 polynomial
// by Horner FMAs from 1/5040, and p·2^k rounded once (exact in float64,
// then one conversion, subnormals and overflow included).
func expKernelModel(x float32) float32 {
	if x != x {
		return x
	}
	c := func(bits uint32) float32 { return math.Float32frombits(bits) }
	x = max(min(x, c(0x42b20000)), c(0xc2d00000))
	k := float32(math.RoundToEven(float64(x * c(0x3fb8aa3b))))
	r := fma32(-k, c(0x3f318000), x)
	r = fma32(-k, c(0xb95e8083), r)
	p := c(0x39500d01)
	for _, b := range []uint32{0x3ab60b61, 0x3c088889, 0x3d2aaaab, 0x3e2aaaab, 0x3f000000, 0x3f800000, 0x3f800000} {
		p = fma32(p, r, c(b))
	}
	return float32(float64(p) * math.Ldexp(1, int(k)))
}

// expInputs are IEEE special values, the clamp and overflow edges, the
// subnormal range, values around every k·ln2/2 rounding boundary, random
// values over [−110, 95] and random bit patterns.
func expInputs() []float32 {
	xs := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -1e30, 1e30,
		88.72, 88.7228, 88.72284, 88.73, 88.376, 88.377, 89, 89.5, -103.9, -103.97, -103.98, -104, -104.5,
		-87.3, -87.4, -100, -102, 0, float32(math.Copysign(0, -1)), 1e-8, -1e-8, 1e-30, 0x1p-149, -0x1p-149,
		math.MaxFloat32, -math.MaxFloat32, math.Float32frombits(0x7fc00001), math.Float32frombits(0xffa00000)}
	for k := -302; k <= 258; k++ { // around (k/2)·ln2, where round(x·log2 e) changes
		m := float32(float64(k) / 2 * math.Ln2)
		xs = append(xs, m, math.Nextafter32(m, -200), math.Nextafter32(m, 200))
	}
	r := rand.New(rand.NewPCG(7, 17))
	for range 200000 {
		xs = append(xs, float32(r.Float64()*205-110))
	}
	for range 50000 {
		xs = append(xs, math.Float32frombits(r.Uint32()))
	}
	return xs
}

// TestExpKernelsMatchModel: every vector path of Exp gives the model's
// float32 bit for bit (NaN for NaN), so expAVX2 and expAVX512 agree, at
// every length and offset (the tail goes through the kernel too); the Go
// path gives exp32's.
func TestExpKernelsMatchModel(t *testing.T) {
	xs := expInputs()
	for _, lanes := range vecPaths() {
		got := make([]float32, len(xs))
		expWith(got, xs, lanes)
		for i, x := range xs {
			want := exp32(x)
			if lanes > 0 {
				want = expKernelModel(x)
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] != got[i] && want != want) {
				t.Fatalf("lanes %d: exp(%g) = %g (%#x), want %g (%#x)", lanes, x, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
			}
		}
		// Every length around the block sizes, at an odd offset, in place
		// and not: the same values as the long run.
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 1001} {
			src := xs[3 : 3+n]
			dst := make([]float32, n)
			expWith(dst, src, lanes)
			in := append([]float32(nil), src...)
			expWith(in, in, lanes)
			for i := range n {
				w := got[3+i]
				for _, g := range []float32{dst[i], in[i]} {
					if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
						t.Fatalf("lanes %d, n=%d: exp(%g) = %g, want %g", lanes, n, src[i], g, w)
					}
				}
			}
		}
	}
}

// TestExpModelAccuracy: the kernels' values (the model's) are within 2
// ulp of the correctly rounded e^x over a sweep of every 251st float32 in
// [−110, 95] — the accuracy Exp documents.
func TestExpModelAccuracy(t *testing.T) {
	lo, hi := math.Float32bits(-110), math.Float32bits(95)
	check := func(x float32) {
		got, want := expKernelModel(x), float32(math.Exp(float64(x)))
		if got == want {
			return
		}
		ulp := math.Nextafter32(want, float32(math.Inf(1))) - want
		if math.IsInf(float64(want), 0) || math.Abs(float64(got-want)) > 2*float64(ulp) {
			t.Fatalf("exp(%g) = %g, want %g", x, got, want)
		}
	}
	step := uint32(251)
	if testing.Short() {
		step = 997
	}
	for b := uint32(0); b < hi; b += step { // [+0, 95]
		check(math.Float32frombits(b))
	}
	for b := uint32(0x80000000); b < lo; b += step { // [−0, −110]
		check(math.Float32frombits(b))
	}
}

// TestMaxPaths: every path of Max (AVX-512, AVX2, Go) gives a plain scan's
// maximum bit for bit, NaNs at every position class and signed zeros
// included.
func TestMaxPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	for _, lanes := range vecPaths() {
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000, 1024} {
			x := make([]float32, n)
			for trial := range 6 {
				for i := range x {
					x[i] = rng.Float32()*100 - 50
					switch trial {
					case 1: // all negative with zeros of both signs
						x[i] = -rng.Float32() * 10
						if i%3 == 0 {
							x[i] = float32(math.Copysign(0, -1))
						}
						if i == n/2 {
							x[i] = 0
						}
					case 2: // −0s only
						x[i] = float32(math.Copysign(0, -1))
					case 3: // huge and infinite
						x[i] = float32(math.Inf(-1))
						if i%5 == 1 {
							x[i] = -math.MaxFloat32
						}
					}
				}
				if trial == 4 && n > 0 {
					x[rng.IntN(n)] = float32(math.Inf(1))
				}
				if trial == 5 && n > 0 {
					x[rng.IntN(n)] = float32(math.NaN())
				}
				want := float32(math.Inf(-1))
				for _, v := range x {
					want = max(want, v)
				}
				got := maxWith(x, lanes)
				if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
					t.Fatalf("lanes %d, n=%d, trial %d: Max = %v (%#x), want %v (%#x)", lanes, n, trial, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
			// A NaN at each position: flagged in the blocks, caught in the tail.
			for p := range n {
				y := make([]float32, n)
				for i := range y {
					y[i] = rng.Float32()
				}
				y[p] = float32(math.NaN())
				if got := maxWith(y, lanes); got == got {
					t.Fatalf("lanes %d, n=%d: NaN at %d: Max = %v", lanes, n, p, got)
				}
			}
		}
	}
}

// TestSiluKernels: mulSiluAVX2 and siluGradMulAVX2 (through mulSiluVec and
// siluGradMulVec) give the Go loops' float32s bit for bit over σ from
// every vector Exp kernel the CPU has (their values are the same), at odd
// lengths and offsets, in place on every operand, with saturating, huge,
// tiny, infinite and NaN gates.
func TestSiluKernels(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 and FMA")
	}
	r := rand.New(rand.NewPCG(8, 3))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 17, -17, 88, -88, 89, -89, 104, -104, 200, -200,
		math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b) }
	for _, lanes := range vecPaths()[1:] {
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 100, 255, 256, 257, 1000, 4099} {
			v, u, g := make([]float32, n+1), make([]float32, n+1), make([]float32, n+1)
			for i := range g {
				v[i], u[i], g[i] = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64()*4)
				if i%13 == 5 {
					g[i] = special[r.IntN(len(special))]
				}
				if i%29 == 3 {
					v[i] = special[r.IntN(len(special))]
				}
			}
			v, u, g = v[1:], u[1:], g[1:] // an odd offset
			want, got := make([]float32, n), make([]float32, n)
			check := func(what string) {
				t.Helper()
				for i := range n {
					if !same(got[i], want[i]) {
						t.Fatalf("lanes %d, n=%d, %s [%d] (g=%g): %g (%#x), want %g (%#x)", lanes, n, what, i, g[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
			run := func(f func(d []float32) int, rest func(d []float32, k int)) {
				k := f(got)
				if k != n&^7 {
					t.Fatalf("n=%d: the kernel did %d elements", n, k)
				}
				rest(got, k)
			}
			mulSiluGo(want, u, g, lanes)
			run(func(d []float32) int { return mulSiluVec(d, u, g) }, func(d []float32, k int) { mulSiluGo(d[k:], u[k:], g[k:], lanes) })
			check("MulSilu")
			for _, alias := range []int{0, 1} { // dst = a, dst = g
				a2, g2 := append([]float32(nil), u...), append([]float32(nil), g...)
				d := [][]float32{a2, g2}[alias]
				k := mulSiluVec(d, a2, g2)
				mulSiluGo(d[k:], a2[k:], g2[k:], lanes)
				copy(got, d)
				check(fmt.Sprintf("MulSilu in place %d", alias))
			}
			siluGradMulGo(want, v, u, g, lanes)
			run(func(d []float32) int { return siluGradMulVec(d, v, u, g) }, func(d []float32, k int) { siluGradMulGo(d[k:], v[k:], u[k:], g[k:], lanes) })
			check("SiluGradMul")
			for alias := range 3 { // dst = v, u, g
				v2, u2, g2 := append([]float32(nil), v...), append([]float32(nil), u...), append([]float32(nil), g...)
				d := [][]float32{v2, u2, g2}[alias]
				k := siluGradMulVec(d, v2, u2, g2)
				siluGradMulGo(d[k:], v2[k:], u2[k:], g2[k:], lanes)
				copy(got, d)
				check(fmt.Sprintf("SiluGradMul in place %d", alias))
			}
		}
	}
}
