package tensor

import (
	"fmt"
	"math"
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

// TestPackPanelsDepthRuns: packing a depth-contiguous view (the fixed-size
// runs of packDepthRuns, every panel width the kernel sets use and one they
// do not, a partial last panel) equals the element-by-element packing.
func TestPackPanelsDepthRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for _, w := range []int{4, 6, 8, 12, 16, 32, 5} {
		for _, rows := range []int{1, w, 3*w + 1, 7 * w} {
			const kc, ps, base = 13, 401, 7
			src := randF32(r, base+kc*ps)
			op := Operand{F32: src}
			panels := (rows + w - 1) / w
			got, want := randF32(r, panels*w*kc), make([]float32, panels*w*kc)
			packPanels(got, &op, base, 1, ps, rows, kc, w, make([]float32, kc), goGemmKernels)
			for q := range panels {
				h := min(w, rows-q*w)
				packPanelsSlow(want[q*w*kc:], &op, base+q*w, 1, ps, h, kc, w, make([]float32, kc))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("w %d rows %d: element %d is %v, want %v", w, rows, i, got[i], want[i])
				}
			}
		}
	}
}

// TestGemmPackRunsBitIdentical: with every kernel set that has packRuns,
// products with depth-contiguous operands (A stored [K, M], B [K, N], as
// the weight gradients read them) give bit-identical results with
// packRuns and with packDepthRuns (the set's packRuns removed), on odd
// shapes, one and two workers, with accumulation, and on the 25M model's
// attention weight-gradient shape.
func TestGemmPackRunsBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 23))
	shapes := [][3]int{{1, 1, 1}, {7, 9, 17}, {15, 16, 100}, {100, 17, 1000}, {6, 16, 257}, {1000, 33, 300}, {512, 512, 2048}}
	for _, ks := range gemmSets() {
		if ks.packRuns == nil {
			continue
		}
		plain := *ks
		plain.packRuns = nil
		for _, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			for _, workers := range []int{1, 2} {
				for _, acc := range []bool{false, true} {
					g := Gemm{Batch: 1, M: m, N: n, K: k, A: layout(r, "col", 1, m, k), B: layout(r, "row", 1, k, n),
						Workers: workers, Accumulate: acc}
					want := randF32(r, m*n)
					got := append([]float32(nil), want...)
					g.run(want, &plain)
					g.run(got, ks)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s %dx%dx%d workers %d acc %v: out[%d] = %v, want %v", ks.name, m, n, k, workers, acc, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
