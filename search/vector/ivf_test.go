package vector

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/cas-engine/cas/internal/vectest"
)

// ivfFixture is a low-rank data set with its exact top-10.
type ivfFixture struct {
	d, k    int
	x, q    []float32
	exactID [][]int64
}

func newIVFFixture(n, nq, d int) *ivfFixture {
	x, q := vectest.LowRankPair(n, nq, d, 8, 11)
	f := &ivfFixture{d: d, k: 10, x: x, q: q}
	_, f.exactID = bruteForce(x, nil, q, d, f.k, InnerProduct)
	return f
}

// checkRecall logs the recall@k of ids against the exact top-k under
// label, fails t when it is below min, and returns it.
func (f *ivfFixture) checkRecall(t *testing.T, ids []int64, label string, min float64) float64 {
	t.Helper()
	r := vectest.RecallAt(ids, f.exactID, f.k)
	t.Logf("%s: recall@%d %.4f", label, f.k, r)
	if r < min {
		t.Errorf("%s: recall@%d %.4f < %.2f", label, f.k, r, min)
	}
	return r
}

func buildIVF(t testing.TB, x []float32, d, nlist int, m Metric, enc Encoding) *IVF {
	t.Helper()
	ix, err := NewIVF(d, nlist, IVFOptions{Metric: m, Encoding: enc, KMeans: KMeansOptions{Seed: 1}})
	return trainAndAdd(t, ix, err, x)
}

// trainAndAdd trains the new index ix (err: its constructor's error) on x
// and adds x, failing t on any error.
func trainAndAdd[I Index](t testing.TB, ix I, err error, x []float32) I {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Train(x); err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(nil, x); err != nil {
		t.Fatal(err)
	}
	return ix
}

// TestIVFRecallAgainstFlat checks recall@10 of IVF against exact search at
// several nprobe, with thresholds a little under what this data gives.
func TestIVFRecallAgainstFlat(t *testing.T) {
	fx := newIVFFixture(8000, 100, 32)
	cases := []struct {
		enc    Encoding
		nprobe int
		min    float64
	}{
		{F32, 1, 0.37}, {F32, 4, 0.80}, {F32, 16, 0.97}, {F32, 64, 1},
		{F16, 16, 0.97}, {SQ8, 16, 0.95}, {SQ8, 64, 0.96},
	}
	built := map[Encoding]*IVF{}
	prev := map[Encoding]float64{}
	for _, c := range cases {
		ix := built[c.enc]
		if ix == nil {
			ix = buildIVF(t, fx.x, fx.d, 64, InnerProduct, c.enc)
			built[c.enc] = ix
		}
		_, ids, err := ix.Search(fx.q, fx.k, &SearchParams{NProbe: c.nprobe})
		if err != nil {
			t.Fatal(err)
		}
		r := fx.checkRecall(t, ids, fmt.Sprintf("%v nprobe %d", c.enc, c.nprobe), c.min)
		if r < prev[c.enc] {
			t.Errorf("%v: recall fell from %.3f to %.3f as nprobe grew to %d", c.enc, prev[c.enc], r, c.nprobe)
		}
		prev[c.enc] = r
	}
}

