package search

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

func TestLengthEncoding(t *testing.T) {
	tests := []struct {
		n       uint32
		encoded byte
		decoded uint32
	}{
		{0, 0, 0}, {1, 1, 1}, {23, 23, 23}, {24, 24, 24}, {31, 31, 31}, {32, 32, 32},
		{40, 40, 40}, {41, 40, 40}, {42, 41, 42}, {100, 57, 96}, {1000, 87, 984},
		{math.MaxInt32, 255, 2013265944}, {math.MaxUint32, 255, 2013265944},
	}
	for _, tc := range tests {
		if got := EncodeLength(tc.n); got != tc.encoded {
			t.Errorf("EncodeLength(%d) = %d, want %d", tc.n, got, tc.encoded)
		}
		if got := DecodeLength(tc.encoded); got != tc.decoded {
			t.Errorf("DecodeLength(%d) = %d, want %d", tc.encoded, got, tc.decoded)
		}
	}
	prev := byte(0)
	for n := uint32(0); n < 1<<20; n++ {
		b := EncodeLength(n)
		if b < prev || DecodeLength(b) > n {
			t.Fatalf("length %d: encoding %d not monotone or decodes above n (%d)", n, b, DecodeLength(b))
		}
		prev = b
	}
}

// buildSmall indexes texts with the default analyzer.
func buildSmall(t testing.TB, texts ...string) *BM25Index {
	t.Helper()
	a, err := NewAnalyzer(DefaultAnalyzerSettings())
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBM25Builder(a, DefaultBM25Params())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range texts {
		b.AddText(s)
	}
	return b.Finish()
}

// TestBM25HandComputed checks exact scores on a three-document collection:
//
//	d0 "the quick brown fox"    → quick brown fox        (dl 3)
//	d1 "quick quick dog"        → quick quick dog        (dl 3)
//	d2 "lazy brown dogs sleep"  → lazi brown dog sleep   (dl 4)
//	d3 "the and of"             → (no terms: not counted in N or avgdl)
//
// N = 3, avgdl = 10/3, idf(quick) = idf(dog) = ln(1 + 1.5/2.5) = ln 1.6, and
// score = idf · tf / (tf + 0.9 · (0.6 + 0.4 · dl / avgdl)):
//
//	d1 = idf·2/(2+0.864) + idf·1/(1+0.864) = 0.580362694659299
//	d0 = idf·1/(1+0.864)                   = 0.2521478697670256
//	d2 = idf·1/(1+0.972)                   = 0.23833855438424728
func TestBM25HandComputed(t *testing.T) {
	ix := buildSmall(t, "the quick brown fox", "quick quick dog", "lazy brown dogs sleep", "the and of")
	if ix.Len() != 4 || ix.docCount != 3 || ix.sumTTF != 10 {
		t.Fatalf("Len %d docCount %d sumTTF %d, want 4 3 10", ix.Len(), ix.docCount, ix.sumTTF)
	}
	if got, want := ix.AvgDocLength(), float32(10.0/3); got != want {
		t.Errorf("avgdl = %v, want %v", got, want)
	}
	if got, want := BM25IDF(2, 3), float32(math.Log(1.6)); got != want {
		t.Errorf("idf = %v, want %v", got, want)
	}
	if ix.DocFreq("quick") != 2 || ix.DocFreq("dog") != 2 || ix.DocFreq("lazi") != 1 || ix.DocFreq("the") != 0 {
		t.Errorf("doc freqs quick %d dog %d lazi %d the %d", ix.DocFreq("quick"), ix.DocFreq("dog"), ix.DocFreq("lazi"), ix.DocFreq("the"))
	}
	tests := []struct {
		query string
		k     int
		want  []RowScore
	}{
		{"quick dog", 10, []RowScore{{1, 0.580362694659299}, {0, 0.2521478697670256}, {2, 0.23833855438424728}}},
		{"Quick DOGS!", 1, []RowScore{{1, 0.580362694659299}}},
		// A repeated query term is one clause boosted by its count.
		{"quick quick", 10, []RowScore{{1, 2 * 0.4700036292457356 * 2 / 2.864}, {0, 2 * 0.2521478697670256}}},
		{"unicorn", 10, nil},
		{"the of", 10, nil},
	}
	for _, tc := range tests {
		got := ix.Search(tc.query, tc.k)
		if len(got) != len(tc.want) {
			t.Errorf("Search(%q) = %v, want %v", tc.query, got, tc.want)
			continue
		}
		for i := range got {
			if got[i].Row != tc.want[i].Row || math.Abs(float64(got[i].Score)-float64(tc.want[i].Score)) > 1e-6 {
				t.Errorf("Search(%q)[%d] = %+v, want %+v", tc.query, i, got[i], tc.want[i])
			}
		}
	}
}

