package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/viterin/vek/vek32"
)

// refDot is the plain reference: a float64 sum of float32 products.
func refDot(q, x []float32) float64 {
	var s float64
	for i := range q {
		s += float64(q[i]) * float64(x[i])
	}
	return s
}

// tol is the float32 accumulation error bound we accept against refDot:
// a few ulps of Σ|qᵢxᵢ| per √n terms.
func tol(q, x []float32) float64 {
	var a float64
	for i := range q {
		a += math.Abs(float64(q[i]) * float64(x[i]))
	}
	return 1e-6*a*math.Sqrt(float64(len(q))+1) + 1e-30
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// kernelSets are the implementations under test: Go always, assembly when
// this CPU has it.
func kernelSets() []*kernelSet {
	if asmKernels != nil {
		return []*kernelSet{goKernels, asmKernels}
	}
	return []*kernelSet{goKernels}
}

var dims = []int{0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 64, 100, 768, 771}

func TestDotMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range dims {
		q, x := randVec(r, d), randVec(r, d)
		want := refDot(q, x)
		if got := Dot(q, x); math.Abs(float64(got)-want) > tol(q, x) {
			t.Errorf("Dot d=%d: %v want %v", d, got, want)
		}
		for _, ks := range kernelSets() {
			if got := ks.dot(q, x); math.Abs(float64(got)-want) > tol(q, x) {
				t.Errorf("%s dot d=%d: %v want %v", ks.name, d, got, want)
			}
		}
	}
}

func TestDotLengthMismatchPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Dot with different lengths did not panic")
		}
	}()
	Dot(make([]float32, 3), make([]float32, 4))
}

// TestDotShapesBitIdentical checks the property the index relies on: the
// 1×1, 1×4 and 3×4 kernels give the same bits for the same pair.
func TestDotShapesBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, ks := range kernelSets() {
		for _, d := range dims {
			q := randVec(r, 3*d)
			x := randVec(r, 4*d)
			var b12 [12]float32
			ks.dot34(&b12, q, d, x, d, d)
			for i := range 3 {
				var b4 [4]float32
				ks.dot4(&b4, q[i*d:(i+1)*d], x, d)
				for j := range 4 {
					one := ks.dot(q[i*d:(i+1)*d], x[j*d:(j+1)*d])
					if math.Float32bits(one) != math.Float32bits(b4[j]) || math.Float32bits(one) != math.Float32bits(b12[i*4+j]) {
						t.Fatalf("%s d=%d pair (%d,%d): 1x1 %v 1x4 %v 3x4 %v", ks.name, d, i, j, one, b4[j], b12[i*4+j])
					}
					if want := refDot(q[i*d:(i+1)*d], x[j*d:(j+1)*d]); math.Abs(float64(one)-want) > tol(q[i*d:(i+1)*d], x[j*d:(j+1)*d]) {
						t.Fatalf("%s d=%d pair (%d,%d): %v want %v", ks.name, d, i, j, one, want)
					}
				}
			}
		}
	}
}

func TestDotRowsAndBlock(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cases := []struct{ nq, nx, d int }{
		{0, 5, 8}, {1, 0, 8}, {1, 1, 1}, {1, 7, 13}, {2, 9, 16}, {3, 4, 8}, {4, 13, 17},
		{5, 50, 768}, {7, 203, 33}, {3, 1, 0}, {10, 1000, 24},
	}
	for _, ks := range kernelSets() {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%dx%dx%d", ks.name, c.nq, c.nx, c.d), func(t *testing.T) {
				q, x := randVec(r, c.nq*c.d), randVec(r, c.nx*c.d)
				blk := make([]float32, c.nq*c.nx)
				if c.d > 0 {
					dotBlockWith(ks, blk, c.nx, q, c.nq, x, c.nx, c.d)
				}
				row := make([]float32, c.nx)
				for i := range c.nq {
					qi := q[i*c.d : (i+1)*c.d]
					dotRowsWith(ks, row, qi, x)
					for j := range c.nx {
						xj := x[j*c.d : (j+1)*c.d]
						want := refDot(qi, xj)
						if math.Abs(float64(row[j])-want) > tol(qi, xj) {
							t.Fatalf("rows q%d x%d: %v want %v", i, j, row[j], want)
						}
						if math.Float32bits(row[j]) != math.Float32bits(blk[i*c.nx+j]) {
							t.Fatalf("block q%d x%d: %v, rows gave %v", i, j, blk[i*c.nx+j], row[j])
						}
					}
				}
			})
		}
	}
}

