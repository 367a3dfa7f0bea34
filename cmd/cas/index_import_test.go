package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/search/vector"
)

// buildCas builds the cas binary into a temporary folder.
func buildCas(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cas")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// casIn runs the binary in dir and returns stdout, stderr and the exit code.
func casIn(t *testing.T, bin, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("cas %q: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

// writeFlatIP writes vectors as a FAISS IndexFlatIP file, byte for byte as
// faiss::write_index does ("IxFI", d, ntotal, two dummies, is_trained,
// metric 0, then the float32 vector of ntotal·d values).
func writeFlatIP(t *testing.T, path string, x []float32, d int) {
	t.Helper()
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("IxFI")
	w(int32(d))
	w(int64(len(x) / d))
	w(int64(1 << 20))
	w(int64(1 << 20))
	w(uint8(1))
	w(int32(0))
	w(uint64(len(x)))
	w(x)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustReadVectors(t *testing.T, path string, d int) []float32 {
	t.Helper()
	x, err := vector.ReadVectorFile(path, d)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

type scoredID struct {
	ID    string
	Score float64
}

// exactTopK is exact inner-product search in float64: the reference that
// FAISS's IndexFlatIP computes (in float32).
func exactTopK(q, x []float32, d, k int, ids []string) [][]scoredID {
	var out [][]scoredID
	for i := 0; i < len(q)/d; i++ {
		all := make([]scoredID, len(x)/d)
		for j := range all {
			var s float64
			for c := 0; c < d; c++ {
				s += float64(q[i*d+c]) * float64(x[j*d+c])
			}
			all[j] = scoredID{ids[j], s}
		}
		sort.SliceStable(all, func(a, b int) bool { return all[a].Score > all[b].Score })
		out = append(out, all[:k])
	}
	return out
}

// checkTopK compares retrieved (id, score) lists with the exact ones: the
// same id at every rank (an exchange is allowed only between scores tied
// within 1e-6) and scores within 1e-5.
func checkTopK(t *testing.T, what string, got [][]scoredID, want [][]scoredID) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d result lists, want %d", what, len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Errorf("%s query %d: %d hits, want %d", what, i, len(got[i]), len(want[i]))
			continue
		}
		for r, w := range want[i] {
			g := got[i][r]
			if math.Abs(g.Score-w.Score) > 1e-5 || (g.ID != w.ID && math.Abs(g.Score-w.Score) > 1e-6) {
				t.Errorf("%s query %d rank %d: %s %.7f, want %s %.7f", what, i, r, g.ID, g.Score, w.ID, w.Score)
			}
		}
	}
}

// TestIndexImportEndToEnd is the README's import workflow through the built
// binary, from a fresh working directory with relative paths: a corpus whose
// ids are not row numbers, its passages embedded with the E5 passage prefix
// into a FAISS IndexFlatIP file, `cas index import`, then text queries
// through `cas index search --query` and `cas serve`'s /retrieve must return
// the exact top-10 (ids and scores) of inner-product search over the file.
func TestIndexImportEndToEnd(t *testing.T) {
	src := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.jsonl")
	encoder := sharedtest.Path(t, "golden", "bert-tiny")
	tok := sharedtest.Path(t, "tokenizers", "bert-base-uncased", "tokenizer.json")
	bin := buildCas(t)
	wd := t.TempDir()

	// A 300-passage corpus with ids "wiki-<7·row+3>".
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var corpus bytes.Buffer
	var ids []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<24)
	for row := 0; row < 300 && sc.Scan(); row++ {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		m["id"] = fmt.Sprintf("wiki-%d", 7*row+3)
		ids = append(ids, m["id"].(string))
		line, _ := json.Marshal(m)
		corpus.Write(append(line, '\n'))
	}
	os.WriteFile(filepath.Join(wd, "wiki.jsonl"), corpus.Bytes(), 0o644)
	queries := []string{"Evan Morris lobbyist for Genentech", "who was the bishop of Aalborg", "Horatio Hale ethnologist", "american football player", "river in Europe", "a 1990s film"}
	var qj bytes.Buffer
	for _, q := range queries {
		b, _ := json.Marshal(q)
		qj.Write(append(b, '\n'))
	}
	os.WriteFile(filepath.Join(wd, "queries.jsonl"), qj.Bytes(), 0o644)

	if _, stderr, code := casIn(t, bin, wd, "embed", "--model", encoder, "--tokenizer", tok, "--in", "wiki.jsonl", "--out", "passages.f32", "--prefix", "passage"); code != 0 {
		t.Fatalf("embed passages: exit %d: %s", code, stderr)
	}
	x := mustReadVectors(t, filepath.Join(wd, "passages.f32"), 64)
	const d = 64
	writeFlatIP(t, filepath.Join(wd, "e5_Flat.index"), x, d)
	if _, stderr, code := casIn(t, bin, wd, "embed", "--model", encoder, "--tokenizer", tok, "--in", "queries.jsonl", "--out", "queries.f32", "--prefix", "query"); code != 0 {
		t.Fatalf("embed queries: exit %d: %s", code, stderr)
	}
	want := exactTopK(mustReadVectors(t, filepath.Join(wd, "queries.f32"), d), x, d, 10, ids)
	if faissTop := faissPythonTopK(t, wd, "e5_Flat.index", "queries.f32", d, 10); faissTop != nil {
		// Where Debian's FAISS is installed, its own search of the file is
		// the reference the exact search must agree with.
		for i := range faissTop {
			for r := range faissTop[i] {
				faissTop[i][r].ID = ids[faissTop[i][r].Row]
			}
		}
		checkTopK(t, "FAISS vs exact", toScored(faissTop), want)
	}

	out, stderr, code := casIn(t, bin, wd, "index", "import", "--faiss", "e5_Flat.index", "--corpus", "wiki.jsonl",
		"--encoder", encoder, "--tokenizer", tok, "--out", "e5")
	if code != 0 || !strings.Contains(out, "imported 300 passages × 64-d vectors") {
		t.Fatalf("import: exit %d: %s %s", code, out, stderr)
	}
	var s struct {
		Dense struct {
			VectorIndex string `json:"vector_index"`
			QueryPrefix string `json:"query_prefix"`
		} `json:"dense"`
	}
	raw, _ = os.ReadFile(filepath.Join(wd, "e5", "settings.json"))
	if err := json.Unmarshal(raw, &s); err != nil || s.Dense.VectorIndex != filepath.Join(wd, "e5_Flat.index") || s.Dense.QueryPrefix != "query: " {
		t.Errorf("settings.json: %s (%v)", raw, err)
	}
	if st, err := os.Stat(filepath.Join(wd, "e5_Flat.index")); err != nil || st.Size() != int64(4*len(x)+45) {
		t.Errorf("FAISS file changed: %v", err)
	}

	// cas index search --query (repeatable).
	args := []string{"index", "search", "--index", "e5", "-k", "10"}
	for _, q := range queries {
		args = append(args, "--query", q)
	}
	out, stderr, code = casIn(t, bin, wd, args...)
	if code != 0 {
		t.Fatalf("index search: exit %d: %s", code, stderr)
	}
	var got [][]scoredID
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r textSearchResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		var hs []scoredID
		for _, h := range r.Hits {
			hs = append(hs, scoredID{h.ID, float64(h.Score)})
		}
		got = append(got, hs)
	}
	checkTopK(t, "index search", got, want)

	// cas serve --index: Search-R1's POST /retrieve.
	srv := exec.Command(bin, "serve", "--index", "e5", "--addr", "127.0.0.1:0")
	srv.Dir = wd
	var srvErr syncBuffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	re := regexp.MustCompile(`on http://(127\.0\.0\.1:\d+)`)
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(srvErr.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("serve did not start: %s", srvErr.String())
	}
	body, _ := json.Marshal(map[string]any{"queries": queries, "topk": 10, "return_scores": true})
	resp, err := http.Post("http://"+addr+"/retrieve", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Result [][]struct {
			Document struct {
				ID       string `json:"id"`
				Contents string `json:"contents"`
			} `json:"document"`
			Score float64 `json:"score"`
		} `json:"result"`
	}
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/retrieve: %d %v", resp.StatusCode, err)
	}
	got = got[:0]
	for _, hs := range res.Result {
		var g []scoredID
		for _, h := range hs {
			g = append(g, scoredID{h.Document.ID, h.Score})
		}
		got = append(got, g)
	}
	checkTopK(t, "serve /retrieve", got, want)
	if len(res.Result) > 0 && len(res.Result[0]) > 0 {
		top := res.Result[0][0].Document
		var row int
		fmt.Sscanf(top.ID, "wiki-%d", &row)
		var m map[string]any
		json.Unmarshal(bytes.Split(corpus.Bytes(), []byte("\n"))[(row-3)/7], &m)
		if m["contents"] != top.Contents {
			t.Errorf("/retrieve: passage %s does not carry its own contents", top.ID)
		}
	}
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v (%s)", err, srvErr.String())
	}

	// Streamed conversions while importing: recall@10 against exact search.
	for _, tc := range []struct {
		flags     []string
		minRecall float64
	}{
		{[]string{"--f16"}, 0.99},
		{[]string{"--sq8"}, 0.95},
		{[]string{"--ivf", "8", "--sq8", "--nprobe", "8"}, 0.95},
		// IVF-PQ: 16 bytes per vector, the 50 best re-scored from the FAISS file.
		{[]string{"--ivf", "4", "--pq", "16", "--rerank", "50", "--nprobe", "4"}, 0.99},
		// IVF-PQ's defaults: nprobe 32 (all 4 lists here) and a re-rank of 500.
		{[]string{"--ivf", "4", "--pq", "16"}, 0.99},
	} {
		out := "conv" + strings.Join(tc.flags, "")
		args := append([]string{"index", "import", "--faiss", "e5_Flat.index", "--corpus", "wiki.jsonl", "--encoder", encoder, "--tokenizer", tok, "--out", out}, tc.flags...)
		stdout, stderr, code := casIn(t, bin, wd, args...)
		if code != 0 || !strings.Contains(stdout, "converted to") {
			t.Fatalf("import %q: exit %d: %s %s", tc.flags, code, stdout, stderr)
		}
		if len(tc.flags) == 4 && !strings.Contains(stdout, "re-ranking 500 from the FAISS file") {
			t.Errorf("import %q: the IVF-PQ default re-rank is not applied: %s", tc.flags, stdout)
		}
		args = []string{"index", "search", "--index", out, "-k", "10"}
		for _, q := range queries {
			args = append(args, "--query", q)
		}
		stdout, stderr, code = casIn(t, bin, wd, args...)
		if code != 0 {
			t.Fatalf("search %q: exit %d: %s", tc.flags, code, stderr)
		}
		hit := 0
		for i, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var r textSearchResult
			json.Unmarshal([]byte(line), &r)
			for _, h := range r.Hits {
				for _, w := range want[i] {
					if h.ID == w.ID {
						hit++
					}
				}
			}
		}
		if r := float64(hit) / float64(10*len(queries)); r < tc.minRecall {
			t.Errorf("import %q: recall@10 %.3f < %.2f", tc.flags, r, tc.minRecall)
		} else {
			t.Logf("import %q: recall@10 %.3f", tc.flags, r)
		}
	}

	// The retriever settings of calibrate (as eval and train) accept the folder.
	qa := sharedtest.Path(t, "data", "qa", "nq_test_1k.jsonl")
	if _, stderr, code := casIn(t, bin, wd, "calibrate", "aps", "--qa", qa, "--index", "e5", "--topk", "5", "--n", "20", "--test", "10", "--no-progress", "--out", "qhat.json"); code != 0 {
		t.Errorf("calibrate aps on the imported folder: exit %d: %s", code, stderr)
	}

	// Refusals: a non-zero exit, a message naming both counts and files, and
	// no folder left behind.
	lines := bytes.SplitAfter(corpus.Bytes(), []byte("\n"))
	os.WriteFile(filepath.Join(wd, "short.jsonl"), bytes.Join(lines[:299], nil), 0o644)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--faiss", "e5_Flat.index", "--corpus", "short.jsonl", "--encoder", encoder, "--tokenizer", tok, "--out", "bad"},
			[]string{"e5_Flat.index holds 300 vectors", "short.jsonl has 299 passages"}},
		{[]string{"--faiss", sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.e5_flat.index"), "--corpus", src, "--encoder", encoder, "--tokenizer", tok, "--out", "bad"},
			[]string{"768-d", "64-d"}},
		{[]string{"--faiss", "e5_Flat.index", "--corpus", "wiki.jsonl", "--encoder", encoder, "--tokenizer", tok, "--out", "e5"},
			[]string{"already an index folder"}},
		{[]string{"--faiss", "e5_Flat.index", "--corpus", "wiki.jsonl", "--encoder", "nowhere", "--out", "bad"},
			[]string{"nowhere"}},
		{[]string{"--corpus", "wiki.jsonl", "--encoder", encoder, "--out", "bad"}, []string{"--faiss"}},
		{[]string{"--faiss", "e5_Flat.index", "--encoder", encoder, "--out", "bad"}, []string{"--corpus"}},
		{[]string{"--faiss", "e5_Flat.index", "--corpus", "wiki.jsonl", "--out", "bad"}, []string{"--encoder"}},
		{[]string{"--faiss", "e5_Flat.index", "--corpus", "wiki.jsonl", "--encoder", encoder}, []string{"--out"}},
		{[]string{"--faiss", "e5_Flat.index", "--corpus", "wiki.jsonl", "--encoder", encoder, "--tokenizer", tok, "--out", "bad", "--f16", "--sq8"}, []string{"exclude"}},
		{[]string{"--faiss", "e5_Flat.index", "--corpus", "wiki.jsonl", "--encoder", encoder, "--tokenizer", tok, "--out", "bad", "--ivf", "301", "--sq8"}, []string{"301 lists for 300 vectors"}},
	} {
		_, stderr, code := casIn(t, bin, wd, append([]string{"index", "import"}, tc.args...)...)
		if code == 0 {
			t.Errorf("import %q: exit 0", tc.args)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("import %q: stderr %q does not name %q", tc.args, stderr, w)
			}
		}
		if _, err := os.Stat(filepath.Join(wd, "bad")); !os.IsNotExist(err) {
			t.Errorf("import %q left a folder behind", tc.args)
		}
	}
}

