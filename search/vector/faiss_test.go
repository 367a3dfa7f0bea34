package vector

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/vectest"
)

// TestFAISSGoldenFlatIP searches Search-R1-style FAISS IndexFlatIP of 1,000
// real E5 passage vectors with 32 queries and compares with FAISS's top-10.
func TestFAISSGoldenFlatIP(t *testing.T) {
	indexPath := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.e5_flat.index")
	queries := sharedtest.Path(t, "golden", "faiss", "queries_32x768.f32")
	golden := vectest.ReadFAISSGolden(t, sharedtest.Path(t, "golden", "faiss", "flat_top10.jsonl"))
	ix, err := OpenIndex(indexPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.Dim() != 768 || ix.Len() != 1000 || ix.Metric() != InnerProduct {
		t.Fatalf("opened d=%d n=%d metric=%v", ix.Dim(), ix.Len(), ix.Metric())
	}
	q, err := ReadVectorFile(queries, 768)
	if err != nil {
		t.Fatal(err)
	}
	if len(golden) != 32 || len(q) != 32*768 {
		t.Fatalf("%d golden rows, %d query values", len(golden), len(q))
	}
	const k = 10
	check := func(name string, scores []float32, ids []int64, first int) {
		t.Helper()
		for i := range len(ids) / k {
			g := golden[first+i]
			for j := range k {
				if ids[i*k+j] != g.IDs[j] {
					t.Fatalf("%s query %d rank %d: id %d, FAISS %d", name, g.Query, j, ids[i*k+j], g.IDs[j])
				}
				if d := math.Abs(float64(scores[i*k+j] - g.Scores[j])); d > 1e-5 {
					t.Fatalf("%s query %d rank %d: score %v, FAISS %v (|Δ| %.2g)", name, g.Query, j, scores[i*k+j], g.Scores[j], d)
				}
			}
		}
	}
	for _, threads := range []int{1, 2} {
		scores, ids, err := ix.Search(q, k, &SearchParams{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		check("batch", scores, ids, 0)
	}
	for i := range 32 {
		scores, ids, err := ix.Search(q[i*768:(i+1)*768], k, nil)
		if err != nil {
			t.Fatal(err)
		}
		check("single", scores, ids, i)
	}
	// The F32 batch screened on AMX-BF16 and rescored exactly
	// (flat_screen.go; forced on, so that it runs without AMX too): FAISS's
	// own top-10 on real E5 vectors, and with few fallbacks.
	f, ok := ix.(*Flat)
	if !ok {
		t.Fatalf("opened %T, want *Flat", ix)
	}
	f.screen = screenOn
	st0 := f.ScreenStats()
	for _, threads := range []int{1, 2} {
		scores, ids, err := f.Search(q, k, &SearchParams{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		check("screened batch", scores, ids, 0)
	}
	st := f.ScreenStats()
	st.Queries -= st0.Queries
	st.Fallbacks -= st0.Fallbacks
	t.Logf("screened: %d of %d queries fell back", st.Fallbacks, st.Queries)
	if st.Queries != 64 || st.Fallbacks > 6 {
		t.Errorf("screened %d queries with %d fallbacks, want 64 with at most 6", st.Queries, st.Fallbacks)
	}
}

func TestWriteFAISSRoundTrip(t *testing.T) {
	d := 12
	q := vectest.LowRank(6, d, 3, 37)
	cases := storeCases(t)
	for _, name := range []string{"flat/ip/f32", "flat/l2/f32", "ivf/ip/f32", "ivf/l2/f32", "flat/ids", "ivfpq/ip"} {
		ix := cases[name]
		p := filepath.Join(t.TempDir(), "x.faiss")
		if err := WriteFAISS(ix, p); err != nil {
			t.Fatal(err)
		}
		back, err := OpenIndex(p, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s1, i1, _ := ix.Search(q, 5, nil)
		s2, i2, err := back.Search(q, 5, nil)
		if err != nil {
			t.Fatal(err)
		}
		vectest.SameResults(t, name, s1, i1, s2, i2)
		back.Close()
	}
	for _, name := range []string{"flat/ip/f16", "ivf/ip/sq8"} {
		if err := WriteFAISS(cases[name], filepath.Join(t.TempDir(), "x")); err == nil {
			t.Errorf("%s written as a FAISS float index", name)
		}
	}
}

// faissSeeds are FAISS-format files written by WriteFAISS, plus the golden
// file's header.
func faissSeeds(t testing.TB) [][]byte {
	cases := fuzzCases(t)
	var out [][]byte
	for _, name := range []string{"flat/ip/f32", "flat/l2/f32", "ivf/ip/f32", "ivf/l2/f32", "flat/ids", "ivfpq/ip"} {
		var buf bytes.Buffer
		if err := writeFAISSIndex(&buf, cases[name]); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	return out
}

func TestDecodeFAISSRejectsTruncation(t *testing.T) {
	for i, b := range faissSeeds(t) {
		if _, err := decodeFAISS(b); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		for n := 0; n < len(b); n += 1 + n/16 {
			if _, err := decodeFAISS(b[:n]); err == nil {
				t.Fatalf("seed %d truncated to %d of %d bytes: no error", i, n, len(b))
			}
		}
		if _, err := decodeFAISS(append(bytes.Clone(b), 0)); err == nil {
			t.Fatalf("seed %d with a trailing byte: no error", i)
		}
	}
	unsupported := []byte("IHNf")
	if _, err := decodeFAISS(unsupported); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("HNSW fourcc: %v", err)
	}
}

func FuzzDecodeFAISS(f *testing.F) {
	for _, b := range faissSeeds(f) {
		f.Add(b)
	}
	q := vectest.LowRank(2, 4, 2, 1)
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := decodeFAISS(b)
		if err != nil {
			return
		}
		if ix.Dim() == 4 {
			ix.Search(q, 3, &SearchParams{NProbe: 2})
		}
	})
}

// TestFAISSPythonCrossCheck has the real FAISS (Debian's python3-faiss)
// write IndexFlatL2, IndexIDMap and IndexIVFFlat files and search them,
// then checks that OpenIndex reads the files and returns FAISS's results,
// and that FAISS reads what WriteFAISS writes. Skipped without faiss.
func TestFAISSPythonCrossCheck(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import faiss, numpy").Run(); err != nil {
		t.Skip("python3 with faiss and numpy not available")
	}
	dir := t.TempDir()
	script := `
import sys, json, numpy as np, faiss
d = sys.argv[1]
rng = np.random.default_rng(3)
x = rng.standard_normal((3000, 24)).astype("float32")
x /= np.linalg.norm(x, axis=1, keepdims=True)
q = x[:40] + 0.1 * rng.standard_normal((40, 24)).astype("float32")
x.tofile(d + "/base.f32"); q.tofile(d + "/query.f32")
out = {}
def run(name, ix, **kw):
    for k, v in kw.items(): setattr(ix, k, v)
    faiss.write_index(ix, d + "/" + name + ".faiss")
    D, I = ix.search(q, 10)
    out[name] = {"scores": D.ravel().tolist(), "ids": I.ravel().tolist()}
f = faiss.IndexFlatL2(24); f.add(x); run("flat_l2", f)
m = faiss.IndexIDMap(faiss.IndexFlatIP(24)); m.add_with_ids(x, np.arange(3000, dtype="int64") * 3 + 1); run("idmap_ip", m)
for metric, name in [(faiss.METRIC_INNER_PRODUCT, "ivf_ip"), (faiss.METRIC_L2, "ivf_l2")]:
    qz = faiss.IndexFlatIP(24) if metric == faiss.METRIC_INNER_PRODUCT else faiss.IndexFlatL2(24)
    ivf = faiss.IndexIVFFlat(qz, 24, 64, metric); ivf.train(x); ivf.add(x); run(name, ivf, nprobe=5)
sp = faiss.IndexIVFFlat(faiss.IndexFlatIP(24), 24, 256, faiss.METRIC_INNER_PRODUCT); sp.train(x); sp.add(x[:60]); run("ivf_sparse", sp, nprobe=7)
json.dump(out, open(d + "/results.json", "w"))
if len(sys.argv) > 2:
    for name in sys.argv[2:]:
        ix = faiss.read_index(d + "/" + name)
        D, I = ix.search(q, 10)
        json.dump({"scores": D.ravel().tolist(), "ids": I.ravel().tolist()}, open(d + "/" + name + ".json", "w"))
`
	if out, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("faiss script: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]struct {
		Scores []float32 `json:"scores"`
		IDs    []int64   `json:"ids"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	q, err := ReadVectorFile(filepath.Join(dir, "query.f32"), 24)
	if err != nil {
		t.Fatal(err)
	}
	nprobe := map[string]int{"ivf_ip": 5, "ivf_l2": 5, "ivf_sparse": 7}
	compare := func(name string, scores []float32, ids []int64, ws []float32, wi []int64) {
		t.Helper()
		for j := range wi {
			if math.Abs(float64(scores[j]-ws[j])) > 1e-4 {
				t.Fatalf("%s result %d: score %v, FAISS %v", name, j, scores[j], ws[j])
			}
			if ids[j] != wi[j] && math.Abs(float64(ws[j]-ws[j^1])) > 1e-5 {
				t.Fatalf("%s result %d: id %d, FAISS %d", name, j, ids[j], wi[j])
			}
		}
	}
	for name, w := range want {
		ix, err := OpenIndex(filepath.Join(dir, name+".faiss"), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		scores, ids, err := ix.Search(q, 10, &SearchParams{NProbe: nprobe[name]})
		if err != nil {
			t.Fatal(err)
		}
		compare(name, scores, ids, w.Scores, w.IDs)
		// The flat indexes again on the AMX-screened F32 path
		// (flat_screen.go), forced on: FAISS's exact top-10.
		if f, ok := ix.(*Flat); ok {
			f.screen = screenOn
			scores, ids, err = f.Search(q, 10, nil)
			if err != nil {
				t.Fatal(err)
			}
			compare(name+" screened", scores, ids, w.Scores, w.IDs)
		}
		ix.Close()
	}

	// FAISS reads what we write.
	x, err := ReadVectorFile(filepath.Join(dir, "base.f32"), 24)
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]Index{}
	f, _ := NewFlat(24, L2, F32)
	f.Add(nil, x)
	ours["go_flat.faiss"] = f
	ivf := buildIVF(t, x, 24, 32, InnerProduct, F32)
	ivf.SetNProbe(4)
	ours["go_ivf.faiss"] = ivf
	args := []string{"-c", script, dir}
	for name, ix := range ours {
		if err := WriteFAISS(ix, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		args = append(args, name)
	}
	if out, err := exec.Command(py, args...).CombinedOutput(); err != nil {
		t.Fatalf("faiss reading our files: %v\n%s", err, out)
	}
	for name, ix := range ours {
		raw, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var w struct {
			Scores []float32 `json:"scores"`
			IDs    []int64   `json:"ids"`
		}
		json.Unmarshal(raw, &w)
		scores, ids, _ := ix.Search(q, 10, nil)
		compare(name, scores, ids, w.Scores, w.IDs)
	}
}
