package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// gemmSets are the GEMM kernel sets under test: Go always, and every
// assembly set this CPU runs.
func gemmSets() []*gemmKernelSet {
	return append([]*gemmKernelSet{goGemmKernels}, gemmAsmSets()...)
}

// refGemm is the plain reference: float64 sums of float32 products, and the
// bound Σ|a·b| per output used for the tolerance.
func refGemm(g *Gemm) (want, mag []float64) {
	want = make([]float64, g.Batch*g.M*g.N)
	mag = make([]float64, len(want))
	at := func(o *Operand, b, r, c int) float64 {
		i := o.Offset + b*o.BatchStride + r*o.RowStride + c*o.ColStride
		if o.F32 != nil {
			return float64(o.F32[i])
		}
		return float64(BF16ToF32(o.BF16[i]))
	}
	for b := range g.Batch {
		for i := range g.M {
			for j := range g.N {
				var s, a float64
				for p := range g.K {
					x := at(&g.A, b, i, p) * at(&g.B, b, p, j)
					s += x
					a += math.Abs(x)
				}
				want[(b*g.M+i)*g.N+j] = s
				mag[(b*g.M+i)*g.N+j] = a
			}
		}
	}
	return want, mag
}

// gemmTol is the float32 error we accept for a K-term sum of magnitude mag:
// the worst-case bound of recursive summation, K·u·Σ|aᵢbᵢ|.
func gemmTol(k int, mag float64) float64 { return float64(k+2)*6e-8*mag + 1e-30 }

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func toBF16(x []float32) []uint16 {
	h := make([]uint16, len(x))
	EncodeBF16(h, x)
	return h
}

// layout builds an operand of logical shape [batch, rows, cols] in one of
// several memory layouts, padded with garbage around it.
func layout(r *rand.Rand, kind string, batch, rows, cols int) Operand {
	const pad = 5
	n := batch * rows * cols
	data := randF32(r, n+2*pad+batch*3)
	var o Operand
	switch kind {
	case "row": // [batch, rows, cols]
		o = Operand{BatchStride: rows * cols, RowStride: cols, ColStride: 1}
	case "col": // [batch, cols, rows]
		o = Operand{BatchStride: rows * cols, RowStride: 1, ColStride: rows}
	case "batchmid": // [rows, batch, cols]: batch axis between the others
		o = Operand{BatchStride: cols, RowStride: batch * cols, ColStride: 1}
	case "gap": // [batch, rows, cols] with batch entries 3 apart
		o = Operand{BatchStride: rows*cols + 3, RowStride: cols, ColStride: 1}
	case "bcast": // one matrix shared by every batch entry
		o = Operand{BatchStride: 0, RowStride: cols, ColStride: 1}
	default:
		panic(kind)
	}
	o.Offset = pad
	o.F32 = data
	return o
}

func checkGemm(t *testing.T, name string, g *Gemm, got []float32, base []float32) {
	t.Helper()
	want, mag := refGemm(g)
	for i, w := range want {
		if g.Accumulate {
			w += float64(base[i])
			mag[i] += math.Abs(float64(base[i]))
		}
		if d := math.Abs(float64(got[i]) - w); !(d <= gemmTol(g.K, mag[i])) {
			t.Fatalf("%s: out[%d] = %v, want %v (|diff| %g > %g)", name, i, got[i], w, d, gemmTol(g.K, mag[i]))
		}
	}
}

func TestGemmMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 1))
	type shape struct{ batch, m, n, k int }
	shapes := []shape{
		{1, 1, 1, 1}, {1, 0, 5, 3}, {1, 4, 0, 3}, {1, 3, 4, 0}, {0, 3, 4, 5},
		{1, 1, 33, 17}, {1, 1, 40, 64}, {1, 2, 19, 48}, {1, 3, 8, 16},
		{1, 4, 16, 33}, {1, 5, 9, 80}, {1, 7, 41, 96}, {1, 13, 35, 31},
		{1, 16, 70, 130}, {1, 17, 33, 65}, {1, 12, 32, 7}, {1, 25, 97, 200},
		{1, 37, 67, 401}, {3, 5, 7, 11}, {4, 1, 24, 64}, {2, 30, 50, 20},
		{1, 150, 70, 40}, {1, 29, 1600, 3},
	}
	layouts := [][2]string{{"row", "col"}, {"row", "row"}, {"col", "row"}, {"col", "col"}, {"batchmid", "gap"}, {"gap", "bcast"}}
	for _, ks := range gemmSets() {
		for _, s := range shapes {
			for li, l := range layouts {
				for _, bf := range []string{"", "A", "B"} {
					if bf != "" && li > 1 {
						continue
					}
					g := Gemm{Batch: s.batch, M: s.m, N: s.n, K: s.k,
						A: layout(r, l[0], s.batch, s.m, s.k), B: layout(r, l[1], s.batch, s.k, s.n), Workers: 1 + li%2}
					switch bf {
					case "A":
						g.A.BF16, g.A.F32 = toBF16(g.A.F32), nil
					case "B":
						g.B.BF16, g.B.F32 = toBF16(g.B.F32), nil
					}
					for _, acc := range []bool{false, true} {
						g.Accumulate = acc
						name := fmt.Sprintf("%s %+v %v bf16=%s acc=%v", ks.name, s, l, bf, acc)
						base := randF32(r, s.batch*s.m*s.n)
						out := slices.Clone(base)
						if err := g.Validate(out); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						g.run(out, ks)
						checkGemm(t, name, &g, out, base)
					}
				}
			}
		}
	}
}

