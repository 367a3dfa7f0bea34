package vector

import (
	"fmt"
	"testing"
	"time"

	"github.com/cas-engine/cas/internal/cputime"
	"github.com/cas-engine/cas/internal/vectest"
	"github.com/cas-engine/cas/tensor"
)

// BenchmarkFlatBatchCPUTime measures the batched flat search (1,000
// queries × 20,480 rows × 768) against its GEMM roofline in process CPU
// time, which other engineers' load on a shared machine inflates far less
// than wall time. Each iteration runs the search once and, interleaved
// with it, tensor.MatMulT over the same rows in tiles of 1,024 (the same
// 2·nq·n·d FLOPs without the selection: what `cas bench index` calls the
// roofline); the best of each over the iterations gives GFLOP per
// CPU-second and the search's share of the roofline (%roof).
//
//	go test -run '^$' -bench FlatBatchCPUTime -benchtime 10x ./search/vector/
func BenchmarkFlatBatchCPUTime(b *testing.B) {
	const d, n, nq, tile = 768, 20480, 1000, 1024
	x, q := vectest.LowRankPair(n, nq, d, 64, 3)
	out := make([]float32, nq*tile)
	cpu := func(fn func()) time.Duration {
		t0 := cputime.Process()
		fn()
		return cputime.Process() - t0
	}
	flops := 2 * float64(nq) * n * d
	for _, enc := range []Encoding{F32, F16} {
		f, _ := NewFlat(d, InnerProduct, enc)
		f.Add(nil, x)
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%v/threads%d", enc, th), func(b *testing.B) {
				p := &SearchParams{Threads: th}
				bestS, bestG := time.Duration(1<<62), time.Duration(1<<62)
				for b.Loop() {
					bestS = min(bestS, cpu(func() {
						if _, _, err := f.Search(q, 10, p); err != nil {
							b.Fatal(err)
						}
					}))
					bestG = min(bestG, cpu(func() {
						for r0 := 0; r0 < n; r0 += tile {
							tensor.MatMulT(out, q, x[r0*d:(r0+tile)*d], nq, tile, d, th)
						}
					}))
				}
				b.ReportMetric(flops/bestS.Seconds()/1e9, "GFLOP/cpu-s")
				b.ReportMetric(flops/bestG.Seconds()/1e9, "gemm-GFLOP/cpu-s")
				b.ReportMetric(100*bestG.Seconds()/bestS.Seconds(), "%roof")
				b.ReportMetric(float64(nq)/bestS.Seconds(), "q/cpu-s")
			})
		}
	}
}
