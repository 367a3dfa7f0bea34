package tensor

import (
	"testing"
	"time"

	"github.com/cas-engine/cas/internal/cputime"
)

// BenchmarkPackF32NormsCPUTime: rounding 100,000 × 768 F32 rows (307 MB,
// more than the caches) into AMX panels with their norms, 1,024 rows at a
// time as the screened flat search does, in GB of F32 read per CPU-second
// (best of the iterations).
//
//	go test -run '^$' -bench PackF32NormsCPUTime -benchtime 5x ./tensor/
func BenchmarkPackF32NormsCPUTime(b *testing.B) {
	const n, d, tile = 100_000, 768, 1024
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(i%977) * 0.001
	}
	var p BF16Panels
	var scratch []float32
	xx, ee := make([]float64, tile), make([]float64, tile)
	best := time.Duration(1 << 62)
	for b.Loop() {
		t0 := cputime.Process()
		for r0 := 0; r0 < n; r0 += tile {
			r1 := min(n, r0+tile)
			scratch = p.PackF32Norms(x[r0*d:r1*d], r1-r0, d, scratch, xx, ee)
		}
		best = min(best, cputime.Process()-t0)
	}
	b.ReportMetric(float64(4*n*d)/best.Seconds()/1e9, "GB/cpu-s")
}