// TestIVFAllListsEqualsFlat: probing every list of an F32 IVF is an exact
// search, so it must equal the flat index: bit for bit one query at a time
// (the same kernels), to rounding for the batch (the flat batch runs on the
// GEMM).
func TestIVFAllListsEqualsFlat(t *testing.T) {
	for _, m := range []Metric{InnerProduct, L2} {
		d := 24
		x, q := vectest.LowRankPair(3000, 20, d, 5, 13)
		ix := buildIVF(t, x, d, 32, m, F32)
		f, _ := NewFlat(d, m, F32)
		f.Add(nil, x)
		s1, i1, err := f.Search(q, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		s2, i2, err := ix.Search(q, 10, &SearchParams{NProbe: 32})
		if err != nil {
			t.Fatal(err)
		}
		closeResults(t, m.String(), s1, i1, s2, i2, 1e-6)
		for i := range 20 {
			s1, i1, _ := f.Search(q[i*d:(i+1)*d], 10, nil)
			s2, i2, _ := ix.Search(q[i*d:(i+1)*d], 10, &SearchParams{NProbe: 32})
			vectest.SameResults(t, fmt.Sprintf("%v single %d", m, i), s1, i1, s2, i2)
		}
	}
}

func TestIVFThreadsAndBatchingDoNotChangeResults(t *testing.T) {
	d := 32
	x, q := vectest.LowRankPair(6000, 41, d, 8, 17)
	for _, m := range []Metric{InnerProduct, L2} {
		for _, enc := range []Encoding{F32, F16, SQ8} {
			ix := buildIVF(t, x, d, 40, m, enc)
			p := &SearchParams{NProbe: 7, Threads: 1}
			s1, i1, err := ix.Search(q, 10, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, th := range []int{2, 5} {
				s2, i2, _ := ix.Search(q, 10, &SearchParams{NProbe: 7, Threads: th})
				vectest.SameResults(t, fmt.Sprintf("%v/%v threads %d", m, enc, th), s1, i1, s2, i2)
			}
			for i := range 41 {
				s2, i2, _ := ix.Search(q[i*d:(i+1)*d], 10, &SearchParams{NProbe: 7, Threads: 2})
				vectest.SameResults(t, fmt.Sprintf("%v/%v single %d", m, enc, i), s1[i*10:(i+1)*10], i1[i*10:(i+1)*10], s2, i2)
			}
		}
	}
}

// TestIVFScoresAreTrue checks the returned scores against the stored
// (decoded) vectors: for F32 the exact inner product or distance.
func TestIVFScoresAreTrue(t *testing.T) {
	d := 16
	x, q := vectest.LowRankPair(2000, 10, d, 4, 19)
	for _, m := range []Metric{InnerProduct, L2} {
		for _, c := range []struct {
			enc Encoding
			tol float64
		}{{F32, 1e-5}, {F16, 2e-3}, {SQ8, 0.02}} {
			ix := buildIVF(t, x, d, 16, m, c.enc)
			scores, ids, err := ix.Search(q, 5, &SearchParams{NProbe: 4})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				for j := range 5 {
					id := ids[i*5+j]
					want := exactScore(x[id*int64(d):(id+1)*int64(d)], q[i*d:(i+1)*d], m)
					if math.Abs(float64(scores[i*5+j])-want) > c.tol {
						t.Fatalf("%v/%v query %d id %d: score %v, true %v", m, c.enc, i, id, scores[i*5+j], want)
					}
				}
			}
		}
	}
}

func TestIVFIDsAndPadding(t *testing.T) {
	d := 8
	x := vectest.LowRank(200, d, 3, 23)
	ids := make([]int64, 200)
	for i := range ids {
		ids[i] = int64(1000 + 7*i)
	}
	ix, _ := NewIVF(d, 8, IVFOptions{NProbe: 1})
	if err := ix.Add(nil, x); !errors.Is(err, ErrNotTrained) {
		t.Fatalf("untrained add: %v", err)
	}
	if _, _, err := ix.Search(x[:d], 1, nil); !errors.Is(err, ErrNotTrained) {
		t.Fatalf("untrained search: %v", err)
	}
	if err := ix.Train(x[:7*d]); err == nil {
		t.Fatal("trained 8 lists on 7 vectors")
	}
	if err := ix.Train(x); err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(ids, x); err != nil {
		t.Fatal(err)
	}
	if err := ix.Train(x); err == nil {
		t.Fatal("retrained a non-empty index")
	}
	// Each vector finds itself first.
	_, got, err := ix.Search(x[:20*d], 1, &SearchParams{NProbe: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if got[i] != ids[i] {
			t.Fatalf("vector %d found %d, want %d", i, got[i], ids[i])
		}
	}
	// k beyond the probed lists pads with −1.
	scores, got, _ := ix.Search(x[:d], 150, &SearchParams{NProbe: 1})
	sizes := ix.ListSizes()
	maxList := 0
	for _, s := range sizes {
		maxList = max(maxList, s)
	}
	if got[149] != -1 || scores[149] != -math.MaxFloat32 || maxList >= 150 {
		t.Fatalf("padding: id %d score %v (largest list %d)", got[149], scores[149], maxList)
	}
	total := 0
	for _, s := range sizes {
		total += s
	}
	if total != 200 || ix.Len() != 200 {
		t.Fatalf("list sizes sum to %d, Len %d", total, ix.Len())
	}
}

func BenchmarkIVFSearch(b *testing.B) {
	d, n := 768, 50_000
	x, q := vectest.LowRankPair(n, 1000, d, 48, 1)
	ix := buildIVF(b, x, d, 256, InnerProduct, F32)
	for _, nprobe := range []int{1, 16} {
		for _, nq := range []int{1, 1000} {
			b.Run(fmt.Sprintf("nprobe%d/q%d", nprobe, nq), func(b *testing.B) {
				p := &SearchParams{NProbe: nprobe}
				for b.Loop() {
					ix.Search(q[:nq*d], 10, p)
				}
				b.ReportMetric(float64(nq)*float64(b.N)/b.Elapsed().Seconds(), "q/s")
			})
		}
	}
}
