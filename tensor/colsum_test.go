package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestColSum compares ColSum with colSumGo bit for bit over odd shapes,
// padded strides, and NaN, ±Inf and −0 among the elements.
func TestColSum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1))}
	for _, rows := range []int{0, 1, 2, 3, 7, 100} {
		for _, cols := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 100, 1000} {
			for _, pad := range []int{0, 3} {
				for _, withSpecial := range []bool{false, true} {
					stride := cols + pad
					src := randVec(r, max(0, (rows-1)*stride+cols))
					if withSpecial {
						for _, v := range special {
							if len(src) > 0 {
								src[r.IntN(len(src))] = v
							}
						}
					}
					if rows == 1 && cols > 0 && !withSpecial {
						src[0] = float32(math.Copysign(0, -1)) // 0 + −0 = +0 on both paths
					}
					want := make([]float32, cols)
					colSumGo(want, src, rows, stride)
					got := make([]float32, cols)
					for i := range got {
						got[i] = 42 // overwritten, also when rows is 0
					}
					ColSum(got, src, rows, stride)
					for c := range want {
						if math.Float32bits(got[c]) != math.Float32bits(want[c]) && !(isNaN32(got[c]) && isNaN32(want[c])) {
							t.Fatalf("rows %d cols %d stride %d special %v: dst[%d] = %v, want %v", rows, cols, stride, withSpecial, c, got[c], want[c])
						}
					}
				}
			}
		}
	}
}

func isNaN32(v float32) bool { return v != v }
