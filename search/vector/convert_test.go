package vector

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cas-engine/cas/internal/vectest"
)

// TestConvert streams a memory-mapped FAISS IndexFlatIP into each
// conversion: the file written must search exactly like the same index
// built in memory (same training sample), and recall@10 against exact
// search must reach each encoding's bound.
func TestConvert(t *testing.T) {
	const n, nq, d, k = 20000, 200, 64, 10
	all := vectest.LowRank(n+nq, d, 16, 7)
	base, q := all[:n*d], all[n*d:]
	work := t.TempDir()
	exact, _ := NewFlat(d, InnerProduct, F32)
	exact.Add(nil, base)
	faissPath := filepath.Join(work, "flat.index")
	if err := WriteFAISS(exact, faissPath); err != nil {
		t.Fatal(err)
	}
	_, flatIDs, _ := exact.Search(q, k, nil)
	wantIDs := make([][]int64, nq)
	for i := range wantIDs {
		wantIDs[i] = flatIDs[i*k : (i+1)*k]
	}
	mapped, err := OpenIndex(faissPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	src := mapped.(*Flat)
	km := KMeansOptions{Iterations: 10, Seed: 5, Threads: 2}
	for _, tc := range []struct {
		name      string
		enc       Encoding
		nlist     int
		nprobe    []int
		minRecall []float64
		pq        int // > 0: IVF-PQ with that many sub-quantizers, re-ranking 100 from the source
	}{
		{"f16", F16, 0, []int{0}, []float64{0.99}, 0},
		{"sq8", SQ8, 0, []int{0}, []float64{0.97}, 0},
		{"ivf64-sq8", SQ8, 64, []int{64, 16, 4}, []float64{0.97, 0.95, 0.65}, 0},
		{"ivf32-f16", F16, 32, []int{32}, []float64{0.99}, 0},
		{"ivf32-pq8", F32, 32, []int{32, 8}, []float64{0.86, 0.85}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(work, tc.name+".cas")
			err := Convert(context.Background(), src, path, ConvertOptions{
				Encoding: tc.enc, NList: tc.nlist, NProbe: 3, KMeans: km, Chunk: 999, TrainSize: 5000, Release: ReleaseMapped,
				PQ: tc.pq, Rerank: 100, RefinePath: faissPath})
			if err != nil {
				t.Fatal(err)
			}
			got, err := OpenIndex(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			// The same index built in memory from the same sample.
			var ref Index
			sample := trainingSample(exact, 5000, func([]float32) {})
			switch {
			case tc.pq > 0:
				ivfpq, _ := NewIVFPQ(d, tc.nlist, IVFPQOptions{Metric: InnerProduct, M: tc.pq, NProbe: 3, Rerank: 100, KMeans: km})
				ref = ivfpq
			case tc.nlist > 0:
				ivf, _ := NewIVF(d, tc.nlist, IVFOptions{Metric: InnerProduct, Encoding: tc.enc, NProbe: 3, KMeans: km})
				ref = ivf
			default:
				ref, _ = NewFlat(d, InnerProduct, tc.enc)
			}
			if err := ref.Train(sample); err != nil {
				t.Fatal(err)
			}
			ref.Add(nil, base)
			wantEnc := tc.enc.String()
			if tc.pq > 0 {
				// The converted index re-ranks from the source file, the
				// reference from the same vectors in memory.
				if err := ref.(*IVFPQ).SetRefine(exact, ""); err != nil {
					t.Fatal(err)
				}
				wantEnc = pqEncoding
				if info := Describe(got); info.PQM != tc.pq || info.Rerank != 100 || info.Refine != faissPath {
					t.Errorf("converted index %+v", info)
				}
			}
			if info := Describe(got); info.Count != n || info.Encoding != wantEnc || info.NList != tc.nlist || (tc.nlist > 0 && info.NProbe != 3) {
				t.Errorf("converted index %+v", info)
			}
			for i, np := range tc.nprobe {
				p := &SearchParams{NProbe: np}
				gs, gi, err := got.Search(q, k, p)
				if err != nil {
					t.Fatal(err)
				}
				rs, ri, _ := ref.Search(q, k, p)
				vectest.SameResults(t, fmt.Sprintf("%s nprobe %d: converted vs in memory", tc.name, np), gs, gi, rs, ri)
				r := vectest.RecallAt(gi, wantIDs, k)
				t.Logf("%s nprobe %d: recall@10 %.4f", tc.name, np, r)
				if r < tc.minRecall[i] {
					t.Errorf("%s nprobe %d: recall@10 %.4f < %.2f", tc.name, np, r, tc.minRecall[i])
				}
			}
		})
	}
	// A conversion that fails (here: more lists than vectors) leaves
	// nothing; so does an interrupted one.
	for _, opt := range []ConvertOptions{{Encoding: SQ8, NList: n + 1}, {Encoding: F16}} {
		ctx, cancel := context.WithCancel(context.Background())
		if opt.Encoding == F16 {
			cancel()
		}
		out := filepath.Join(work, "failed.cas")
		err := Convert(ctx, src, out, opt)
		cancel()
		if err == nil {
			t.Fatalf("%+v: want an error", opt)
		}
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Errorf("%+v: %s left behind", opt, out)
		}
		if entries, _ := os.ReadDir(work); len(entries) != 1+5 {
			t.Errorf("%+v: %d entries in %s, want the source and 5 converted files", opt, len(entries), work)
		}
	}
}