func TestParallelEqualsSerial(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	d, nq, nx := 37, 5, 1003
	q, x := randVec(r, nq*d), randVec(r, nx*d)
	serial := make([]float32, nq*nx)
	DotBlock(serial, q, x, d)
	for _, w := range []int{1, 2, 3, 8} {
		par := make([]float32, nq*nx)
		DotBlockParallel(par, q, x, d, w)
		rows := make([]float32, nx)
		DotRowsParallel(rows, q[:d], x, w)
		for j := range serial {
			if math.Float32bits(serial[j]) != math.Float32bits(par[j]) {
				t.Fatalf("workers=%d: block[%d] %v serial %v", w, j, par[j], serial[j])
			}
		}
		for j := range rows {
			if math.Float32bits(rows[j]) != math.Float32bits(serial[j]) {
				t.Fatalf("workers=%d: rows[%d] %v serial %v", w, j, rows[j], serial[j])
			}
		}
	}
}

func TestDotF16AndU8(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, ks := range kernelSets() {
		for _, d := range dims {
			nx := 9
			q := randVec(r, 2*d)
			xf := randVec(r, nx*d)
			h := make([]uint16, nx*d)
			f32ToF16Go(h, xf)
			u := make([]uint8, nx*d)
			for i := range u {
				u[i] = uint8(r.IntN(256))
			}
			// Reference rows, decoded exactly.
			hf := make([]float32, nx*d)
			f16ToF32Go(hf, h)
			uf := make([]float32, nx*d)
			u8ToF32Go(uf, u)

			gotH := make([]float32, nx)
			gotU := make([]float32, nx)
			dotRowsF16With(ks, gotH, q[:d], h)
			dotRowsU8With(ks, gotU, q[:d], u)
			blkH := make([]float32, 2*nx)
			blkU := make([]float32, 2*nx)
			if d > 0 {
				dotBlockF16With(ks, blkH, nx, q, 2, h, nx, d, nil)
				dotBlockU8With(ks, blkU, nx, q, 2, u, nx, d, nil)
			}
			for j := range nx {
				xh, xu := hf[j*d:(j+1)*d], uf[j*d:(j+1)*d]
				if want := refDot(q[:d], xh); math.Abs(float64(gotH[j])-want) > tol(q[:d], xh) {
					t.Fatalf("%s f16 d=%d row %d: %v want %v", ks.name, d, j, gotH[j], want)
				}
				if want := refDot(q[:d], xu); math.Abs(float64(gotU[j])-want) > tol(q[:d], xu) {
					t.Fatalf("%s u8 d=%d row %d: %v want %v", ks.name, d, j, gotU[j], want)
				}
				if gotH[j] != blkH[j] || gotU[j] != blkU[j] {
					t.Fatalf("%s d=%d row %d: block f16 %v/%v u8 %v/%v", ks.name, d, j, blkH[j], gotH[j], blkU[j], gotU[j])
				}
				if want := ks.dot(q[d:], xh); blkH[nx+j] != want {
					t.Fatalf("%s d=%d row %d: f16 block q1 %v, f32 kernel on decoded row %v", ks.name, d, j, blkH[nx+j], want)
				}
			}
		}
	}
}