type faissHit struct {
	Row   int
	ID    string
	Score float64
}

func toScored(in [][]faissHit) [][]scoredID {
	out := make([][]scoredID, len(in))
	for i, hs := range in {
		for _, h := range hs {
			out[i] = append(out[i], scoredID{h.ID, h.Score})
		}
	}
	return out
}

// faissPythonTopK searches a FAISS file with Debian's python3-faiss
// (nil when it is not installed).
func faissPythonTopK(t *testing.T, dir, index, queries string, d, k int) [][]faissHit {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import faiss, numpy").Run(); err != nil {
		t.Log("python3-faiss not installed: FAISS cross-check skipped")
		return nil
	}
	script := `import sys, json, faiss, numpy as np
ix = faiss.read_index(sys.argv[1])
q = np.fromfile(sys.argv[2], dtype="float32").reshape(-1, int(sys.argv[3]))
D, I = ix.search(q, int(sys.argv[4]))
print(json.dumps({"D": D.tolist(), "I": I.tolist()}))`
	cmd := exec.Command(py, "-c", script, index, queries, fmt.Sprint(d), fmt.Sprint(k))
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("faiss: %v", err)
	}
	var r struct {
		D [][]float64
		I [][]int
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	res := make([][]faissHit, len(r.I))
	for i := range r.I {
		for j := range r.I[i] {
			res[i] = append(res[i], faissHit{Row: r.I[i][j], Score: r.D[i][j]})
		}
	}
	return res
}
