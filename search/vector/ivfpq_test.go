package vector

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/vectest"
)

func buildIVFPQ(t testing.TB, x []float32, d, nlist, m int, metric Metric) *IVFPQ {
	t.Helper()
	ix, err := NewIVFPQ(d, nlist, IVFPQOptions{Metric: metric, M: m, KMeans: KMeansOptions{Seed: 1, Iterations: 8}})
	return trainAndAdd(t, ix, err, x)
}

// TestIVFPQRecall checks recall@10 of IVF-PQ against exact search on a
// low-rank set (d 64, M 8: 8 bytes per vector, 1/32 of F32), by ADC
// alone and with the exact re-rank of the best 100 candidates from the
// F32 vectors; thresholds are a little under what this data gives.
func TestIVFPQRecall(t *testing.T) {
	fx := newIVFFixture(8000, 100, 64)
	ix := buildIVFPQ(t, fx.x, fx.d, 64, 8, InnerProduct)
	exact, _ := NewFlat(fx.d, InnerProduct, F32)
	exact.Add(nil, fx.x)
	for _, c := range []struct {
		nprobe, rerank int
		min            float64
	}{
		{4, 0, 0.45}, {16, 0, 0.46}, {16, 100, 0.97}, {64, 100, 0.97}, {64, 400, 0.999},
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
		fx.checkRecall(t, ids, fmt.Sprintf("nprobe %d rerank %d", c.nprobe, c.rerank), c.min)
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
	if err := ix.Train(x); err == nil || err.Error() != "train: the IVF-PQ index already holds vectors" {
		t.Errorf("train after add: %v", err)
	}
	if err := ix.Train(x[:7]); err == nil || !strings.Contains(err.Error(), "train:") {
		t.Errorf("train on a partial vector: %v", err)
	}
	iv, _ := NewIVF(8, 4, IVFOptions{})
	if err := iv.Train(x); err != nil {
		t.Fatal(err)
	}
	iv.Add(nil, x)
	if err := iv.Train(x); err == nil || err.Error() != "train: the IVF index already holds vectors" {
		t.Errorf("IVF train after add: %v", err)
	}
	short, _ := NewFlat(8, InnerProduct, F32)
	short.Add(nil, x[:8*10])
	if err := ix.SetRefine(short, ""); err == nil {
		t.Error("refine of 10 rows for 300 vectors: want an error")
	}
}

// TestIVFPQRefineSaved: an IVF-PQ index with a refine source saved to a
// cas file records the source (absolute outside the index folder,
// relative inside it, so the folder can move) and opening the file
// re-attaches it, so the
// re-ranked results survive the round trip, read by pread; a missing or
// truncated source is an error that names it.
func TestIVFPQRefineSaved(t *testing.T) {
	x, q := vectest.LowRankPair(2000, 10, 16, 4, 9)
	work := t.TempDir()
	exact, _ := NewFlat(16, InnerProduct, F32)
	exact.Add(nil, x)
	for _, inside := range []bool{false, true} {
		dir := filepath.Join(work, fmt.Sprint("idx", inside))
		src := filepath.Join(work, "flat.faiss")
		if inside {
			src = filepath.Join(dir, "flat.faiss")
		}
		os.MkdirAll(dir, 0o755)
		if err := WriteFAISS(exact, src); err != nil {
			t.Fatal(err)
		}
		ix := buildIVFPQ(t, x, 16, 8, 4, InnerProduct)
		ix.SetRerank(50)
		mapped, err := OpenIndex(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ix.SetRefine(mapped.(*Flat), src); err != nil {
			t.Fatal(err)
		}
		s1, i1, _ := ix.Search(q, 10, &SearchParams{NProbe: 4})
		if err := SaveIndex(ix, dir); err != nil {
			t.Fatal(err)
		}
		if inside {
			// Recorded relative: the folder moves with its source.
			moved := dir + "-moved"
			if err := os.Rename(dir, moved); err != nil {
				t.Fatal(err)
			}
			dir, src = moved, filepath.Join(moved, "flat.faiss")
		}
		back, err := OpenIndex(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		info := Describe(back)
		if info.Kind != "ivfpq" || info.Rerank != 50 || info.PQM != 4 || info.Refine != src {
			t.Errorf("inside %v: %+v", inside, info)
		}
		s2, i2, _ := back.Search(q, 10, &SearchParams{NProbe: 4})
		vectest.SameResults(t, "reopened", s1, i1, s2, i2)
		if back.(*IVFPQ).rows == nil {
			t.Errorf("inside %v: the reopened index re-ranks through the memory map, want pread", inside)
		}
		if inside {
			// pread turns a source cut short under a running index into a
			// search error (a memory map would fault).
			if err := os.Truncate(src, 200); err != nil {
				t.Fatal(err)
			}
			if _, _, err := back.Search(q, 10, &SearchParams{NProbe: 4}); err == nil || !strings.Contains(err.Error(), "flat.faiss") {
				t.Errorf("truncated refine source: %v", err)
			}
		}
		back.Close()
		ix.Close()
		os.Remove(src)
		if _, err := OpenIndex(dir, nil); err == nil || !strings.Contains(err.Error(), "flat.faiss") {
			t.Errorf("missing refine source: %v", err)
		}
	}
}
