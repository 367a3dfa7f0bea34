package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMatMulTPackedMatchesMatMulT: for every kernel set, blocks of rows of
// a packed left operand against a packed right one give MatMulT's packed
// product bit for bit (the same kernels and depth slices), and agree with
// the float64 reference within the summation bound — on odd shapes, depths
// that are not multiples of 16 or of kc, blocks that end mid-tile, and zero
// sizes.
func TestMatMulTPackedMatchesMatMulT(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, ks := range gemmSets() {
		kc := ks.blocking().kc
		for _, s := range [][3]int{{1, 1, 1}, {5, 3, 7}, {ks.mr + 1, ks.nr + 3, 17}, {37, 70, kc + 5}, {50, 33, 2*kc + 16}, {2*ks.blocking().mc + 7, 40, 19}, {0, 5, 8}, {7, 0, 8}, {6, 9, 0}} {
			m, n, k := s[0], s[1], s[2]
			t.Run(fmt.Sprintf("%s/M%d_N%d_K%d", ks.name, m, n, k), func(t *testing.T) {
				a, w := randF32(r, m*k), randF32(r, n*k)
				// MatMulT's result through the packed algorithm of this set
				// (M above gemmSmallM would be needed to pick it in Run).
				want := make([]float32, m*n)
				g := Gemm{Batch: 1, M: m, N: n, K: k, A: RowMajor(a, m, k), B: Transposed(w, k, n), Workers: 1}
				if m*n*k > 0 {
					g.packedTask(want, ks, new(gemmScratch), gemmTask{0, 0, m, 0, n}, new(gemmPre))
				}
				ref, mag := refGemm(&g)
				var left PackedLeft
				var right PackedRight
				left.packWith(a, m, k, ks)
				right.packWith(w, n, k, ks)
				for _, blk := range []int{ks.mr, 2 * ks.mr, max(m, 1)} {
					ldo := n + 3
					got := make([]float32, max(m, 1)*ldo)
					for i := range got {
						got[i] = float32(math.NaN()) // every cell must be written
					}
					step := max(ks.mr, blk/ks.mr*ks.mr)
					for i0 := 0; i0 < m; i0 += step {
						MatMulTPacked(got[i0*ldo:], ldo, &left, i0, min(m, i0+step), &right)
					}
					for i := range m {
						for j := range n {
							v := got[i*ldo+j]
							if math.Float32bits(v) != math.Float32bits(want[i*n+j]) {
								t.Fatalf("block %d: out[%d][%d] = %v, MatMulT %v", blk, i, j, v, want[i*n+j])
							}
							if d := math.Abs(float64(v) - ref[i*n+j]); d > gemmTol(k, mag[i*n+j]) {
								t.Fatalf("block %d: out[%d][%d] = %v, reference %v", blk, i, j, v, ref[i*n+j])
							}
						}
					}
				}
			})
		}
	}
}

// TestMatMulTPackedPanics: misuse is a programmer error with a message.
func TestMatMulTPackedPanics(t *testing.T) {
	var l PackedLeft
	var r, r2 PackedRight
	l.Pack(make([]float32, 40*8), 40, 8)
	r.Pack(make([]float32, 5*8), 5, 8)
	r2.Pack(make([]float32, 5*9), 5, 9)
	align := GemmBlockAlign()
	for name, f := range map[string]func(){
		"unaligned start": func() { MatMulTPacked(make([]float32, 40*5), 5, &l, 1, 40, &r) },
		"past the end":    func() { MatMulTPacked(make([]float32, 41*5), 5, &l, 0, 41, &r) },
		"short out":       func() { MatMulTPacked(make([]float32, 10), 5, &l, 0, align, &r) },
		"ldo below n":     func() { MatMulTPacked(make([]float32, 40*5), 4, &l, 0, 1, &r) },
		"depths differ":   func() { MatMulTPacked(make([]float32, 40*5), 5, &l, 0, 1, &r2) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestIndexAtLeast: the vector scan finds the same first index as a plain
// loop, at every offset of the hit and tail length, NaN never counting.
func TestIndexAtLeast(t *testing.T) {
	ref := func(x []float32, thr float32) int {
		for j, v := range x {
			if v >= thr {
				return j
			}
		}
		return len(x)
	}
	nan := float32(math.NaN())
	for n := range 150 {
		x := make([]float32, n)
		for i := range x {
			x[i] = -1
		}
		if got := IndexAtLeast(x, 0); got != n {
			t.Fatalf("n=%d no hit: %d", n, got)
		}
		for h := range n {
			x[h] = 0
			for _, thr := range []float32{0, -0.5, 0.5} {
				if got, want := IndexAtLeast(x, thr), ref(x, thr); got != want {
					t.Fatalf("n=%d hit at %d thr %v: %d, want %d", n, h, thr, got, want)
				}
			}
			x[h] = nan
			if got := IndexAtLeast(x, -0.5); got != n {
				t.Fatalf("n=%d NaN at %d counted: %d", n, h, got)
			}
			x[h] = -1
		}
	}
	if IndexAtLeast(nil, 0) != 0 || IndexAtLeast([]float32{1}, nan) != 1 {
		t.Fatal("empty slice or NaN threshold")
	}
	inf := float32(math.Inf(-1))
	if IndexAtLeast([]float32{nan, inf}, inf) != 1 {
		t.Fatal("−Inf threshold")
	}
}

// BenchmarkIndexAtLeast scans 4,096 scores of which none reaches the
// threshold (a selection's common case), in values per nanosecond.
func BenchmarkIndexAtLeast(b *testing.B) {
	x := randF32(rand.New(rand.NewPCG(1, 2)), 4096)
	for b.Loop() {
		if IndexAtLeast(x, 100) != len(x) {
			b.Fatal("hit")
		}
	}
	b.ReportMetric(float64(len(x))*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "values/ns")
}
