package vector

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ivfpqPeerScript trains FAISS IndexIVFPQ (inner product and L2) on a
// low-rank set, writes each index, the vectors and FAISS's top-10; given
// file names after the folder, it instead reads those (our) files and
// writes FAISS's top-10 for them.
const ivfpqPeerScript = `
import sys, json, numpy as np, faiss
d = sys.argv[1]
if len(sys.argv) > 2:
    q = np.fromfile(d + "/query.f32", dtype="float32").reshape(-1, 32)
    for name in sys.argv[2:]:
        ix = faiss.read_index(d + "/" + name)
        ix.nprobe = 6
        D, I = ix.search(q, 10)
        json.dump({"scores": D.ravel().tolist(), "ids": I.ravel().tolist()}, open(d + "/" + name + ".json", "w"))
    sys.exit(0)
rng = np.random.default_rng(7)
a = rng.standard_normal((6, 32)).astype("float32")
def draw(n):
    x = rng.standard_normal((n, 6)).astype("float32") @ a + 0.5 * rng.standard_normal((n, 32)).astype("float32")
    return x / np.linalg.norm(x, axis=1, keepdims=True)
x, q = draw(4000), draw(50)
x.tofile(d + "/base.f32"); q.tofile(d + "/query.f32")
out = {}
for metric, name in [(faiss.METRIC_INNER_PRODUCT, "ivfpq_ip"), (faiss.METRIC_L2, "ivfpq_l2")]:
    qz = faiss.IndexFlatIP(32) if metric == faiss.METRIC_INNER_PRODUCT else faiss.IndexFlatL2(32)
    ix = faiss.IndexIVFPQ(qz, 32, 16, 8, 8, metric)
    ix.train(x); ix.add(x); ix.nprobe = 6
    faiss.write_index(ix, d + "/" + name + ".faiss")
    D, I = ix.search(q, 10)
    out[name] = {"scores": D.ravel().tolist(), "ids": I.ravel().tolist()}
json.dump(out, open(d + "/results.json", "w"))
`

type faissTop struct {
	Scores []float32 `json:"scores"`
	IDs    []int64   `json:"ids"`
}

// TestIVFPQFAISSGolden runs only where python3 with faiss and numpy is
// installed (the peer; CI does not require it): FAISS trains IndexIVFPQ
// (nlist 16, M 8, inner product and L2) and writes it; our reader opens
// FAISS's file, our encoder re-encodes the vectors with FAISS's coarse
// centroids and codebooks into the same lists and codes, and our ADC
// search returns FAISS's top-10. Then FAISS reads an IVF-PQ index we
// trained and wrote, and returns our top-10.
func TestIVFPQFAISSGolden(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import faiss, numpy").Run(); err != nil {
		t.Skip("python3 with faiss and numpy not available")
	}
	dir := t.TempDir()
	// One BLAS thread: on a shared 2-core machine FAISS's default
	// thread pool takes 4× as long.
	peer := func(args ...string) *exec.Cmd {
		c := exec.Command(py, append([]string{"-c", ivfpqPeerScript, dir}, args...)...)
		c.Env = append(os.Environ(), "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1")
		return c
	}
	if out, err := peer().CombinedOutput(); err != nil {
		t.Fatalf("faiss script: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]faissTop
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	x, err := ReadVectorFile(filepath.Join(dir, "base.f32"), 32)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ReadVectorFile(filepath.Join(dir, "query.f32"), 32)
	if err != nil {
		t.Fatal(err)
	}
	compare := func(name string, scores []float32, ids []int64, w faissTop) {
		t.Helper()
		for j := range w.IDs {
			if math.Abs(float64(scores[j]-w.Scores[j])) > 1e-4*max(1, math.Abs(float64(w.Scores[j]))) {
				t.Fatalf("%s result %d: score %v, FAISS %v", name, j, scores[j], w.Scores[j])
			}
			if ids[j] != w.IDs[j] && math.Abs(float64(w.Scores[j]-w.Scores[j^1])) > 1e-5 {
				t.Fatalf("%s result %d: id %d, FAISS %d", name, j, ids[j], w.IDs[j])
			}
		}
	}
	for _, name := range []string{"ivfpq_ip", "ivfpq_l2"} {
		got, err := OpenIndex(filepath.Join(dir, name+".faiss"), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fx := got.(*IVFPQ)
		if fx.Len() != 4000 || fx.NList() != 16 || fx.M() != 8 || fx.NProbe() != 6 {
			t.Fatalf("%s: read %v", name, fx)
		}
		scores, ids, err := fx.Search(q, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		compare(name, scores, ids, want[name])

		// Our encoder, given FAISS's quantizers: the same list and code
		// for (almost) every vector; a nearest-centroid tie decided the
		// other way in float32 may move a few.
		ours := &IVFPQ{d: 32, nlist: 16, metric: fx.metric, nprobe: 6, quantizer: fx.quantizer, pq: fx.pq, lists: make([]pqList, 16)}
		if err := ours.Add(nil, x); err != nil {
			t.Fatal(err)
		}
		type place struct {
			list int
			code string
		}
		at := func(ix *IVFPQ) map[int64]place {
			m := map[int64]place{}
			for l, li := range ix.lists {
				for j, id := range li.ids {
					m[id] = place{l, string(li.codes[j*8 : (j+1)*8])}
				}
			}
			return m
		}
		fp, op := at(fx), at(ours)
		var lists, codes int
		for id, p := range fp {
			if op[id].list == p.list {
				lists++
				if op[id].code == p.code {
					codes++
				}
			}
		}
		t.Logf("%s: our encoder agrees with FAISS on %d/4000 lists and %d/4000 codes", name, lists, codes)
		if lists < 3990 || codes < 3960 {
			t.Errorf("%s: our encoder agrees with FAISS on %d/4000 lists and %d/4000 codes", name, lists, codes)
		}
		got.Close()
	}

	// FAISS reads the IVF-PQ index we train and write.
	ours, err := NewIVFPQ(32, 16, IVFPQOptions{Metric: InnerProduct, M: 8, NProbe: 6, KMeans: KMeansOptions{Seed: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ours.Train(x); err != nil {
		t.Fatal(err)
	}
	ours.Add(nil, x)
	if err := WriteFAISS(ours, filepath.Join(dir, "go_ivfpq.faiss")); err != nil {
		t.Fatal(err)
	}
	if out, err := peer("go_ivfpq.faiss").CombinedOutput(); err != nil {
		t.Fatalf("faiss reading our file: %v\n%s", err, out)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "go_ivfpq.faiss.json"))
	if err != nil {
		t.Fatal(err)
	}
	var w faissTop
	json.Unmarshal(raw, &w)
	scores, ids, _ := ours.Search(q, 10, nil)
	compare("go_ivfpq", scores, ids, w)
}