// TestGemmBlockBoundaries covers sizes around the packing blocks (kc, mc,
// nc) of every set, where the K slices accumulate into Out.
func TestGemmBlockBoundaries(t *testing.T) {
	if testing.Short() {
		t.Skip("large products")
	}
	r := rand.New(rand.NewPCG(10, 2))
	for _, ks := range gemmSets() {
		bl := ks.blocking()
		for _, s := range [][3]int{
			{bl.mc + 1, ks.nr + 3, bl.kc + 1},
			{ks.mr*2 + 1, bl.nc + 5, 2*bl.kc + 3},
			{gemmSmallM, 37, 3*bl.kc - 1},
		} {
			m, n, k := s[0], s[1], s[2]
			g := Gemm{Batch: 1, M: m, N: n, K: k, A: layout(r, "row", 1, m, k), B: layout(r, "col", 1, k, n), Workers: 2}
			out := make([]float32, m*n)
			g.run(out, ks)
			checkGemm(t, fmt.Sprintf("%s %v", ks.name, s), &g, out, nil)
		}
	}
}

// TestGemmParallelBitIdentical checks that the result does not depend on
// the number of workers (each output is computed by the same sequence of
// operations whatever the split).
func TestGemmParallelBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 3))
	for _, s := range [][4]int{{1, 1, 300, 96}, {1, 8, 513, 160}, {1, 70, 129, 300}, {1, 300, 40, 50}, {5, 9, 31, 64}, {2, 100, 64, 37}} {
		b, m, n, k := s[0], s[1], s[2], s[3]
		a, w := randF32(r, b*m*k), randF32(r, b*n*k)
		var first []float32
		for _, workers := range []int{1, 2, 3, 8} {
			out := make([]float32, b*m*n)
			BatchMatMulT(out, a, w, b, m, n, k, workers)
			if first == nil {
				first = out
				g := Gemm{Batch: b, M: m, N: n, K: k, A: RowMajor(a, m, k), B: Transposed(w, k, n)}
				checkGemm(t, fmt.Sprint(s), &g, out, nil)
				continue
			}
			if !slices.Equal(first, out) {
				t.Fatalf("%v: workers=%d differs from workers=1", s, workers)
			}
		}
	}
}

func TestGemmHelpers(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 4))
	m, n, k := 7, 45, 70
	a, w, b := randF32(r, m*k), randF32(r, n*k), randF32(r, k*n)
	got := make([]float32, m*n)
	MatMulT(got, a, w, m, n, k, 0)
	checkGemm(t, "MatMulT", &Gemm{Batch: 1, M: m, N: n, K: k, A: RowMajor(a, m, k), B: Transposed(w, k, n)}, got, nil)
	MatMul(got, a, b, m, n, k, 0)
	checkGemm(t, "MatMul", &Gemm{Batch: 1, M: m, N: n, K: k, A: RowMajor(a, m, k), B: RowMajor(b, k, n)}, got, nil)
	wh := toBF16(w)
	MatMulTBF16(got, a, wh, m, n, k, 0)
	checkGemm(t, "MatMulTBF16", &Gemm{Batch: 1, M: m, N: n, K: k, A: RowMajor(a, m, k),
		B: Operand{BF16: wh, BatchStride: n * k, RowStride: 1, ColStride: k}}, got, nil)
	// A small exact case: [1 2; 3 4]·[5 6; 7 8]ᵀ = [17 23; 39 53].
	out := make([]float32, 4)
	MatMulT(out, []float32{1, 2, 3, 4}, []float32{5, 6, 7, 8}, 2, 2, 2, 1)
	if !slices.Equal(out, []float32{17, 23, 39, 53}) {
		t.Fatalf("2×2: %v", out)
	}
}

