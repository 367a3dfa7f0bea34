package vector

import "github.com/cas-engine/cas/tensor"

// Batched flat search over F16 codes on AMX-BF16 tiles. A batch of queries
// against F16 rows is the product S = Q·Xᵀ, as for F32 (flat_gemm.go), but
// where the CPU has AMX-BF16 it runs on the tile unit: the queries are
// rounded to bfloat16 once per batch, each tile of 1,024 stored rows
// is converted from F16 to bfloat16 (exactly through float32, then
// rounded: 8 significant bits instead of 11) and packed as AMX's operand
// (tensor.BF16Panels), and tensor.DotBF16Panels scores the tile against
// every query with TDPBF16PS (float32 sums), fused with the top-k tile by
// tile as the F32 path is. The product runs at several times the F32
// GEMM's rate (BenchmarkDotBF16CPUTime); the packing is paid once per tile
// and shared by all the batch's queries.
//
// Scores are those of the bfloat16-rounded query and row: within about
// 2⁻⁸ relative per term of the F16 scores, so a query's scores in a batch
// differ from its scores alone (the F16 kernels) by that much, and ids only
// where scores are that close; recall@10 against exact search stays at
// 0.99 or better (TestFlatF16BatchAMX). Without AMX, F16 batches keep the F16
// dot-block kernels (flat.go's scan): on this project's Xeon the AVX512-BF16
// dot instruction (tensor.DotBF16Block) runs at half the F32 FMA's rate,
// so it would not beat them.

// useBF16 reports whether F16 batches are scored on AMX tiles.
func (f *Flat) useBF16() bool { return f.codes.enc == F16 && tensor.HasAMXBF16() }

// bf16Queries rounds the prepared queries to padded bfloat16 for scanBF16.
func (p *preparedQueries) bf16Queries(d int) {
	p.qb = tensor.PadBF16Queries(nil, p.qv, p.nq, d)
}

// scanBF16 is scanGEMM for F16 codes: rows [lo, hi) packed a tile at a
// time, scored against every query on AMX, offered to hs.
func (f *Flat) scanBF16(hs []*tensor.TopK, pq *preparedQueries, sc *gemmScratch, lo, hi int) {
	d, nq := f.d, pq.nq
	const tile = 1024
	// The buffer fits the longest tile of any chunk this worker scans.
	ldo := (min(tile, f.Len()) + 31) &^ 31
	sc.buf = growSlice(sc.buf[:0], ((nq+31)&^31)*ldo)
	for r0 := lo; r0 < hi; r0 += tile {
		r1 := min(hi, r0+tile)
		m := r1 - r0
		sc.decoded = sc.panels.PackF16(f.codes.f16[r0*d:r1*d], m, d, sc.decoded)
		tensor.DotBF16Panels(sc.buf, ldo, pq.qb, nq, &sc.panels)
		for i := range nq {
			f.offer(hs[i], sc.buf[i*ldo:i*ldo+m], pq.bias[i], pq.baseOf(i), r0, r1)
		}
	}
}
