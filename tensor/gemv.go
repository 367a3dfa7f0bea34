package tensor

import "fmt"

// Matrix-vector products (GEMV) of batch-1 decoding: one activation row x
// against a weight matrix W in the [out, in] layout of a Hugging Face
// linear layer (each output's K weights contiguous, rows ldw apart),
//
//	y[j] (+)= Σ_{p<K} x[p] · W[j·ldw + p],   j < N,
//
// with W in float32 (GemvT) or bfloat16 bit patterns (GemvTBF16, each
// weight widened to float32 in a register as it is read: exact, so the
// float32 products and sums are those of GemvT over the converted matrix,
// from half the bytes).
//
// Every weight is read once and used once, so the product runs at the speed
// the weights arrive from memory (the streaming bound of a decode step),
// not at the FMA rate. The kernels take 8 rows at a time, one accumulator
// of V lanes each (V = 16 with AVX-512, 8 with AVX2); gemvRows hands them
// rows a stretch apart, so that memory is read as 8 ascending streams
// (BenchmarkGemvKernel, one core of the AVX2 VM: float32 1.26–1.29 times
// the bytes per second of vek32.Sum, bfloat16 1.14–1.24; 8 adjacent rows
// had reached 0.83–0.88 and 0.66–0.67). Rows are split into chunks of
// about 128 KiB of weights that the calling goroutine and the spin pool's
// helpers take in turn (both cores of a small machine stream at once).

// Order of the sums: for j below N rounded down to 8, lane l of y[j]'s
// accumulator adds the terms p ≡ l (mod V) of the first K rounded down to
// 16 in order, the lanes are folded as the GEMM's dot kernels fold them, and
// the last K mod 16 terms are added one by one; the last N mod 8 rows are
// Dot of the (converted) row. These are exactly the operations of Gemm's
// small-M dot path (M ≤ 16, k-contiguous operands) on the same CPU, so for
// K ≥ 16 GemvT and Gemm give bit-identical results and decoding through
// either yields the same logits. Without AVX2 (or off amd64) each row is
// Dot of the (converted) row.

// gemvKernelSet holds the 8-row kernels: they return out[j] = Σ_{p<k}
// x[p]·w[j·ldw+p] for j < 8 (k a positive multiple of align, which is the
// GEMM's dotAlign), prefetching pf bytes ahead of each row. The sums come
// back by value, so that calling a kernel through the set allocates
// nothing (a pointer to the caller's array would move it to the heap: the
// compiler cannot see through a func value).
type gemvKernelSet struct {
	name  string
	align int
	f32   func(k int, x, w []float32, ldw, pf int) [8]float32
	bf16  func(k int, x []float32, w []uint16, ldw, pf int) [8]float32
}

var gemvKernels = gemvAsm()

// GemvKernelName names the GEMV kernels this CPU runs ("go" without them).
func GemvKernelName() string {
	if gemvKernels == nil {
		return "go"
	}
	return gemvKernels.name
}

// gemvSerialBytes is the weight size below which one goroutine does the
// whole product (starting a second costs about a microsecond, the time to
// stream ≈ 16 KiB).
const gemvSerialBytes = 96 << 10

// GemvT computes y[j] (+)= Σ_{p<k} x[p] · w[j·ldw + p] for j < n (see
// above); with acc the products are added to y. workers ≤ 0 means
// GOMAXPROCS. It panics if a slice is too short (a programmer error).
func GemvT(y, x, w []float32, n, k, ldw int, acc bool, workers int) {
	gemvCheck("GemvT", len(y), len(x), len(w), n, k, ldw)
	if gemvOne(n, k*4, workers) { // no closure to allocate
		gemvRowsF32(gemvKernels, y, x, w, 0, n, k, ldw, acc)
		return
	}
	gemvSplit(n, k*4, workers, func(lo, hi int) { gemvRowsF32(gemvKernels, y, x, w, lo, hi, k, ldw, acc) })
}

// GemvTBF16 is GemvT with bfloat16 weights (bit patterns, the high half of
// a float32), converted exactly as they are read.
func GemvTBF16(y, x []float32, w []uint16, n, k, ldw int, acc bool, workers int) {
	gemvCheck("GemvTBF16", len(y), len(x), len(w), n, k, ldw)
	if gemvOne(n, k*2, workers) {
		gemvRowsBF16(gemvKernels, y, x, w, 0, n, k, ldw, acc)
		return
	}
	gemvSplit(n, k*2, workers, func(lo, hi int) { gemvRowsBF16(gemvKernels, y, x, w, lo, hi, k, ldw, acc) })
}

func gemvCheck(what string, ny, nx, nw, n, k, ldw int) {
	if n < 0 || k < 0 || ldw < k {
		panic(fmt.Sprintf("tensor.%s: n=%d k=%d ldw=%d", what, n, k, ldw))
	}
	if n == 0 {
		return
	}
	if ny < n || nx < k || nw < (n-1)*ldw+k {
		panic(fmt.Sprintf("tensor.%s: y %d, x %d, w %d too short for n=%d k=%d ldw=%d", what, ny, nx, nw, n, k, ldw))
	}
}

