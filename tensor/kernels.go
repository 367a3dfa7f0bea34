package tensor

import (
	"fmt"
	"math"
)

// kernelSet is one implementation of the inner loops: hand-written AVX2/FMA
// assembly on amd64 CPUs that have it, portable Go everywhere. The set is
// chosen once at start-up (useKernels) and never changed; tests run every
// public kernel against both sets.
//
// Within one set every shape computes a (query, row) pair with the same
// operation order, so dot, dot4 and dot34 return bit-identical values for
// the same pair.
type kernelSet struct {
	name string
	// dot returns <q, x[:len(q)]>.
	dot func(q, x []float32) float32
	// dot4 writes out[j] = <q, x[j*ldx : j*ldx+len(q)]> for j < 4.
	dot4 func(out *[4]float32, q, x []float32, ldx int)
	// dot34 writes out[i*4+j] = <q[i*ldq : i*ldq+d], x[j*ldx : j*ldx+d]>.
	dot34 func(out *[12]float32, q []float32, ldq int, x []float32, ldx, d int)
	// dotF16 and dotF16x4 are dot and dot4 with rows stored as IEEE
	// binary16 bit patterns.
	dotF16   func(q []float32, x []uint16) float32
	dotF16x4 func(out *[4]float32, q []float32, x []uint16, ldx int)
	// dotU8 and dotU8x4 are dot and dot4 with rows of unsigned bytes.
	dotU8   func(q []float32, x []uint8) float32
	dotU8x4 func(out *[4]float32, q []float32, x []uint8, ldx int)
	// Conversions of len(dst) elements.
	f16to32 func(dst []float32, src []uint16)
	f32to16 func(dst []uint16, src []float32)
	u8to32  func(dst []float32, src []uint8)
	// bf16to32 widens bfloat16 bit patterns to float32 (exact).
	bf16to32 func(dst []float32, src []uint16)
}

// goKernels is the portable implementation. It mirrors the assembly's
// 8-lane accumulation so both sets agree to rounding.
var goKernels = &kernelSet{
	name: "go",
	dot:  dotGo,
	dot4: func(out *[4]float32, q, x []float32, ldx int) {
		n := len(q)
		for j := range 4 {
			out[j] = dotGo(q, x[j*ldx:j*ldx+n])
		}
	},
	dot34: func(out *[12]float32, q []float32, ldq int, x []float32, ldx, d int) {
		for i := range 3 {
			qi := q[i*ldq : i*ldq+d]
			for j := range 4 {
				out[i*4+j] = dotGo(qi, x[j*ldx:j*ldx+d])
			}
		}
	},
	dotF16: dotF16Go,
	dotF16x4: func(out *[4]float32, q []float32, x []uint16, ldx int) {
		n := len(q)
		for j := range 4 {
			out[j] = dotF16Go(q, x[j*ldx:j*ldx+n])
		}
	},
	dotU8: dotU8Go,
	dotU8x4: func(out *[4]float32, q []float32, x []uint8, ldx int) {
		n := len(q)
		for j := range 4 {
			out[j] = dotU8Go(q, x[j*ldx:j*ldx+n])
		}
	},
	f16to32:  f16ToF32Go,
	f32to16:  f32ToF16Go,
	u8to32:   u8ToF32Go,
	bf16to32: bf16ToF32Go,
}

// kernels is the set the public functions use: assembly when the CPU
// supports it, Go otherwise. It is fixed at package initialisation.
var kernels = pickKernels()

func pickKernels() *kernelSet {
	if asmKernels != nil {
		return asmKernels
	}
	return goKernels
}

// KernelName reports which implementation the kernels run on ("avx2" or
// "go"), for benchmark reports.
func KernelName() string { return kernels.name }

// tailDot adds Σ q[i]·x[i] to s in index order: the scalar remainder every
// kernel shares after its 8-wide part.
func tailDot(s float32, q, x []float32) float32 {
	x = x[:len(q)]
	for i, v := range q {
		s += v * x[i]
	}
	return s
}

func tailDotF16(s float32, q []float32, x []uint16) float32 {
	x = x[:len(q)]
	for i, v := range q {
		s += v * F16ToF32(x[i])
	}
	return s
}

func tailDotU8(s float32, q []float32, x []uint8) float32 {
	x = x[:len(q)]
	for i, v := range q {
		s += v * float32(x[i])
	}
	return s
}

// hsum8 reduces eight lanes in the assembly's order.
func hsum8(a *[8]float32) float32 {
	t0, t1, t2, t3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return (t0 + t2) + (t1 + t3)
}

func dotGo(q, x []float32) float32 {
	n := len(q)
	x = x[:n]
	n8 := n &^ 7
	var a [8]float32
	for i := 0; i < n8; i += 8 {
		qq, xx := q[i:i+8:i+8], x[i:i+8:i+8]
		a[0] += qq[0] * xx[0]
		a[1] += qq[1] * xx[1]
		a[2] += qq[2] * xx[2]
		a[3] += qq[3] * xx[3]
		a[4] += qq[4] * xx[4]
		a[5] += qq[5] * xx[5]
		a[6] += qq[6] * xx[6]
		a[7] += qq[7] * xx[7]
	}
	return tailDot(hsum8(&a), q[n8:], x[n8:])
}

// dotF16Go and dotU8Go are two loops on purpose: one generic loop over
// uint16|uint8 took, per 768-wide row, 1.16× (F16) and 2.05× (U8) their CPU
// time with the conversion as a type switch on the element, 1.36× and 2.7×
// with it as a func value (median of 21 interleaved rounds of 1000 rows,
// process CPU time, 2026-12-02, load 6.5 on 2 cores): Go does not
// specialise the conversion into the loop.
func dotF16Go(q []float32, x []uint16) float32 {
	n := len(q)
	x = x[:n]
	n8 := n &^ 7
	var a [8]float32
	for i := 0; i < n8; i += 8 {
		for l := range 8 {
			a[l] += q[i+l] * F16ToF32(x[i+l])
		}
	}
	return tailDotF16(hsum8(&a), q[n8:], x[n8:])
}

func dotU8Go(q []float32, x []uint8) float32 {
	n := len(q)
	x = x[:n]
	n8 := n &^ 7
	var a [8]float32
	for i := 0; i < n8; i += 8 {
		for l := range 8 {
			a[l] += q[i+l] * float32(x[i+l])
		}
	}
	return tailDotU8(hsum8(&a), q[n8:], x[n8:])
}

func f16ToF32Go(dst []float32, src []uint16) {
	src = src[:len(dst)]
	for i, h := range src {
		dst[i] = F16ToF32(h)
	}
}

func f32ToF16Go(dst []uint16, src []float32) {
	src = src[:len(dst)]
	for i, f := range src {
		dst[i] = F32ToF16(f)
	}
}

func bf16ToF32Go(dst []float32, src []uint16) {
	src = src[:len(dst)]
	for i, h := range src {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}

func u8ToF32Go(dst []float32, src []uint8) {
	src = src[:len(dst)]
	for i, b := range src {
		dst[i] = float32(b)
	}
}

func checkLen(what string, got, want int) {
	if got < want {
		panic(fmt.Sprintf("tensor: %s has length %d, need %d", what, got, want))
	}
}
