package vector

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cas-engine/cas/internal/vectest"
)

func TestFlatMatchesBruteForce(t *testing.T) {
	for _, m := range []Metric{InnerProduct, L2} {
		for _, enc := range []Encoding{F32, F16, SQ8} {
			for _, c := range []struct{ n, d, nq, k int }{{0, 8, 2, 3}, {1, 1, 1, 1}, {5, 3, 4, 10}, {301, 17, 7, 5}, {1000, 64, 33, 10}} {
				t.Run(fmt.Sprintf("%v/%v/n%d_d%d_q%d_k%d", m, enc, c.n, c.d, c.nq, c.k), func(t *testing.T) {
					x := vectest.LowRank(c.n, c.d, 4, uint64(c.n+c.d))
					q := vectest.LowRank(c.nq, c.d, 4, 7)
					f, err := NewFlat(c.d, m, enc)
					if err != nil {
						t.Fatal(err)
					}
					train := x
					if len(train) == 0 {
						train = q
					}
					if err := f.Train(train); err != nil {
						t.Fatal(err)
					}
					if err := f.Add(nil, x); err != nil {
						t.Fatal(err)
					}
					// The reference scores the decoded (stored) vectors.
					dec := make([]float32, len(x))
					for j := range c.n {
						if err := f.Reconstruct(j, dec[j*c.d:]); err != nil {
							t.Fatal(err)
						}
					}
					refS, refI := bruteForce(dec, nil, q, c.d, c.k, m)
					scores, ids, err := f.Search(q, c.k, nil)
					if err != nil {
						t.Fatal(err)
					}
					for i := range c.nq {
						for j := range c.k {
							got, gotS := ids[i*c.k+j], scores[i*c.k+j]
							if j >= c.n {
								if got != -1 || gotS != m.worst() {
									t.Fatalf("query %d rank %d: padding (%v, %d)", i, j, gotS, got)
								}
								continue
							}
							want := refS[i*min(c.k, c.n)+j]
							tol := 1e-4
							if f.useBF16() && f.useGEMM(c.nq) {
								tol = 4e-3 * max(1, math.Abs(want)) // bfloat16 scores (flat_bf16.go)
							}
							if math.Abs(float64(gotS)-want) > tol {
								t.Fatalf("query %d rank %d: score %v want %v", i, j, gotS, want)
							}
							// Ids may differ only between (near-)tied scores.
							if got != refI[i][j] {
								alt := exactScore(dec[got*int64(c.d):(got+1)*int64(c.d)], q[i*c.d:(i+1)*c.d], m)
								if math.Abs(alt-want) > tol {
									t.Fatalf("query %d rank %d: id %d (score %v) want %d (%v)", i, j, got, alt, refI[i][j], want)
								}
							}
						}
					}
				})
			}
		}
	}
}

