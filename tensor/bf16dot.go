package tensor

import "fmt"

// Blocked bfloat16 dot products over 16-bit codes: with AVX512-BF16,
// VDPBF16PS multiplies 32 bfloat16 pairs into 16 float32 lanes per
// instruction, twice an F32 FMA's multiply-adds over half the bytes; but
// where it issues at half the FMA's rate, as on this project's Xeon
// (BenchmarkDotBF16CPUTime), it only matches the F32 GEMM, and batched
// search uses the AMX tiles instead (amx.go).
//
//	out[i·ldo + j] = Σ_{p<k} bf16(a[i·k + p]) · bf16(w[j·k + p])      i < m, j < n
//
// a (the queries) and w (the stored rows) are row-major [m, k] and [n, k]
// bfloat16 bit patterns (see F32ToBF16); products are exact in float32 and
// the sums are float32. Without AVX512-BF16 (or off amd64) the same values
// come from a plain-Go loop; the two differ only in the order of the float32
// additions.

// HasBF16Dot reports whether DotBF16Block runs on AVX512-BF16.
func HasBF16Dot() bool { return bf16Kernels != nil }

// bf16KernelSet is an assembly implementation of the blocked dot product.
type bf16KernelSet struct {
	// dot4x4 writes the 16 dot products of 4 rows of a (stride lda) with 4
	// rows of w (stride ldw) over k elements (a multiple of 32) into out.
	dot4x4 func(k int, a []uint16, lda int, w []uint16, ldw int, out *[16]float32)
	// dot1x4 is dot4x4 for one row of a.
	dot1x4 func(k int, a, w []uint16, ldw int, out *[4]float32)
	// peak runs n rounds of 24 independent register dot products (1,536
	// flops a round), for the benchmarks' peak figure.
	peak func(n int)
}

// DotBF16Block computes the m × n dot products of the rows of a and w (both
// k wide) into out, row i at out[i·ldo:], as described above. It panics
// if a slice is too short (a programmer error).
func DotBF16Block(out []float32, ldo int, a []uint16, m int, w []uint16, n, k int) {
	dotBF16Block(bf16Kernels, out, ldo, a, m, w, n, k)
}

func dotBF16Block(ks *bf16KernelSet, out []float32, ldo int, a []uint16, m int, w []uint16, n, k int) {
	if m <= 0 || n <= 0 {
		return
	}
	if ldo < n || len(out) < (m-1)*ldo+n || len(a) < m*k || len(w) < n*k {
		panic(fmt.Sprintf("tensor.DotBF16Block: out %d (ldo %d), a %d, w %d too short for m=%d n=%d k=%d", len(out), ldo, len(a), len(w), m, n, k))
	}
	kv := 0 // the prefix of k the kernels cover
	if ks != nil {
		kv = k &^ 31
	}
	j0 := 0
	if kv > 0 {
		// 4 × 4 blocks, then the last rows of a one at a time against 4
		// rows of w; the last n mod 4 rows of w go to the plain loop.
		var blk [16]float32
		var row [4]float32
		for ; j0+4 <= n; j0 += 4 {
			wj := w[j0*k:]
			i := 0
			for ; i+4 <= m; i += 4 {
				ks.dot4x4(kv, a[i*k:], k, wj, k, &blk)
				for r := range 4 {
					copy(out[(i+r)*ldo+j0:(i+r)*ldo+j0+4], blk[r*4:r*4+4])
				}
			}
			for ; i < m; i++ {
				ks.dot1x4(kv, a[i*k:], wj, k, &row)
				copy(out[i*ldo+j0:i*ldo+j0+4], row[:])
			}
		}
		if kv < k {
			// The k mod 32 tail of the blocks done above.
			for i := range m {
				for j := range j0 {
					out[i*ldo+j] += dotBF16(a[i*k+kv:(i+1)*k], w[j*k+kv:(j+1)*k])
				}
			}
		}
	}
	for i := range m {
		for j := j0; j < n; j++ {
			out[i*ldo+j] = dotBF16(a[i*k:(i+1)*k], w[j*k:(j+1)*k])
		}
	}
}

// dotBF16 is the plain-Go dot product of two bfloat16 vectors (float32
// products and sums, four partial sums).
func dotBF16(a, w []uint16) float32 {
	w = w[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += BF16ToF32(a[i]) * BF16ToF32(w[i])
		s1 += BF16ToF32(a[i+1]) * BF16ToF32(w[i+1])
		s2 += BF16ToF32(a[i+2]) * BF16ToF32(w[i+2])
		s3 += BF16ToF32(a[i+3]) * BF16ToF32(w[i+3])
	}
	for ; i < len(a); i++ {
		s0 += BF16ToF32(a[i]) * BF16ToF32(w[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// F16ToBF16 converts len(dst) binary16 values of src to the nearest
// bfloat16 (through float32, which holds every binary16 exactly): a tile of
// F16 codes becomes the operand of DotBF16Block. On AVX-512 it converts
// 16 values an instruction sequence, the same bits as the scalar path.
func F16ToBF16(dst, src []uint16, scratch []float32) []float32 {
	checkLen("src", len(src), len(dst))
	done := f16ToBF16Vec(dst, src)
	src = src[done:len(dst)]
	dst = dst[done:]
	const chunk = 4096
	if cap(scratch) < min(chunk, len(dst)) {
		scratch = make([]float32, min(chunk, len(dst)))
	}
	for lo := 0; lo < len(dst); lo += chunk {
		hi := min(len(dst), lo+chunk)
		s := scratch[:hi-lo]
		DecodeF16(s, src[lo:hi])
		EncodeBF16(dst[lo:hi], s)
	}
	return scratch
}