func TestGemmValidate(t *testing.T) {
	f := make([]float32, 12)
	cases := []struct {
		name string
		g    Gemm
		out  int
		want string
	}{
		{"ok", Gemm{Batch: 1, M: 3, N: 4, K: 3, A: RowMajor(f[:9], 3, 3), B: RowMajor(f, 3, 4)}, 12, ""},
		{"negative", Gemm{Batch: 1, M: -1, N: 4, K: 3}, 12, "negative size"},
		{"short out", Gemm{Batch: 1, M: 3, N: 4, K: 3, A: RowMajor(f[:9], 3, 3), B: RowMajor(f, 3, 4)}, 11, "out has length 11"},
		{"short A", Gemm{Batch: 1, M: 3, N: 4, K: 3, A: RowMajor(f[:8], 3, 3), B: RowMajor(f, 3, 4)}, 12, "operand A"},
		{"short B", Gemm{Batch: 2, M: 1, N: 4, K: 3, A: RowMajor(f[:6], 1, 3), B: RowMajor(f, 3, 4)}, 12, "operand B"},
		{"no data", Gemm{Batch: 1, M: 1, N: 1, K: 1, B: RowMajor(f, 1, 1)}, 1, "exactly one of F32 and BF16"},
		{"neg stride", Gemm{Batch: 1, M: 1, N: 1, K: 1, A: Operand{F32: f, RowStride: -1}, B: RowMajor(f, 1, 1)}, 1, "negative offset or stride"},
		{"empty ok", Gemm{Batch: 1, M: 0, N: 4, K: 3}, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.g.Run(make([]float32, c.out))
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestGemmKZeroClears(t *testing.T) {
	out := []float32{1, 2, 3, 4}
	g := Gemm{Batch: 1, M: 2, N: 2, K: 0, A: Operand{F32: []float32{}}, B: Operand{F32: []float32{}}}
	g.Accumulate = true
	if err := g.Run(out); err != nil || !slices.Equal(out, []float32{1, 2, 3, 4}) {
		t.Fatalf("accumulate K=0: %v %v", out, err)
	}
	g.Accumulate = false
	if err := g.Run(out); err != nil || !slices.Equal(out, []float32{0, 0, 0, 0}) {
		t.Fatalf("K=0: %v %v", out, err)
	}
}

func TestFMAPeakRuns(t *testing.T) {
	for _, ks := range gemmSets() {
		if ks.peak != nil {
			ks.peak(10)
		}
	}
	if p := FMAPeak(1, 0); !(p > 0) {
		t.Fatalf("FMAPeak = %v", p)
	}
	if p := VekDotPeak(1, 0); !(p > 0) {
		t.Fatalf("VekDotPeak = %v", p)
	}
}

// TestGemmPrepackBitIdentical checks the operand packed once for all tasks
// (gemmPre) against each task packing its own: packedTask over column
// ranges with A prepacked and over row ranges with B prepacked gives the
// same bits as packedTask alone, for every kernel set and the operand
// layouts (depth-major, BF16, broadcast), depths over several kc slices and
// more rows than one prepack chunk; and Run with 2 and 3 workers (which
// prepacks) equals 1 worker.
func TestGemmPrepackBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 5))
	for _, ks := range gemmSets() {
		kc := ks.blocking().kc
		for _, s := range [][4]int{{1, 37, 70, 2*kc + 5}, {2, 20, 45, 7}, {1, gemmPrepackRows + 50, 40, 30}, {1, 30, gemmPrepackRows + 70, 20}} {
			batch, m, n, k := s[0], s[1], s[2], s[3]
			for _, l := range [][2]string{{"row", "col"}, {"col", "row"}, {"gap", "bcast"}, {"bf16", "bf16"}} {
				kind := func(x string) string {
					if x == "bf16" {
						return "row"
					}
					return x
				}
				g := Gemm{Batch: batch, M: m, N: n, K: k, A: layout(r, kind(l[0]), batch, m, k), B: layout(r, kind(l[1]), batch, k, n)}
				if l[0] == "bf16" {
					g.A.BF16, g.A.F32 = toBF16(g.A.F32), nil
					g.B.BF16, g.B.F32 = toBF16(g.B.F32), nil
				}
				name := fmt.Sprintf("%s %v %v", ks.name, s, l)
				want := make([]float32, batch*m*n)
				for b := range batch {
					g.packedTask(want, ks, new(gemmScratch), gemmTask{b, 0, m, 0, n}, new(gemmPre))
				}
				for _, side := range []string{"A", "B"} {
					var pre gemmPre
					got := make([]float32, batch*m*n)
					if side == "A" {
						pre.a = g.prepack(&g.A, g.A.RowStride, g.A.ColStride, m, ks.mr, 2, ks)
						for b := range batch {
							for c := range 3 {
								j0, j1 := splitRange(n, 3, c, ks.nr)
								g.packedTask(got, ks, new(gemmScratch), gemmTask{b, 0, m, j0, j1}, &pre)
							}
						}
					} else {
						pre.b = g.prepack(&g.B, g.B.ColStride, g.B.RowStride, n, ks.nr, 2, ks)
						for b := range batch {
							for c := range 3 {
								i0, i1 := splitRange(m, 3, c, ks.mr)
								g.packedTask(got, ks, new(gemmScratch), gemmTask{b, i0, i1, 0, n}, &pre)
							}
						}
					}
					pre.release()
					if !slices.Equal(got, want) {
						t.Fatalf("%s: prepacked %s differs", name, side)
					}
				}
				for _, workers := range []int{2, 3} {
					g.Workers = workers
					got := make([]float32, batch*m*n)
					g.run(got, ks)
					g.Workers = 1
					one := make([]float32, batch*m*n)
					g.run(one, ks)
					if !slices.Equal(got, one) {
						t.Fatalf("%s: %d workers differ from 1", name, workers)
					}
				}
			}
		}
	}
}