func TestFlatEncodingsAgreeWithF32(t *testing.T) {
	d := 96
	x, q := vectest.LowRankPair(3000, 50, d, 12, 3)
	k := 10
	_, ref := bruteForce(x, nil, q, d, k, InnerProduct)
	for _, c := range []struct {
		enc    Encoding
		recall float64
	}{{F32, 1}, {F16, 0.99}, {SQ8, 0.85}} {
		f, _ := NewFlat(d, InnerProduct, c.enc)
		if err := f.Train(x); err != nil {
			t.Fatal(err)
		}
		if err := f.Add(nil, x); err != nil {
			t.Fatal(err)
		}
		_, ids, err := f.Search(q, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := vectest.RecallAt(ids, ref, k); r < c.recall {
			t.Errorf("%v: recall@10 %.3f < %.2f", c.enc, r, c.recall)
		}
	}
}

// TestFlatF16BatchAMX: an F16 batch scored on AMX tiles in bfloat16
// (flat_bf16.go) keeps recall@10 ≥ 0.99 against exact F32 search, on unit
// vectors of E5's width.
func TestFlatF16BatchAMX(t *testing.T) {
	d := 768
	x, q := vectest.LowRankPair(6000, 64, d, 24, 13)
	_, ref := bruteForce(x, nil, q, d, 10, InnerProduct)
	f, _ := NewFlat(d, InnerProduct, F16)
	f.Add(nil, x)
	if !f.useBF16() {
		t.Log("no AMX-BF16 here: the F16 batch runs on the F16 kernels")
	}
	_, ids, err := f.Search(q, 10, &SearchParams{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := vectest.RecallAt(ids, ref, 10)
	t.Logf("F16 batch of 64 (AMX %v): recall@10 %.4f", f.useBF16(), r)
	if r < 0.99 {
		t.Errorf("recall@10 %.4f < 0.99", r)
	}
}

func TestFlatThreadsAndBatchingDoNotChangeResults(t *testing.T) {
	d := 40
	x, q := vectest.LowRankPair(20000, 37, d, 6, 5)
	for _, m := range []Metric{InnerProduct, L2} {
		for _, enc := range []Encoding{F32, F16, SQ8} {
			f, _ := NewFlat(d, m, enc)
			f.Train(x)
			f.Add(nil, x)
			s1, i1, err := f.Search(q, 7, &SearchParams{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, th := range []int{2, 3, 8} {
				s2, i2, _ := f.Search(q, 7, &SearchParams{Threads: th})
				vectest.SameResults(t, fmt.Sprintf("%v/%v threads %d", m, enc, th), s1, i1, s2, i2)
			}
			// One query at a time (the 1×4 kernel) equals the batch (3×4)
			// bit for bit; an F32 batch of ≥ gemmMinQueries goes through the
			// GEMM, which sums in another order: equal to rounding.
			for i := range 37 {
				s2, i2, _ := f.Search(q[i*d:(i+1)*d], 7, &SearchParams{Threads: 2})
				name := fmt.Sprintf("%v/%v single %d", m, enc, i)
				switch {
				case f.useBF16():
					// Batch on AMX in bfloat16, single query in F16: scores
					// equal to bfloat16 rounding rank by rank, and an id of
					// one missing from the other only at the boundary.
					bs, bi := s1[i*7:(i+1)*7], i1[i*7:(i+1)*7]
					for j := range 7 {
						tol := 4e-3 * max(1, math.Abs(float64(s2[j])))
						if math.Abs(float64(bs[j]-s2[j])) > tol {
							t.Fatalf("%s rank %d: batch score %v, single %v", name, j, bs[j], s2[j])
						}
						if !slices.Contains(bi, i2[j]) && math.Abs(float64(s2[j]-bs[6])) > 2*tol {
							t.Fatalf("%s rank %d: id %d (%v) missing from the batch, not at its boundary %v", name, j, i2[j], s2[j], bs[6])
						}
					}
				case f.useGEMM(37):
					closeResults(t, name, s1[i*7:(i+1)*7], i1[i*7:(i+1)*7], s2, i2, 1e-6)
				default:
					vectest.SameResults(t, name, s1[i*7:(i+1)*7], i1[i*7:(i+1)*7], s2, i2)
				}
			}
		}
	}
}

func TestFlatIDs(t *testing.T) {
	d := 4
	f, _ := NewFlat(d, InnerProduct, F32)
	a := []float32{1, 0, 0, 0, 0, 1, 0, 0}
	b := []float32{0, 0, 1, 0, 0, 0, 0, 1}
	if err := f.Add(nil, a); err != nil {
		t.Fatal(err)
	}
	if err := f.Add([]int64{70, 80}, b); err != nil {
		t.Fatal(err)
	}
	if err := f.Add(nil, []float32{0.5, 0.5, 0.5, 0.5}); err != nil {
		t.Fatal(err)
	}
	q := []float32{0, 0, 1, 0.1, 1, 0, 0, 0}
	scores, ids, err := f.Search(q, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{70, 4, 0, 4}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("ids %v want %v (scores %v)", ids, want, scores)
		}
	}
	if f.ID(1) != 1 || f.ID(2) != 70 || f.ID(4) != 4 {
		t.Fatalf("ID(): %d %d %d", f.ID(1), f.ID(2), f.ID(4))
	}
}

func TestFlatErrors(t *testing.T) {
	if _, err := NewFlat(0, InnerProduct, F32); err == nil {
		t.Error("d=0 accepted")
	}
	if _, err := NewFlat(8, Metric(9), F32); err == nil {
		t.Error("bad metric accepted")
	}
	if _, err := NewFlat(8, L2, Encoding(7)); err == nil {
		t.Error("bad encoding accepted")
	}
	f, _ := NewFlat(4, InnerProduct, SQ8)
	if err := f.Add(nil, make([]float32, 4)); !errors.Is(err, ErrNotTrained) {
		t.Errorf("untrained SQ8 add: %v", err)
	}
	if _, _, err := f.Search(make([]float32, 4), 1, nil); !errors.Is(err, ErrNotTrained) {
		t.Errorf("untrained SQ8 search: %v", err)
	}
	g, _ := NewFlat(4, InnerProduct, F32)
	cases := []struct {
		name string
		err  error
	}{
		{"ragged add", g.Add(nil, make([]float32, 5))},
		{"ids count", g.Add([]int64{1}, make([]float32, 8))},
		{"train ragged", g.Train(make([]float32, 3))},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, _, err := g.Search(make([]float32, 4), 0, nil); err == nil {
		t.Error("k=0 accepted")
	}
	if _, _, err := g.Search(make([]float32, 6), 1, nil); err == nil {
		t.Error("ragged queries accepted")
	}
	s, ids, err := g.Search(nil, 3, nil)
	if err != nil || len(s) != 0 || len(ids) != 0 {
		t.Errorf("no queries: %v %v %v", s, ids, err)
	}
	if err := g.Reconstruct(0, make([]float32, 4)); err == nil {
		t.Error("reconstruct of an empty index")
	}
}

func BenchmarkFlatSearch(b *testing.B) {
	d, n := 768, 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	q := x[:1000*d]
	for _, enc := range []Encoding{F32, F16} {
		f, _ := NewFlat(d, InnerProduct, enc)
		f.Add(nil, x)
		for _, nq := range []int{1, 32, 1000} {
			b.Run(fmt.Sprintf("%v/q%d", enc, nq), func(b *testing.B) {
				for b.Loop() {
					f.Search(q[:nq*d], 10, nil)
				}
				b.ReportMetric(float64(nq)*float64(b.N)/b.Elapsed().Seconds(), "q/s")
			})
		}
	}
}