// TestBM25Ties: equal scores rank by row, as Lucene's collector does.
func TestBM25Ties(t *testing.T) {
	ix := buildSmall(t, "alpha beta", "gamma", "alpha beta", "alpha beta")
	got := ix.Search("alpha", 2)
	if len(got) != 2 || got[0].Row != 0 || got[1].Row != 2 || got[0].Score != got[1].Score {
		t.Errorf("ties: got %v, want rows 0, 2 with equal scores", got)
	}
}

func TestBM25SaveLoad(t *testing.T) {
	path := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.jsonl")
	dir := t.TempDir()
	s, err := BuildBM25Folder(context.Background(), path, dir, DefaultBM25BuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	if s.Docs != 1000 || s.Kind != KindBM25 || *s.BM25 != DefaultBM25Params() || *s.Analyzer != DefaultAnalyzerSettings() {
		t.Errorf("settings %+v", s)
	}
	got, err := ReadFolderSettings(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Corpus != s.Corpus || got.Docs != s.Docs || got.Index != BM25File {
		t.Errorf("settings round trip: %+v vs %+v", got, s)
	}
	ix, err := LoadBM25(filepath.Join(dir, BM25File))
	if err != nil {
		t.Fatal(err)
	}
	// Rebuild in memory and compare every section and a search.
	c, err := OpenCorpus(path, filepath.Join(dir, OffsetsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, _ := NewAnalyzer(DefaultAnalyzerSettings())
	mem, err := BuildBM25(context.Background(), c, a, DefaultBM25Params(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ix.numDocs != mem.numDocs || ix.docCount != mem.docCount || ix.sumTTF != mem.sumTTF || ix.numTerms != mem.numTerms || ix.avgdl != mem.avgdl || ix.cache != mem.cache {
		t.Fatalf("loaded header differs from the built one")
	}
	for name, pair := range map[string][2][]byte{
		"norms": {ix.norms, mem.norms}, "termOff": {ix.termOff, mem.termOff}, "terms": {ix.termBytes, mem.termBytes},
		"df": {ix.df, mem.df}, "postOff": {ix.postOff, mem.postOff}, "postings": {ix.postings, mem.postings},
	} {
		if !bytes.Equal(pair[0], pair[1]) {
			t.Errorf("section %s differs after save/load", name)
		}
	}
	var b1, b2 bytes.Buffer
	ix.WriteTo(&b1)
	mem.WriteTo(&b2)
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Error("re-serialised bytes differ (build with 1 worker vs GOMAXPROCS must agree)")
	}
	for _, q := range []string{"Evan Morris lobbyist Genentech", "Horatio Hale ethnologist", "Portuguese fort Habsburg"} {
		r1, r2 := ix.Search(q, 10), mem.Search(q, 10)
		if !slices.Equal(r1, r2) || len(r1) == 0 {
			t.Errorf("Search(%q): loaded %v, built %v", q, r1, r2)
		}
	}
}

func TestBM25Corrupt(t *testing.T) {
	ix := buildSmall(t, "the quick brown fox", "quick quick dog")
	var buf bytes.Buffer
	if _, err := ix.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	if _, err := DecodeBM25(good); err != nil {
		t.Fatalf("valid index: %v", err)
	}
	flip := slices.Clone(good)
	flip[len(flip)/2] ^= 0x40
	cases := map[string][]byte{
		"empty": nil, "magic": append([]byte("XXXXXXXX"), good[8:]...), "flip": flip, "truncated": good[:len(good)-9],
	}
	for name, b := range cases {
		if _, err := DecodeBM25(b); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	if _, err := LoadBM25(filepath.Join(t.TempDir(), "missing.idx")); err == nil {
		t.Error("missing file: want an error")
	}
}

func FuzzDecodeBM25(f *testing.F) {
	ix := buildSmall(f, "the quick brown fox", "quick quick dog", "")
	var buf bytes.Buffer
	ix.WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(bm25Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := DecodeBM25(b)
		if err != nil {
			return
		}
		ix.Search("quick fox dog", 5) // a decoded index must be searchable
	})
}

// TestBM25RealCorpus: over the 10k wiki-18 passages, the passage that
// answers an NQ question ranks high, and batch search equals serial search.
func TestBM25RealCorpus(t *testing.T) {
	r := openBM25_10k(t)
	ix := r.Index()
	hits, err := r.Retrieve(context.Background(), []string{"who played bat masterson in the movie tombstone"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits[0]) != 3 || hits[0][0].Doc.Title != "Mason Alan Dinehart" {
		t.Errorf("top hit %+v, want the Mason Alan Dinehart passage", hits[0][0].Doc.Title)
	}
	// Answer recall@5 over the first 300 NQ test questions.
	qa := readQA(t, sharedtest.Path(t, "data", "qa", "nq_test_1k.jsonl"), 300)
	queries := make([]string, len(qa))
	for i, q := range qa {
		queries[i] = q.Question
	}
	res, err := r.Retrieve(context.Background(), queries, 5)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for i, hs := range res {
		if answerIn(hs, qa[i].Answers) {
			found++
		}
	}
	recall := float64(found) / float64(len(qa))
	t.Logf("NQ answer recall@5 over the 10k corpus: %.3f (%d/%d)", recall, found, len(qa))
	if recall < 0.5 {
		t.Errorf("answer recall@5 = %.3f, want ≥ 0.5", recall)
	}
	batch, err := ix.SearchBatch(context.Background(), queries, 20)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range queries {
		if !slices.Equal(batch[i], ix.Search(q, 20)) {
			t.Fatalf("batch result %d differs from serial", i)
		}
	}
}

type testQA struct {
	Question string   `json:"question"`
	Answers  []string `json:"golden_answers"`
}

func readQA(t testing.TB, path string, n int) []testQA {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []testQA
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var q testQA
		if err := json.Unmarshal([]byte(line), &q); err != nil {
			t.Fatal(err)
		}
		out = append(out, q)
		if len(out) == n {
			break
		}
	}
	return out
}

func answerIn(hits []Hit, answers []string) bool {
	for _, h := range hits {
		c := strings.ToLower(h.Doc.Contents)
		for _, a := range answers {
			if a != "" && strings.Contains(c, strings.ToLower(a)) {
				return true
			}
		}
	}
	return false
}

func BenchmarkBM25Search(b *testing.B) {
	r := openBM25_10k(b)
	ix := r.Index()
	qa := readQA(b, sharedtest.Path(b, "data", "qa", "nq_test_1k.jsonl"), 1000)
	i := 0
	for b.Loop() {
		ix.Search(qa[i%len(qa)].Question, 20)
		i++
	}
}

func BenchmarkBM25SearchBatch(b *testing.B) {
	r := openBM25_10k(b)
	ix := r.Index()
	qa := readQA(b, sharedtest.Path(b, "data", "qa", "nq_test_1k.jsonl"), 1000)
	queries := make([]string, len(qa))
	for i, q := range qa {
		queries[i] = q.Question
	}
	for b.Loop() {
		if _, err := ix.SearchBatch(context.Background(), queries, 20); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(queries))/b.Elapsed().Seconds(), "queries/s")
}

func BenchmarkBM25Build1k(b *testing.B) {
	c := openTestCorpus(b, sharedtest.Path(b, "data", "corpus", "wiki18_sample_1k.jsonl"))
	a, _ := NewAnalyzer(DefaultAnalyzerSettings())
	b.SetBytes(int64(c.offsets[c.Len()]))
	for b.Loop() {
		if _, err := BuildBM25(context.Background(), c, a, DefaultBM25Params(), 0, nil); err != nil {
			b.Fatal(err)
		}
	}
}
