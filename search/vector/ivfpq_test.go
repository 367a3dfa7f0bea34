package vector

import (
	"math"
	"testing"

	"github.com/cas-engine/cas/internal/vectest"
)

func buildIVFPQ(t testing.TB, x []float32, d, nlist, m int, metric Metric) *IVFPQ {
	t.Helper()
	ix, err := NewIVFPQ(d, nlist, IVFPQOptions{Metric: metric, M: m, KMeans: KMeansOptions{Seed: 1, Iterations: 8}})
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

// TestIVFPQRecall checks recall@10 of IVF-PQ against exact search on a
// low-rank set (d 64, M 16: 16 bytes per vector, 1/16 of F32), by ADC
// alone and with the exact re-rank of the best 100 candidates from the
// F32 vectors; thresholds are a little under what this data gives.
func TestIVFPQRecall(t *testing.T) {
	fx := newIVFFixture(12000, 100, 64)
	ix := buildIVFPQ(t, fx.x, fx.d, 64, 16, InnerProduct)
	exact, _ := NewFlat(fx.d, InnerProduct, F32)
	exact.Add(nil, fx.x)
	for _, c := range []struct {
		nprobe, rerank int
		min            float64
	}{
		{4, 0, 0.45}, {16, 0, 0.50}, {16, 100, 0.95}, {64, 100, 0.98}, {64, 400, 1},
	} {
		if c.rerank > 0 {
			if err := ix.SetRefine(exact, ""); err != nil {
				t.Fatal(err)
			}
		}
		scores, ids, err := ix.Search(fx.q, fx.k, &SearchParams{NProbe: c.nprobe, Rerank: c.rerank})
		if err != nil {
			t.Fatal(err)
		}
		r := vectest.RecallAt(ids, fx.exactID, fx.k)
		t.Logf("nprobe %d rerank %d: recall@10 %.4f", c.nprobe, c.rerank, r)
		if r < c.min {
			t.Errorf("nprobe %d rerank %d: recall@10 %.4f < %.2f", c.nprobe, c.rerank, r, c.min)
		}
		// Re-ranked scores are exact inner products.
		if c.rerank > 0 {
			for i := range 5 {
				id := ids[i*fx.k]
				want := exactScore(fx.x[int(id)*fx.d:int(id+1)*fx.d], fx.q[i*fx.d:(i+1)*fx.d], InnerProduct)
				if math.Abs(float64(scores[i*fx.k])-want) > 1e-5 {
					t.Errorf("query %d: re-ranked score %v, exact %v", i, scores[i*fx.k], want)
				}
			}
		}
	}
}

// TestIVFPQMatchesReference checks the ADC scores against a plain decode:
// ⟨q, c_l + r̂⟩ (inner product) and ‖q − c_l − r̂‖² (L2) of the returned
// vector, for every result of every query, and that the thread count and
// batching do not change the results.
func TestIVFPQMatchesReference(t *testing.T) {
	x, q := vectest.LowRankPair(3000, 20, 24, 6, 5)
	for _, metric := range []Metric{InnerProduct, L2} {
		ix := buildIVFPQ(t, x, 24, 16, 8, metric)
		// Where each id lives.
		where := map[int64][2]int{}
		for l := range ix.lists {
			for j, id := range ix.lists[l].ids {
				where[id] = [2]int{l, j}
			}
		}
		scores, ids, err := ix.Search(q, 10, &SearchParams{NProbe: 4, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		dec := make([]float32, 24)
		for i := range 20 {
			for r := range 10 {
				id := ids[i*10+r]
				if id < 0 {
					t.Fatalf("%v query %d rank %d: padding", metric, i, r)
				}
				w := where[id]
				ix.pq.decode(dec, ix.lists[w[0]].codes[w[1]*8:(w[1]+1)*8])
				c := ix.quantizer.codes.f32[w[0]*24 : (w[0]+1)*24]
				for t := range dec {
					dec[t] += c[t]
				}
				want := exactScore(dec, q[i*24:(i+1)*24], metric)
				if math.Abs(float64(scores[i*10+r])-want) > 1e-4*max(1, math.Abs(want)) {
					t.Errorf("%v query %d rank %d: ADC %v, decoded %v", metric, i, r, scores[i*10+r], want)
				}
			}
		}
		s4, i4, _ := ix.Search(q, 10, &SearchParams{NProbe: 4, Threads: 4})
		vectest.SameResults(t, metric.String()+" threads", scores, ids, s4, i4)
		s1, i1, _ := ix.Search(q[:24*7], 10, &SearchParams{NProbe: 4})
		vectest.SameResults(t, metric.String()+" batch", scores[:70], ids[:70], s1, i1)
	}
}

func TestIVFPQErrors(t *testing.T) {
	if _, err := NewIVFPQ(10, 4, IVFPQOptions{M: 3}); err == nil {
		t.Error("M 3 for d 10: want an error")
	}
	ix, _ := NewIVFPQ(8, 4, IVFPQOptions{M: 2})
	if _, _, err := ix.Search(make([]float32, 8), 1, nil); err == nil {
		t.Error("search before train: want an error")
	}
	if err := ix.Train(make([]float32, 8*100)); err == nil {
		t.Error("100 training vectors for 256 codes: want an error")
	}
	x := vectest.LowRank(300, 8, 2, 1)
	if err := ix.Train(x); err != nil {
		t.Fatal(err)
	}
	ix.Add(nil, x)
	short, _ := NewFlat(8, InnerProduct, F32)
	short.Add(nil, x[:8*10])
	if err := ix.SetRefine(short, ""); err == nil {
		t.Error("refine of 10 rows for 300 vectors: want an error")
	}
}
