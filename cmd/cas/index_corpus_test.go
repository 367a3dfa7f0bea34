package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// TestIndexCorpusBM25 builds a BM25 folder with `cas index build --corpus
// --bm25` and queries it with `cas index search --query`.
func TestIndexCorpusBM25(t *testing.T) {
	corpus := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.jsonl")
	dir := filepath.Join(t.TempDir(), "bm25")
	out, _, err := runCas(t, "index", "build", "--corpus", corpus, "--bm25", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "built a bm25 index of 1000 passages") {
		t.Errorf("build output %q", out)
	}
	out, _, err = runCas(t, "index", "search", "--index", dir, "--query", "Evan Morris lobbyist Genentech", "--query", "Horatio Hale ethnologist of the United States Exploring Expedition", "-k", "3")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d output lines, want 2: %s", len(lines), out)
	}
	for i, want := range []string{"Evan Morris", "Horatio Hale"} {
		var r textSearchResult
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Hits) != 3 || r.Hits[0].Title != want || r.Hits[0].Score < r.Hits[1].Score {
			t.Errorf("query %q: hits %+v", r.Query, r.Hits)
		}
	}
	for _, args := range [][]string{
		{"index", "build", "--corpus", corpus, "--out", dir},
		{"index", "build", "--corpus", corpus, "--bm25", "--encoder", "x", "--out", dir},
		{"index", "build", "--corpus", corpus, "--bm25", "--ivf", "4", "--out", dir},
		{"index", "build", "--corpus", corpus, "--bm25"},
		{"index", "build", "--corpus", filepath.Join(t.TempDir(), "missing.jsonl"), "--bm25", "--out", dir + "2"},
		{"index", "search", "--query", "x"},
		{"index", "search", "--index", dir, "--query", "x", "-k", "0"},
		{"index", "search", "--index", t.TempDir(), "--query", "x"},
	} {
		if _, _, err := runCas(t, args...); err == nil {
			t.Errorf("%q: want an error", args)
		}
	}
}