func TestParallelForRanges(t *testing.T) {
	cases := []struct{ n, w, align int }{{0, 2, 4}, {1, 2, 4}, {10, 3, 4}, {100, 7, 1}, {5, 10, 1}, {1003, 2, 64}}
	for _, c := range cases {
		seen := make([]int, c.n)
		var ranges [][2]int
		ParallelFor(c.n, c.w, c.align, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		ParallelFor(c.n, 1, c.align, func(_, lo, hi int) { ranges = append(ranges, [2]int{lo, hi}) })
		for i, s := range seen {
			if s != 1 {
				t.Fatalf("%+v: index %d visited %d times", c, i, s)
			}
		}
		if c.n > 0 && (len(ranges) != 1 || ranges[0] != [2]int{0, c.n}) {
			t.Fatalf("%+v: one worker got %v", c, ranges)
		}
	}
	// Inner boundaries are multiples of align.
	ParallelFor(1003, 3, 64, func(w, lo, hi int) {
		if lo%64 != 0 {
			t.Errorf("range [%d,%d) starts off the 64 grid", lo, hi)
		}
	})
}

func BenchmarkDot768(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	q, x := randVec(r, 768), randVec(r, 768)
	b.SetBytes(2 * 768 * 4)
	var s float32
	for b.Loop() {
		s += Dot(q, x)
	}
	_ = s
}

func BenchmarkDotRows(b *testing.B) {
	for _, n := range []int{1024, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			q, x := randVec(r, 768), randVec(r, n*768)
			out := make([]float32, n)
			b.SetBytes(int64(len(x) * 4))
			for b.Loop() {
				DotRowsParallel(out, q, x, 0)
			}
		})
	}
}

func BenchmarkDotRowsF16(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	n := 100_000
	q, xf := randVec(r, 768), randVec(r, n*768)
	x := make([]uint16, len(xf))
	EncodeF16(x, xf)
	out := make([]float32, n)
	b.SetBytes(int64(len(x) * 2))
	for b.Loop() {
		ParallelFor(n, 0, 256, func(_, lo, hi int) { DotRowsF16(out[lo:hi], q, x[lo*768:]) })
	}
}

func BenchmarkDotBlock(b *testing.B) {
	for _, nq := range []int{3, 32, 1024} {
		b.Run(fmt.Sprintf("q%d_x1024_d768", nq), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			nx, d := 1024, 768
			q, x := randVec(r, nq*d), randVec(r, nx*d)
			out := make([]float32, nq*nx)
			for b.Loop() {
				DotBlockParallel(out, q, x, d, 0)
			}
			b.ReportMetric(float64(2*nq*nx*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func BenchmarkDotBlockSingleThread(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	nq, nx, d := 96, 1024, 768
	q, x := randVec(r, nq*d), randVec(r, nx*d)
	out := make([]float32, nq*nx)
	for b.Loop() {
		DotBlock(out, q, x, d)
	}
	b.ReportMetric(float64(2*nq*nx*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// TestStreamSum: the four-stream sum equals a float64 sum to float32
// rounding for lengths around its 128-value steps, zero and empty included.
func TestStreamSum(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 31, 127, 128, 129, 1000, 4096 + 77} {
		x := randF32(r, n)
		var want, mag float64
		for _, v := range x {
			want += float64(v)
			mag += math.Abs(float64(v))
		}
		if got := StreamSum(x); math.Abs(float64(got)-want) > float64(n+2)*6e-8*mag+1e-30 {
			t.Errorf("n=%d: %v, want %v", n, got, want)
		}
	}
	if StreamSum(make([]float32, 500)) != 0 {
		t.Error("zeros")
	}
}

// BenchmarkStreamSum reads 64 MiB (beyond most L2s and many L3 slices) in
// GB/s, next to vek's sum.
//
//	go test -run '^$' -bench StreamSum ./tensor/
func BenchmarkStreamSum(b *testing.B) {
	x := make([]float32, 16<<20)
	for name, f := range map[string]func([]float32) float32{"streams": StreamSum, "vek": vek32.Sum} {
		b.Run(name, func(b *testing.B) {
			var s float32
			for b.Loop() {
				s += f(x)
			}
			b.ReportMetric(float64(4*len(x))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			if s != 0 {
				b.Fatal(s)
			}
		})
	}
}