// gemvSplit runs rows [0, n) in chunks of a multiple of 8 rows (about
// gemvChunkBytes of weights each) taken in turn by the calling goroutine
// and up to workers-1 helpers of the spin pool (poolFor: no goroutine is
// started or woken from sleep between the products of a decode step): a
// core slowed down by another process takes fewer chunks instead of
// holding the others up at the end.
func gemvSplit(n, rowBytes, workers int, rows func(lo, hi int)) {
	if n == 0 {
		return
	}
	chunk := gemvChunkRows(rowBytes)
	chunks := (n + chunk - 1) / chunk
	if gemvOne(n, rowBytes, workers) {
		rows(0, n)
		return
	}
	poolFor(chunks, min(Workers(workers), chunks), func(c int) { rows(c*chunk, min(n, (c+1)*chunk)) })
}

// gemvChunkRows returns the rows of one chunk of gemvSplit.
func gemvChunkRows(rowBytes int) int { return max(8, gemvChunkBytes/max(rowBytes, 1)&^7) }

// gemvOne reports whether gemvSplit runs the n rows on the calling
// goroutine alone: one worker, one chunk, or less than gemvSerialBytes.
func gemvOne(n, rowBytes, workers int) bool {
	return workers == 1 || n*rowBytes < gemvSerialBytes || n <= gemvChunkRows(rowBytes) || Workers(workers) <= 1
}

// gemvChunkBytes is the weight size of one chunk of gemvSplit: long enough
// for the prefetchers to run ahead, short enough to balance the workers.
const gemvChunkBytes = 128 << 10

// gemvPut stores (or with acc adds) v at *dst.
func gemvPut(dst *float32, v float32, acc bool) {
	if acc {
		*dst += v
	} else {
		*dst = v
	}
}

// gemvRowsF32 computes rows [lo, hi) of GemvT with the kernels of ks
// (nil: Dot per row).
func gemvRowsF32(ks *gemvKernelSet, y, x, w []float32, lo, hi, k, ldw int, acc bool) {
	var kern func(int, []float32, []float32, int, int) [8]float32
	if ks != nil {
		kern = ks.f32
	}
	gemvRows(ks, kern, tailDotGemm, func(x, row []float32) float32 { return Dot(x, row) }, y, x, w, lo, hi, k, ldw, acc)
}

// gemvRowsBF16 computes rows [lo, hi) of GemvTBF16 with the kernels of ks
// (nil: Dot of each converted row).
func gemvRowsBF16(ks *gemvKernelSet, y, x []float32, w []uint16, lo, hi, k, ldw int, acc bool) {
	var kern func(int, []float32, []uint16, int, int) [8]float32
	if ks != nil {
		kern = ks.bf16
	}
	var conv []float32
	dot := func(x []float32, row []uint16) float32 {
		conv = growF32(conv, len(row))
		DecodeBF16(conv, row)
		return Dot(x, conv)
	}
	gemvRows(ks, kern, tailDotBF16, dot, y, x, w, lo, hi, k, ldw, acc)
}

// gemvRows computes rows [lo, hi) (lo a multiple of 8): the first hi−lo
// rounded down to 8 with kern, one of the kernels of ks (when ks is not
// nil), over the first K rounded down to ks.align terms plus tail over the
// rest; the last rows by dot of the whole row.
//
// The kernel's 8 rows need not be adjacent, and they are not: of the m
// kernel rows, call i takes rows lo+i, lo+i+m/8, …, lo+i+7m/8, so that the
// weights are read as 8 ascending streams of m/8 whole rows each. Eight
// adjacent rows read side by side, 64 bytes from each per step, kept one
// core at 0.65–0.75 of a sequential read (vek32.Sum) of the same weights
// however they were prefetched; 8 separate streams reach 1.0–1.2 (f32)
// and 1.0–1.1 of its bytes (bf16, where the adjacent rows reached 0.55),
// BenchmarkGemvKernel. The hardware prefetchers follow the streams, so the
// kernels are given pf = 0 (their prefetch falls on the line they read).
// Each row's sums are the kernel's whatever rows share its call, so the
// order changes no result.
func gemvRows[T float32 | uint16](ks *gemvKernelSet, kern func(int, []float32, []T, int, int) [8]float32, tail, dot func([]float32, []T) float32,
	y, x []float32, w []T, lo, hi, k, ldw int, acc bool) {
	x = x[:k]
	j := lo
	if ks != nil && kern != nil && k >= ks.align {
		ka := k / ks.align * ks.align
		m := (hi - lo) &^ 7
		q := m / 8 // rows per stream
		for i := range q {
			t := kern(ka, x, w[(lo+i)*ldw:], q*ldw, 0)
			for r := range 8 {
				jr := lo + i + r*q
				if ka == k && !acc { // the kernel's sums are the results
					y[jr] = t[r]
					continue
				}
				gemvPut(&y[jr], t[r]+tail(x[ka:], w[jr*ldw+ka:]), acc)
			}
		}
		j = lo + m
	}
	for ; j < hi; j++ {
		gemvPut(&y[j], dot(x, w[j*ldw:j*ldw+k]), acc)
	}
}

// tailDotBF16 returns Σ x[p]·f32(w[p]) over len(x) terms, in order.
func tailDotBF16(x []float32, w []uint16) float32 {
	var s float32
	w = w[:len(x)]
	for p, v := range x {
		s += v * BF16ToF32(w[p])
	}
	return s
}
