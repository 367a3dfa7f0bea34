package vector

import "github.com/cas-engine/cas/tensor"

// Batched F32 flat search through the tensor GEMM. A batch of nq queries
// against n stored vectors is the product S = Q·Xᵀ (2·nq·n·d FLOPs), which
// the tensor package's BLIS-style GEMM kernels (packed panels, 12×32
// register tiles on AVX-512) run near the core's FMA peak, where the 3×4
// dot-block kernel reaches about half of it. The product is fused with the
// top-k selection block by block, so the nq × n score matrix never exists
// whole and every block is consumed while it is still in L2:
//
//   - the queries are packed once per batch (tensor.PackedLeft), not once
//     per tile as a MatMulT call per tile would;
//   - each worker packs gemmTileRows(d) stored vectors at a time
//     (tensor.PackedRight, about 384 KiB: it stays in L2 while every
//     block of queries passes over it, with room for a second worker's
//     where two hardware threads share one core's L2);
//   - tensor.MatMulTPacked scores gemmQueryBlockRows queries against the
//     tile (a 96 × 128 block of 48 KiB for E5's 768 dimensions), and each
//     query's row goes straight into its selection, whose SIMD threshold
//     scan (tensor.IndexAtLeast) skips the scores that cannot enter.
//
// The GEMM sums each inner product in a different order from the dot
// kernels of the single-query path, so a query's scores in a batch may
// differ from its scores alone in the last bits (ranks only where two
// scores tie to within that rounding). Results do not depend on the thread
// count or on the tiling: MatMulTPacked computes every output with the same
// operations as tensor.MatMulT, however the rows are split.
const (
	// gemmMinQueries is the smallest batch scored by the GEMM.
	gemmMinQueries = 16
	// gemmQueryBlockRows is about how many queries one MatMulTPacked call
	// scores (rounded up to the kernels' tile height).
	gemmQueryBlockRows = 96
)

// gemmTileRows is how many stored vectors a worker packs at a time for the
// GEMM: about 384 KiB of float32 rows, a multiple of 32 from 32 to 1,024.
func gemmTileRows(d int) int {
	t := (384 << 10) / (4 * max(d, 1))
	return min(1024, max(32, t&^31))
}

// gemmScratch is one worker's buffers for scanGEMM and scanBF16, reused
// across the chunks it scans.
type gemmScratch struct {
	right   tensor.PackedRight
	buf     []float32
	panels  tensor.BF16Panels
	decoded []float32
}

// useGEMM reports whether a batch of nq queries goes through scanGEMM (F32
// codes) or scanBF16 (F16 codes on AMX-BF16, flat_bf16.go).
func (f *Flat) useGEMM(nq int) bool {
	return (f.codes.enc == F32 || f.useBF16()) && nq >= gemmMinQueries
}

// packForGEMM puts the prepared queries in the form scanGEMM (packed F32
// panels) or scanBF16 (padded bfloat16) reads, once for the batch.
func (p *preparedQueries) packForGEMM(f *Flat) {
	if f.useBF16() {
		p.bf16Queries(f.d)
		return
	}
	p.left.Pack(p.qv, p.nq, f.d)
}

// scanGEMM is scan for F32 codes: rows [lo, hi) scored by the GEMM a tile
// at a time, each block of scores offered to the per-query selections hs.
func (f *Flat) scanGEMM(hs []*tensor.TopK, pq *preparedQueries, sc *gemmScratch, lo, hi int) {
	if f.codes.enc == F16 {
		f.scanBF16(hs, pq, sc, lo, hi)
		return
	}
	d, nq := f.d, pq.nq
	tile := gemmTileRows(d)
	align := tensor.GemmBlockAlign()
	qb := (gemmQueryBlockRows + align - 1) / align * align
	// The buffer fits the longest tile of any chunk this worker scans.
	sc.buf = growSlice(sc.buf[:0], min(qb, nq)*min(tile, f.Len()))
	for r0 := lo; r0 < hi; r0 += tile {
		r1 := min(hi, r0+tile)
		m := r1 - r0
		sc.right.Pack(f.codes.f32[r0*d:r1*d], m, d)
		for i0 := 0; i0 < nq; i0 += qb {
			i1 := min(nq, i0+qb)
			tensor.MatMulTPacked(sc.buf, m, &pq.left, i0, i1, &sc.right)
			for i := i0; i < i1; i++ {
				f.offer(hs[i], sc.buf[(i-i0)*m:(i-i0+1)*m], pq.bias[i], pq.baseOf(i), r0, r1)
			}
		}
	}
}
