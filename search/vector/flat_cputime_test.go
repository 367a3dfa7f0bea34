package vector

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/viterin/vek/vek32"

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
// CPU-second and the search's share of the roofline (%roof). F32 is the
// default batch (screened on AMX-BF16 where the CPU has it, with the share
// of queries that fell back), F32gemm the exact F32 GEMM path.
//
//	go test -run '^$' -bench FlatBatchCPUTime -benchtime 10x ./search/vector/
func BenchmarkFlatBatchCPUTime(b *testing.B) {
	const d, n, nq, tile = 768, 20480, 1000, 1024
	x, q := vectest.LowRankPair(n, nq, d, 64, 3)
	out := make([]float32, nq*tile)
	flops := 2 * float64(nq) * n * d
	for _, v := range []struct {
		name   string
		enc    Encoding
		screen screenMode
	}{{"F32", F32, screenAuto}, {"F32gemm", F32, screenOff}, {"F16", F16, screenAuto}} {
		f, _ := NewFlat(d, InnerProduct, v.enc)
		f.Add(nil, x)
		f.screen = v.screen
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads%d", v.name, th), func(b *testing.B) {
				st0 := f.ScreenStats()
				p := &SearchParams{Threads: th}
				bestS, bestG := time.Duration(1<<62), time.Duration(1<<62)
				for b.Loop() {
					bestS = min(bestS, cpuTime(func() {
						if _, _, err := f.Search(q, 10, p); err != nil {
							b.Fatal(err)
						}
					}))
					bestG = min(bestG, cpuTime(func() {
						for r0 := 0; r0 < n; r0 += tile {
							tensor.MatMulT(out, q, x[r0*d:(r0+tile)*d], nq, tile, d, th)
						}
					}))
				}
				b.ReportMetric(flops/bestS.Seconds()/1e9, "GFLOP/cpu-s")
				b.ReportMetric(flops/bestG.Seconds()/1e9, "gemm-GFLOP/cpu-s")
				b.ReportMetric(100*bestG.Seconds()/bestS.Seconds(), "%roof")
				b.ReportMetric(float64(nq)/bestS.Seconds(), "q/cpu-s")
				if st := f.ScreenStats(); st.Queries > st0.Queries {
					b.ReportMetric(100*float64(st.Fallbacks-st0.Fallbacks)/float64(st.Queries-st0.Queries), "%fallback")
				}
			})
		}
	}
}

// BenchmarkFlatSingleCPUTime measures one query against 100,000 × 768 F32
// rows (307 MB) next to a streaming read of the same rows (tensor.StreamSum,
// the memory-bandwidth bound `cas bench index` prints; vek's one-stream
// sum, its earlier bound, for comparison), interleaved, each the best of
// the iterations in process CPU time; %bound is the stream's time over the
// search's (≥ 83% is within 1.2× of the bound).
//
//	go test -run '^$' -bench FlatSingleCPUTime -benchtime 20x ./search/vector/
func BenchmarkFlatSingleCPUTime(b *testing.B) {
	const d, n = 768, 100_000
	x, q := vectest.LowRankPair(n, 1, d, 64, 3)
	f, _ := NewFlat(d, InnerProduct, F32)
	f.Add(nil, x)
	var sink float32
	for _, th := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads%d", th), func(b *testing.B) {
			p := &SearchParams{Threads: th}
			bestS, bestR, bestV := time.Duration(1<<62), time.Duration(1<<62), time.Duration(1<<62)
			for b.Loop() {
				bestV = min(bestV, cpuTime(func() { sink += streamSum(x, th, vek32.Sum) }))
				bestS = min(bestS, cpuTime(func() {
					if _, _, err := f.Search(q, 10, p); err != nil {
						b.Fatal(err)
					}
				}))
				bestR = min(bestR, cpuTime(func() { sink += streamSum(x, th, tensor.StreamSum) }))
			}
			b.ReportMetric(float64(bestS.Microseconds())/1e3, "search-cpu-ms")
			b.ReportMetric(float64(bestR.Microseconds())/1e3, "stream-cpu-ms")
			b.ReportMetric(float64(bestV.Microseconds())/1e3, "vek-cpu-ms")
			b.ReportMetric(100*bestR.Seconds()/bestS.Seconds(), "%bound")
		})
	}
	runtime.KeepAlive(sink)
}

// streamSum reads x once on threads goroutines, each summing its range
// with sum.
func streamSum(x []float32, threads int, sum func([]float32) float32) float32 {
	var mu sync.Mutex
	var s float32
	tensor.ParallelFor(len(x), threads, 1<<16, func(_, lo, hi int) {
		v := sum(x[lo:hi])
		mu.Lock()
		s += v
		mu.Unlock()
	})
	return s
}

// cpuTime is the process CPU time fn takes.
func cpuTime(fn func()) time.Duration {
	t0 := cputime.Process()
	fn()
	return cputime.Process() - t0
}

// BenchmarkFlatBatchSizeCPUTime compares, for small batches, the
// AMX-screened F32 search with the exact F32 GEMM (100,000 × 768 rows, one
// thread, interleaved, best of the iterations in process CPU time): the
// screen converts every row to bfloat16 once per batch, which a small
// batch cannot amortise (screenMinQueries).
//
//	go test -run '^$' -bench FlatBatchSizeCPUTime -benchtime 3x ./search/vector/
func BenchmarkFlatBatchSizeCPUTime(b *testing.B) {
	const d, n = 768, 100_000
	x, q := vectest.LowRankPair(n, 512, d, 64, 3)
	screened, _ := NewFlat(d, InnerProduct, F32)
	screened.Add(nil, x)
	screened.screen = screenOn
	gemm, _ := NewFlat(d, InnerProduct, F32)
	gemm.Add(nil, x)
	gemm.screen = screenOff
	p := &SearchParams{Threads: 1}
	for _, nq := range []int{16, 32, 64, 128, 256, 512} {
		b.Run(fmt.Sprintf("q%d", nq), func(b *testing.B) {
			bestS, bestG := time.Duration(1<<62), time.Duration(1<<62)
			for b.Loop() {
				bestS = min(bestS, cpuTime(func() { screened.Search(q[:nq*d], 10, p) }))
				bestG = min(bestG, cpuTime(func() { gemm.Search(q[:nq*d], 10, p) }))
			}
			b.ReportMetric(float64(nq)/bestS.Seconds(), "screened-q/cpu-s")
			b.ReportMetric(float64(nq)/bestG.Seconds(), "gemm-q/cpu-s")
		})
	}
}
