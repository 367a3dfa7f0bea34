package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkColSumCPUTime times ColSum and its reference colSumGo on one
// thread in thread CPU time, on the column sums of a training step of the
// 25M benchmark model: the RMSNorm weight gradients ([2048, 512] → 512,
// [16384, 64] → 64) and the grouped-query K/V gradient (4 rows of 64 per
// output row). CPU ns per element read:
//
//	go test -run '^$' -bench ColSumCPUTime ./tensor/
func BenchmarkColSumCPUTime(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range []struct{ rows, cols int }{{2048, 512}, {16384, 64}, {4, 64}} {
		src := randVec(r, s.rows*s.cols)
		dst := make([]float32, s.cols)
		b.Run(fmt.Sprintf("%dx%d/ColSum", s.rows, s.cols), func(b *testing.B) {
			benchCPU(b, len(src), func() { ColSum(dst, src, s.rows, s.cols) })
		})
		b.Run(fmt.Sprintf("%dx%d/colSumGo", s.rows, s.cols), func(b *testing.B) {
			benchCPU(b, len(src), func() { colSumGo(dst, src, s.rows, s.cols) })
		})
	}
}
