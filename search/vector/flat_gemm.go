package vector

import "github.com/cas-engine/cas/tensor"

// Batched F32 flat search through the tensor GEMM. A batch of nq queries
// against n stored vectors is the product S = Q·Xᵀ (2·nq·n·d FLOPs), which
// the tensor package's BLIS-style GEMM (packed panels, 12×32 register tiles
// on AVX-512) runs near the core's FMA peak, where the 3×4 dot-block kernel
// reaches about half of it. The product is fused with the top-k selection
// tile by tile: each worker computes S for gemmTileRows stored vectors at a
// time into an nq × gemmTileRows buffer and pushes every query's row into
// its selection before the next tile, so the nq × n score matrix never
// exists whole (4 MB a worker for a block of 1,024 queries).
//
// The GEMM sums each inner product in a different order from the dot
// kernels of the single-query path, so a query's scores in a batch may
// differ from its scores alone in the last bits (ranks only where two
// scores tie to within that rounding). Results still do not depend on the
// thread count: every output is computed by the same operations however
// the rows are split.
const (
	// gemmMinQueries is the smallest batch scored by the GEMM.
	gemmMinQueries = 16
	// gemmTileRows is the number of stored vectors per GEMM call.
	gemmTileRows = 1024
)

// useGEMM reports whether a batch of nq queries goes through scanGEMM (F32
// codes) or scanBF16 (F16 codes on AVX512-BF16, flat_bf16.go).
func (f *Flat) useGEMM(nq int) bool {
	return (f.codes.enc == F32 || f.useBF16()) && nq >= gemmMinQueries
}

// scanGEMM is scan for F32 codes: rows [lo, hi) scored by the GEMM in
// tiles, each tile offered to the per-query selections hs.
func (f *Flat) scanGEMM(hs []*tensor.TopK, pq *preparedQueries, lo, hi int) {
	if f.codes.enc == F16 {
		f.scanBF16(hs, pq, lo, hi)
		return
	}
	d, nq := f.d, pq.nq
	buf := make([]float32, nq*min(gemmTileRows, hi-lo))
	for r0 := lo; r0 < hi; r0 += gemmTileRows {
		r1 := min(hi, r0+gemmTileRows)
		m := r1 - r0
		tensor.MatMulT(buf[:nq*m], pq.qv, f.codes.f32[r0*d:r1*d], nq, m, d, 1)
		for i := range nq {
			f.offer(hs[i], buf[i*m:(i+1)*m], pq.bias[i], pq.baseOf(i), r0, r1)
		}
	}
}
