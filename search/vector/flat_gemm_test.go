package vector

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/cas-engine/cas/internal/vectest"
	"github.com/cas-engine/cas/tensor"
)

// TestFlatGEMMMatchesMatMulT: the fused batch (packed queries, packed
// tiles, blocks of queries, SIMD-filtered selection) returns exactly the
// top-k of the full score matrix tensor.MatMulT computes — the same scores
// bit for bit and the same ids, ties by smaller id — over query counts
// around the 96-query blocks, row counts around the tiles and the chunks,
// odd dimensions, both metrics, explicit ids and 1–3 threads.
func TestFlatGEMMMatchesMatMulT(t *testing.T) {
	for _, c := range []struct{ n, d, nq, k int }{
		{1, 5, 17, 3}, {31, 7, 20, 10}, {300, 33, 97, 5}, {5000, 40, 130, 10}, {4200, 768, 25, 10}, {129, 16, 200, 200},
	} {
		for _, m := range []Metric{InnerProduct, L2} {
			t.Run(fmt.Sprintf("%v/n%d_d%d_q%d_k%d", m, c.n, c.d, c.nq, c.k), func(t *testing.T) {
				x, q := vectest.LowRankPair(c.n, c.nq, c.d, 4, uint64(c.n+c.d))
				// Duplicate rows make exact ties, broken by the smaller id.
				if c.n > 10 {
					copy(x[5*c.d:6*c.d], x[2*c.d:3*c.d])
				}
				ids := make([]int64, c.n)
				for j := range ids {
					ids[j] = int64(1000 - 3*j)
				}
				f, _ := NewFlat(c.d, m, F32)
				if err := f.Add(ids, x); err != nil {
					t.Fatal(err)
				}
				f.screen = screenOff // the GEMM path itself (flat_screen_test.go checks the screened one)
				if !f.useGEMM(c.nq) || f.useScreen(c.nq) {
					t.Fatal("batch not on the GEMM")
				}
				// The whole score matrix.
				full := make([]float32, c.nq*c.n)
				tensor.MatMulT(full, q, x, c.nq, c.n, c.d, 1)
				norms := make([]float32, c.n)
				tensor.SquaredNorms(norms, x, c.d)
				qn := make([]float32, c.nq)
				tensor.SquaredNorms(qn, q, c.d)
				// Reference ranking of each query: keys as Flat ranks by,
				// ties by smaller id.
				key := make([]float32, c.nq*c.n)
				order := make([][]int, c.nq)
				for i := range c.nq {
					row, kr := full[i*c.n:(i+1)*c.n], key[i*c.n:(i+1)*c.n]
					order[i] = make([]int, c.n)
					for j, v := range row {
						kr[j] = v
						if m == L2 {
							kr[j] = 2*v - norms[j] - qn[i]
						}
						order[i][j] = j
					}
					sort.Slice(order[i], func(a, b int) bool {
						ja, jb := order[i][a], order[i][b]
						if kr[ja] != kr[jb] {
							return kr[ja] > kr[jb]
						}
						return ids[ja] < ids[jb]
					})
				}
				for th := 1; th <= 3; th++ {
					scores, got, err := f.Search(q, c.k, &SearchParams{Threads: th})
					if err != nil {
						t.Fatal(err)
					}
					for i := range c.nq {
						for r := range c.k {
							gi, gs := got[i*c.k+r], scores[i*c.k+r]
							if r >= c.n {
								if gi != -1 {
									t.Fatalf("threads %d query %d rank %d: %d past the rows", th, i, r, gi)
								}
								continue
							}
							j := order[i][r]
							want := key[i*c.n+j]
							if m == L2 {
								want = max(-want, 0)
							}
							if gi != ids[j] || math.Float32bits(gs) != math.Float32bits(want) {
								t.Fatalf("threads %d query %d rank %d: (%d, %v), want (%d, %v)", th, i, r, gi, gs, ids[j], want)
							}
						}
					}
				}
			})
		}
	}
}
