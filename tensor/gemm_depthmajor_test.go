package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestGemmDepthMajorALong: an A stored depth-major ("col": [batch, K, M])
// with more rows than one packed block of gemmWholeARows (two full blocks
// and a tail), against the reference, on every kernel set, one and two
// workers, with B in both layouts and accumulation.
func TestGemmDepthMajorALong(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 22))
	m := 2*gemmWholeARows + 37
	for _, ks := range gemmSets() {
		for _, bl := range []string{"row", "col"} {
			for _, workers := range []int{1, 2} {
				for _, acc := range []bool{false, true} {
					name := fmt.Sprintf("%s/B %s/workers %d/acc %v", ks.name, bl, workers, acc)
					g := Gemm{Batch: 1, M: m, N: 19, K: 45, A: layout(r, "col", 1, m, 45), B: layout(r, bl, 1, 45, 19),
						Workers: workers, Accumulate: acc}
					out := randF32(r, m*19)
					base := append([]float32(nil), out...)
					g.run(out, ks)
					checkGemm(t, name, &g, out, base)
				}
			}
		}
	}
}
