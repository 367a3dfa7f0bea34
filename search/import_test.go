package search

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/vectest"
	"github.com/cas-engine/cas/search/vector"
)

// renumberCorpus copies the first n passages of a corpus with ids that are
// not row numbers ("wiki-<7·row+3>"), so a retriever that confused rows with
// ids would fail.
func renumberCorpus(t testing.TB, src, dst string, n int) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for row := 0; row < n && sc.Scan(); row++ {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		m["id"] = fmt.Sprintf("wiki-%d", 7*row+3)
		line, _ := json.Marshal(m)
		out.Write(append(line, '\n'))
	}
	if err := os.WriteFile(dst, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestImportFAISSGolden imports the real E5 IndexFlatIP of the 1k wiki-18
// sample with a renumbered corpus and retrieves the 32 golden queries: ids,
// passages and scores must be FAISS's own top-10.
func TestImportFAISSGolden(t *testing.T) {
	corpus := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.jsonl")
	faiss := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.e5_flat.index")
	queries := readF32(t, sharedtest.Path(t, "golden", "faiss", "queries_32x768.f32"))
	golden := vectest.ReadFAISSGolden(t, sharedtest.Path(t, "golden", "faiss", "flat_top10.jsonl"))
	work := t.TempDir()
	renamed := filepath.Join(work, "wiki.jsonl")
	renumberCorpus(t, corpus, renamed, 1000)
	dir := filepath.Join(work, "e5")
	s, err := ImportFAISSFolder(context.Background(), faiss, renamed, dir, ImportOptions{EncoderPath: "/models/e5", EncoderDim: 768})
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != KindDense || s.Docs != 1000 || s.Dense.Dim != 768 || s.Dense.QueryPrefix != E5QueryPrefix ||
		s.Dense.PassagePrefix != E5PassagePrefix || s.Dense.Encoder != "/models/e5" || !filepath.IsAbs(s.Dense.VectorIndex) {
		t.Errorf("settings %+v %+v", s, s.Dense)
	}
	// The FAISS file lies outside the folder: recorded absolute (internal/relpath).
	if abs, _ := filepath.Abs(faiss); s.Dense.VectorIndex != abs {
		t.Errorf("vector_index %q, want %s", s.Dense.VectorIndex, abs)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("folder holds %d entries, want settings.json and corpus.offsets only (the FAISS file stays in place)", len(entries))
	}
	r, _, err := OpenRetriever(dir, OpenOptions{Encoder: tableEncoder{768, queries}, LoadVectors: OpenVectorSearcher})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hits := retrieveGoldenQueries(t, r)
	c, err := OpenCorpus(renamed, filepath.Join(dir, OffsetsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, g := range golden {
		for j, row := range g.IDs {
			h := hits[g.Query][j]
			want, _ := c.Doc(int(row))
			if h.Doc.ID != fmt.Sprintf("wiki-%d", 7*row+3) || h.Doc.Contents != want.Contents || math.Abs(float64(h.Score-g.Scores[j])) > 1e-5 {
				t.Errorf("query %d rank %d: %s %v, want row %d (wiki-%d) %v", g.Query, j, h.Doc.ID, h.Score, row, 7*row+3, g.Scores[j])
			}
		}
	}
}

// TestImportFAISSErrors checks each refusal: the error names what is wrong,
// and the output folder is left as it was (absent, or without settings).
func TestImportFAISSErrors(t *testing.T) {
	corpus := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.jsonl")
	faiss := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.e5_flat.index")
	work := t.TempDir()
	short := filepath.Join(work, "short.jsonl")
	renumberCorpus(t, corpus, short, 999)
	bad := filepath.Join(work, "bad.jsonl")
	raw, _ := os.ReadFile(short)
	os.WriteFile(bad, append(raw, "{\"id\": 1}\n"...), 0o644)
	l2 := filepath.Join(work, "l2.index")
	f, _ := vector.NewFlat(4, vector.L2, vector.F32)
	f.Add(nil, vectest.LowRank(1000, 4, 2, 1))
	if err := vector.WriteFAISS(f, l2); err != nil {
		t.Fatal(err)
	}
	ip := filepath.Join(work, "ip.index")
	g, _ := vector.NewFlat(4, vector.InnerProduct, vector.F32)
	g.Add([]int64{0, 5}, vectest.LowRank(2, 4, 2, 1))
	if err := vector.WriteFAISS(g, ip); err != nil {
		t.Fatal(err)
	}
	existing := t.TempDir()
	os.WriteFile(filepath.Join(existing, SettingsFile), []byte("{}"), 0o644)
	for _, tc := range []struct {
		name, faiss, corpus, out string
		dim                      int
		want                     []string
	}{
		{"count mismatch", faiss, short, filepath.Join(work, "a"), 0, []string{"1000 vectors", "999 passages", faiss, short}},
		{"dimension", faiss, corpus, filepath.Join(work, "b"), 64, []string{"768-d", "64-d"}},
		{"l2", l2, corpus, filepath.Join(work, "c"), 0, []string{"inner-product"}},
		{"ids outside rows", ip, corpus, filepath.Join(work, "d"), 0, []string{"vector id 5"}},
		{"bad corpus line", faiss, bad, filepath.Join(work, "e"), 0, []string{bad + ":1000", "contents"}},
		{"missing faiss", filepath.Join(work, "none.index"), corpus, filepath.Join(work, "f"), 0, []string{"none.index"}},
		{"folder as faiss", work, corpus, filepath.Join(work, "g"), 0, []string{"is a folder"}},
		{"not faiss", corpus, corpus, filepath.Join(work, "h"), 0, []string{"neither"}},
		{"existing folder", faiss, corpus, existing, 0, []string{"already an index folder"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ImportFAISSFolder(context.Background(), tc.faiss, tc.corpus, tc.out, ImportOptions{EncoderDim: tc.dim})
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if tc.out != existing {
				if _, err := os.Stat(tc.out); !os.IsNotExist(err) {
					t.Errorf("%s left behind (%v)", tc.out, err)
				}
			}
		})
	}
	// A folder with other files is refused and left as it was.
	busy := t.TempDir()
	os.WriteFile(filepath.Join(busy, OffsetsFile), []byte("mine"), 0o644)
	if _, err := ImportFAISSFolder(context.Background(), faiss, corpus, busy, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("non-empty folder: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(busy, OffsetsFile)); string(b) != "mine" {
		t.Error("non-empty folder: a file was changed")
	}
	// A pre-existing empty folder stays, empty.
	empty := t.TempDir()
	if _, err := ImportFAISSFolder(context.Background(), faiss, short, empty, ImportOptions{}); err == nil {
		t.Fatal("count mismatch into an existing folder: want an error")
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("existing folder holds %d entries after a failed import", len(entries))
	}
}

// fuzzPaths numbers a fuzz target's runs in work: each call writes the
// run's input to work/<name with the number> and names the output folder
// work/out<number>; both are removed when t ends.
func fuzzPaths(work, name string) func(t *testing.T, input []byte) (path, out string) {
	n := 0
	return func(t *testing.T, input []byte) (string, string) {
		n++
		path := filepath.Join(work, fmt.Sprintf(name, n))
		if err := os.WriteFile(path, input, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(work, fmt.Sprintf("out%d", n))
		t.Cleanup(func() { os.Remove(path); os.RemoveAll(out) })
		return path, out
	}
}

// FuzzImportCorpusAlignment imports a 3-vector IndexFlatIP with an arbitrary
// corpus: it succeeds exactly when the corpus parses into 3 passages, and a
// failure leaves no folder.
func FuzzImportCorpusAlignment(f *testing.F) {
	for _, s := range []string{
		"{\"id\":\"a\",\"contents\":\"x\"}\n{\"id\":\"b\",\"contents\":\"y\"}\n{\"id\":\"c\",\"contents\":\"z\"}\n",
		"{\"id\":\"a\",\"contents\":\"x\"}\n\n{\"id\":\"b\",\"contents\":\"y\"}\n{\"id\":7,\"contents\":\"z\"}",
		"{\"id\":\"a\",\"contents\":\"x\"}\n{\"id\":\"b\",\"contents\":\"y\"}\n",
		"{\"id\":\"a\",\"contents\":\"x\"}\n{\"id\":\"b\"}\n{\"id\":\"c\",\"contents\":\"z\"}\n",
		"", "\n\n\n", "{", "[1,2,3]\n",
	} {
		f.Add([]byte(s))
	}
	work := f.TempDir()
	ix := filepath.Join(work, "three.index")
	flat, _ := vector.NewFlat(4, vector.InnerProduct, vector.F32)
	flat.Add(nil, vectest.LowRank(3, 4, 2, 1))
	if err := vector.WriteFAISS(flat, ix); err != nil {
		f.Fatal(err)
	}
	next := fuzzPaths(work, "c%d.jsonl")
	f.Fuzz(func(t *testing.T, corpus []byte) {
		path, out := next(t, corpus)
		var passages int
		parsed := true
		scanJSONLines(bytes.NewReader(corpus), func(_ int, _ uint64, line []byte) error {
			if _, err := ParseDocLine(line); err != nil {
				parsed = false
			}
			passages++
			return nil
		})
		s, err := ImportFAISSFolder(context.Background(), ix, path, out, ImportOptions{})
		if ok := parsed && passages == 3; ok != (err == nil) {
			t.Fatalf("corpus %q (%d passages, parsed %v): import error %v", corpus, passages, parsed, err)
		}
		if err != nil {
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Fatalf("failed import left %s", out)
			}
			return
		}
		if s.Docs != 3 {
			t.Fatalf("docs %d", s.Docs)
		}
		r, _, err := OpenRetriever(out, OpenOptions{Encoder: tableEncoder{4, vectest.LowRank(1, 4, 2, 2)}, LoadVectors: OpenVectorSearcher})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		hits, err := r.Retrieve(context.Background(), []string{"q0"}, 3)
		if err != nil || len(hits[0]) != 3 {
			t.Fatalf("retrieve: %v %v", hits, err)
		}
	})
}

// writeTestCorpus writes n one-line passages with ids "d<row>".
func writeTestCorpus(t testing.TB, path string, n int) {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":\"d%d\",\"contents\":\"\\\"T%d\\\"\\npassage %d\"}\n", i, i, i)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func unitRows(x []float32, d int) []float32 {
	for i := 0; i < len(x); i += d {
		var s float64
		for _, v := range x[i : i+d] {
			s += float64(v) * float64(v)
		}
		for j := i; j < i+d; j++ {
			x[j] /= float32(math.Sqrt(s))
		}
	}
	return x
}

// TestImportConvert imports a FAISS IndexFlatIP with each streamed
// conversion (vector.Convert, whose results are tested in search/vector):
// the folder records dir/vectors, the converted index has the asked
// encoding, lists and nprobe and retrieves through the folder, and a failed
// or interrupted conversion leaves nothing.
func TestImportConvert(t *testing.T) {
	const n, d = 3000, 16
	work := t.TempDir()
	exact, _ := vector.NewFlat(d, vector.InnerProduct, vector.F32)
	exact.Add(nil, vectest.LowRank(n, d, 4, 7))
	faissPath := filepath.Join(work, "flat.index")
	if err := vector.WriteFAISS(exact, faissPath); err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(work, "c.jsonl")
	writeTestCorpus(t, corpus, n)
	km := vector.KMeansOptions{Iterations: 4, Seed: 5, Threads: 2}
	for _, tc := range []struct {
		name       string
		enc        vector.Encoding
		nlist, pq  int
		rerank     int
		wantEncode string
	}{{"f16", vector.F16, 0, 0, 0, "f16"}, {"sq8", vector.SQ8, 0, 0, 0, "sq8"}, {"ivf16-sq8", vector.SQ8, 16, 0, 0, "sq8"},
		{"ivf16-pq4", vector.F32, 16, 4, 20, "pq8"}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(work, tc.name)
			s, err := ImportFAISSFolder(context.Background(), faissPath, corpus, dir, ImportOptions{
				Encoding: tc.enc, NList: tc.nlist, NProbe: 3, KMeans: km, Chunk: 999, TrainSize: 1000, PQ: tc.pq, Rerank: tc.rerank})
			if err != nil {
				t.Fatal(err)
			}
			if s.Dense.VectorIndex != VectorsDir || s.Docs != n {
				t.Errorf("settings %+v", s.Dense)
			}
			got, err := vector.OpenIndex(filepath.Join(dir, VectorsDir), nil)
			if err != nil {
				t.Fatal(err)
			}
			info := vector.Describe(got)
			got.Close()
			if info.Count != n || info.Encoding != tc.wantEncode || info.NList != tc.nlist || (tc.nlist > 0 && info.NProbe != 3) ||
				info.PQM != tc.pq || info.Rerank != tc.rerank || (tc.rerank > 0) != (info.Refine == faissPath) {
				t.Errorf("converted index %+v", info)
			}
			// Passage 5's own vector as the query finds passage 5.
			row := make([]float32, d)
			exact.Reconstruct(5, row)
			r, _, err := OpenRetriever(dir, OpenOptions{Encoder: tableEncoder{d, row}, LoadVectors: OpenVectorSearcher})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			hits, err := r.Retrieve(context.Background(), []string{"q0"}, 3)
			if err != nil || len(hits[0]) != 3 || hits[0][0].Doc.ID != "d5" {
				t.Fatalf("retrieve: %v %v", hits, err)
			}
		})
	}
	// IVF-PQ flags that do not fit together are refused before anything is
	// written.
	for _, c := range []struct {
		opt  ImportOptions
		want string
	}{
		{ImportOptions{PQ: 4}, "--pq needs --ivf"},
		{ImportOptions{NList: 4, PQ: 4, Encoding: vector.SQ8}, "drop --f16/--sq8"},
		{ImportOptions{Rerank: 10}, "--rerank re-ranks IVF-PQ"},
		{ImportOptions{NList: 4, PQ: 5}, "must divide the dimension 16"},
	} {
		out := filepath.Join(work, "refused")
		if _, err := ImportFAISSFolder(context.Background(), faissPath, corpus, out, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.opt, err, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%+v: left %s", c.opt, out)
		}
	}
	// A converted import that fails (here: more lists than vectors) leaves
	// nothing; so does an interrupted one.
	for _, opt := range []ImportOptions{{Encoding: vector.SQ8, NList: n + 1}, {Encoding: vector.F16}} {
		ctx, cancel := context.WithCancel(context.Background())
		if opt.Encoding == vector.F16 {
			cancel()
		}
		out := filepath.Join(work, "failed")
		_, err := ImportFAISSFolder(ctx, faissPath, corpus, out, opt)
		cancel()
		if err == nil {
			t.Fatalf("%+v: want an error", opt)
		}
		if opt.Encoding == vector.F16 && !strings.Contains(err.Error(), "rerun") {
			t.Errorf("interrupted: %v", err)
		}
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Errorf("%+v: %s left behind", opt, out)
		}
	}
}

// importSeeds are FAISS files of 12 vectors of d 4 written by
// vector.WriteFAISS: IndexFlatIP, IndexFlatL2, an IndexIVFFlat of 3 lists
// and an IndexIDMap-wrapped flat whose ids are not rows.
func importSeeds(t testing.TB) [][]byte {
	x := vectest.LowRank(12, 4, 2, 41)
	dir := t.TempDir()
	var out [][]byte
	for i, mk := range []func() (vector.Index, []int64, error){
		func() (vector.Index, []int64, error) {
			f, err := vector.NewFlat(4, vector.InnerProduct, vector.F32)
			return f, nil, err
		},
		func() (vector.Index, []int64, error) {
			f, err := vector.NewFlat(4, vector.L2, vector.F32)
			return f, nil, err
		},
		func() (vector.Index, []int64, error) {
			f, err := vector.NewIVF(4, 3, vector.IVFOptions{KMeans: vector.KMeansOptions{Iterations: 2, Seed: 1}})
			return f, nil, err
		},
		func() (vector.Index, []int64, error) {
			f, err := vector.NewFlat(4, vector.InnerProduct, vector.F32)
			return f, []int64{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, err
		},
	} {
		ix, ids, err := mk()
		if err == nil {
			err = ix.Train(x)
		}
		if err == nil {
			err = ix.Add(ids, x)
		}
		path := filepath.Join(dir, fmt.Sprintf("seed%d.index", i))
		if err == nil {
			err = vector.WriteFAISS(ix, path)
		}
		b, rerr := os.ReadFile(path)
		if err != nil || rerr != nil {
			t.Fatal(err, rerr)
		}
		out = append(out, b)
	}
	return out
}

// FuzzImportFAISSFile imports arbitrary FAISS bytes (seeded with FAISS
// flat, IVF and IndexIDMap files of 12 vectors) with a 12-passage corpus,
// in place or converted: never a panic; a failure leaves no folder; a
// success opens and retrieves.
func FuzzImportFAISSFile(f *testing.F) {
	for _, b := range importSeeds(f) {
		for mode := range byte(4) {
			f.Add(b, mode)
		}
	}
	work := f.TempDir()
	corpus := filepath.Join(work, "c.jsonl")
	writeTestCorpus(f, corpus, 12)
	next := fuzzPaths(work, "f%d.index")
	f.Fuzz(func(t *testing.T, b []byte, mode byte) {
		path, out := next(t, b)
		opt := ImportOptions{Chunk: 5, KMeans: vector.KMeansOptions{Iterations: 2, Seed: 1}}
		switch mode % 4 {
		case 1:
			opt.Encoding = vector.F16
		case 2:
			opt.Encoding = vector.SQ8
		case 3:
			opt.Encoding, opt.NList = vector.SQ8, 2
		}
		_, err := ImportFAISSFolder(context.Background(), path, corpus, out, opt)
		if err != nil {
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Fatalf("failed import (%v) left %s", err, out)
			}
			return
		}
		s, err := ReadFolderSettings(out)
		if err != nil {
			t.Fatal(err)
		}
		dim := s.Dense.Dim
		r, _, err := OpenRetriever(out, OpenOptions{Encoder: tableEncoder{dim, vectest.LowRank(1, dim, 1, 2)}, LoadVectors: OpenVectorSearcher})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := r.Retrieve(context.Background(), []string{"q0"}, 3); err != nil {
			t.Fatal(err)
		}
	})
}
