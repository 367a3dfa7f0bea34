package tensor

import "golang.org/x/sys/cpu"

//go:noescape
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

//go:noescape
func dot1x1AVX2(q, x *float32, n int) float32

//go:noescape
func dot1x4AVX2(q, x *float32, ldx, n int, out *float32)

//go:noescape
func dot3x4AVX2(q *float32, ldq int, x *float32, ldx, n int, out *float32)

//go:noescape
func dotF16x1AVX2(q *float32, x *uint16, n int) float32

//go:noescape
func dotF16x4AVX2(q *float32, x *uint16, ldx, n int, out *float32)

//go:noescape
func dotU8x1AVX2(q *float32, x *uint8, n int) float32

//go:noescape
func dotU8x4AVX2(q *float32, x *uint8, ldx, n int, out *float32)

//go:noescape
func f16ToF32AVX2(dst *float32, src *uint16, n int)

//go:noescape
func f32ToF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func u8ToF32AVX2(dst *float32, src *uint8, n int)

//go:noescape
func bf16ToF32AVX2(dst *float32, src *uint16, n int)

// hasF16C reports the F16C extension (CPUID.1:ECX bit 29), which
// golang.org/x/sys/cpu does not expose.
func hasF16C() bool {
	_, _, ecx, _ := cpuid(1, 0)
	return ecx&(1<<29) != 0
}

// asmKernels is the AVX2/FMA/F16C set, or nil when the CPU (or the OS, for
// the YMM state) lacks one of them.
var asmKernels = newAsmKernels()

func newAsmKernels() *kernelSet {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA || !hasF16C() {
		return nil
	}
	return &kernelSet{
		name:     "avx2",
		dot:      dotAVX2,
		dot4:     dot4AVX2,
		dot34:    dot34AVX2,
		dotF16:   dotF16AVX2,
		dotF16x4: dotF16x4Wrap,
		dotU8:    dotU8AVX2,
		dotU8x4:  dotU8x4Wrap,
		f16to32:  f16to32AVX2,
		f32to16:  f32to16AVX2,
		u8to32:   u8to32AVX2,
		bf16to32: bf16to32AVX2,
	}
}

func dotAVX2(q, x []float32) float32 {
	n := len(q)
	if n == 0 {
		return 0
	}
	x = x[:n]
	n8 := n &^ 7
	var s float32
	if n8 > 0 {
		s = dot1x1AVX2(&q[0], &x[0], n8)
	}
	return tailDot(s, q[n8:], x[n8:])
}

func dot4AVX2(out *[4]float32, q, x []float32, ldx int) {
	n := len(q)
	if n == 0 {
		*out = [4]float32{}
		return
	}
	checkLen("rows", len(x), 3*ldx+n)
	n8 := n &^ 7
	if n8 > 0 {
		dot1x4AVX2(&q[0], &x[0], ldx, n8, &out[0])
	} else {
		*out = [4]float32{}
	}
	if n8 < n {
		for j := range 4 {
			out[j] = tailDot(out[j], q[n8:], x[j*ldx+n8:j*ldx+n])
		}
	}
}

func dot34AVX2(out *[12]float32, q []float32, ldq int, x []float32, ldx, d int) {
	if d == 0 {
		*out = [12]float32{}
		return
	}
	checkLen("queries", len(q), 2*ldq+d)
	checkLen("rows", len(x), 3*ldx+d)
	n8 := d &^ 7
	if n8 > 0 {
		dot3x4AVX2(&q[0], ldq, &x[0], ldx, n8, &out[0])
	} else {
		*out = [12]float32{}
	}
	if n8 < d {
		for i := range 3 {
			qi := q[i*ldq+n8 : i*ldq+d]
			for j := range 4 {
				out[i*4+j] = tailDot(out[i*4+j], qi, x[j*ldx+n8:j*ldx+d])
			}
		}
	}
}

// dotF16AVX2, dotF16x4Wrap and their U8 twins are written out per element
// type: each names its own assembly routine and its own tail, and the U8
// tail (tailDotU8) is inlined into them (go build -gcflags=-m), which a
// generic wrapper taking the tail as a func value would lose; a generic body
// would still need these four wrappers to fill the kernel table.
func dotF16AVX2(q []float32, x []uint16) float32 {
	n := len(q)
	if n == 0 {
		return 0
	}
	x = x[:n]
	n8 := n &^ 7
	var s float32
	if n8 > 0 {
		s = dotF16x1AVX2(&q[0], &x[0], n8)
	}
	return tailDotF16(s, q[n8:], x[n8:])
}

func dotF16x4Wrap(out *[4]float32, q []float32, x []uint16, ldx int) {
	n := len(q)
	if n == 0 {
		*out = [4]float32{}
		return
	}
	checkLen("rows", len(x), 3*ldx+n)
	n8 := n &^ 7
	if n8 > 0 {
		dotF16x4AVX2(&q[0], &x[0], ldx, n8, &out[0])
	} else {
		*out = [4]float32{}
	}
	if n8 < n {
		for j := range 4 {
			out[j] = tailDotF16(out[j], q[n8:], x[j*ldx+n8:j*ldx+n])
		}
	}
}

func dotU8AVX2(q []float32, x []uint8) float32 {
	n := len(q)
	if n == 0 {
		return 0
	}
	x = x[:n]
	n8 := n &^ 7
	var s float32
	if n8 > 0 {
		s = dotU8x1AVX2(&q[0], &x[0], n8)
	}
	return tailDotU8(s, q[n8:], x[n8:])
}

func dotU8x4Wrap(out *[4]float32, q []float32, x []uint8, ldx int) {
	n := len(q)
	if n == 0 {
		*out = [4]float32{}
		return
	}
	checkLen("rows", len(x), 3*ldx+n)
	n8 := n &^ 7
	if n8 > 0 {
		dotU8x4AVX2(&q[0], &x[0], ldx, n8, &out[0])
	} else {
		*out = [4]float32{}
	}
	if n8 < n {
		for j := range 4 {
			out[j] = tailDotU8(out[j], q[n8:], x[j*ldx+n8:j*ldx+n])
		}
	}
}

// convertAVX2 converts src into dst (len(dst) elements): asm over the
// largest multiple of 8, tail (the portable loop) over the rest.
func convertAVX2[D, S any](dst []D, src []S, asm func(*D, *S, int), tail func([]D, []S)) {
	n := len(dst)
	if n == 0 {
		return
	}
	src = src[:n]
	n8 := n &^ 7
	if n8 > 0 {
		asm(&dst[0], &src[0], n8)
	}
	tail(dst[n8:], src[n8:])
}

func f16to32AVX2(dst []float32, src []uint16) { convertAVX2(dst, src, f16ToF32AVX2, f16ToF32Go) }

func f32to16AVX2(dst []uint16, src []float32) { convertAVX2(dst, src, f32ToF16AVX2, f32ToF16Go) }

func u8to32AVX2(dst []float32, src []uint8) { convertAVX2(dst, src, u8ToF32AVX2, u8ToF32Go) }

func bf16to32AVX2(dst []float32, src []uint16) { convertAVX2(dst, src, bf16ToF32AVX2, bf16ToF32Go) }
