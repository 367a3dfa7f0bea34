package search

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTinyCorpus writes a three-passage JSONL corpus.
func writeTinyCorpus(t *testing.T, path string) {
	t.Helper()
	var b strings.Builder
	for i, c := range []string{"Hamlet\nHamlet is a tragedy by William Shakespeare.", "Paris\nParis is the capital of France.", "Go\nGo is a programming language."} {
		line, _ := json.Marshal(map[string]string{"id": string(rune('a' + i)), "contents": c})
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func searchOnce(t *testing.T, dir string, opt OpenOptions) (string, error) {
	t.Helper()
	r, _, err := OpenRetriever(dir, opt)
	if err != nil {
		return "", err
	}
	defer r.Close()
	hits, err := r.Retrieve(context.Background(), []string{"capital of France"}, 1)
	if err != nil {
		return "", err
	}
	return hits[0][0].Doc.ID, nil
}

// TestFolderMovesWithItsCorpus: an index folder built from relative paths
// records its corpus (absolute: outside the folder) and its own files
// (relative); moved with its corpus beside it, or with the corpus given
// explicitly, it keeps working; with the corpus gone, the error names every
// path tried and the --corpus flag. A corpus inside the folder is recorded
// relative and moves with it.
func TestFolderMovesWithItsCorpus(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	writeTinyCorpus(t, filepath.Join("data", "corpus.jsonl"))
	s, err := BuildBM25Folder(context.Background(), "data/corpus.jsonl", "data/idx", DefaultBM25BuildOptions())
	if err != nil {
		t.Fatal(err)
	}
	if s.Corpus != filepath.Join(wd, "data", "corpus.jsonl") || s.Index != BM25File || s.Offsets != OffsetsFile {
		t.Fatalf("recorded paths: corpus %q index %q offsets %q", s.Corpus, s.Index, s.Offsets)
	}
	if id, err := searchOnce(t, "data/idx", OpenOptions{}); err != nil || id != "b" {
		t.Fatalf("search: %q %v", id, err)
	}
	// Folder and corpus move together.
	if err := os.Rename("data", "moved"); err != nil {
		t.Fatal(err)
	}
	if id, err := searchOnce(t, "moved/idx", OpenOptions{}); err != nil || id != "b" {
		t.Fatalf("moved with its corpus beside it: %q %v", id, err)
	}
	// The corpus moves elsewhere: a clear error, then --corpus.
	if err := os.Rename("moved/corpus.jsonl", "elsewhere.jsonl"); err != nil {
		t.Fatal(err)
	}
	_, err = searchOnce(t, "moved/idx", OpenOptions{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(wd, "data", "corpus.jsonl")) ||
		!strings.Contains(err.Error(), filepath.Join("moved", "corpus.jsonl")) || !strings.Contains(err.Error(), "--corpus") {
		t.Fatalf("missing corpus: %v", err)
	}
	if id, err := searchOnce(t, "moved/idx", OpenOptions{Corpus: "elsewhere.jsonl"}); err != nil || id != "b" {
		t.Fatalf("--corpus override: %q %v", id, err)
	}
	// A corpus inside the folder is recorded relative.
	writeTinyCorpus(t, filepath.Join("self", "corpus.jsonl"))
	s, err = BuildBM25Folder(context.Background(), "self/corpus.jsonl", "self", DefaultBM25BuildOptions())
	if err != nil || s.Corpus != "corpus.jsonl" {
		t.Fatalf("corpus inside the folder recorded as %q (%v)", s.Corpus, err)
	}
	if err := os.Rename("self", "self2"); err != nil {
		t.Fatal(err)
	}
	if id, err := searchOnce(t, "self2", OpenOptions{}); err != nil || id != "b" {
		t.Fatalf("self-contained folder moved: %q %v", id, err)
	}
	for _, f := range []string{"self2/" + SettingsFile, "self2/" + BM25File, "self2/" + OffsetsFile} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v (%v), want 0644", f, st.Mode().Perm(), err)
		}
	}
}

// TestFolderSettingsStayInside: settings.json cannot make a loader open a
// file outside its folder, and errors never echo file contents.
func TestFolderSettingsStayInside(t *testing.T) {
	wd := t.TempDir()
	writeTinyCorpus(t, filepath.Join(wd, "corpus.jsonl"))
	dir := filepath.Join(wd, "idx")
	if _, err := BuildBM25Folder(context.Background(), filepath.Join(wd, "corpus.jsonl"), dir, DefaultBM25BuildOptions()); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(wd, "secret")
	if err := os.WriteFile(secret, []byte("TOPSECRET-CONTENTS-0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, SettingsFile))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ field, value, want string }{
		{"index", "../secret", "leaves the folder"},
		{"index", "../../../../../../../../etc/passwd", "leaves the folder"},
		{"index", secret, "must be a path inside"},
		{"offsets", "../secret", "leaves the folder"},
		{"corpus", "../secret", "leaves the folder"},
		{"index", "corpus.offsets", "magic"}, // inside but the wrong file: no contents echoed
	}
	for _, tc := range tests {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		m[tc.field] = tc.value
		raw, _ := json.Marshal(m)
		if err := os.WriteFile(filepath.Join(dir, SettingsFile), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := OpenRetriever(dir, OpenOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: err = %v, want %q", tc.field, tc.value, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "TOPSECRET") || strings.Contains(err.Error(), "CASOFF")) {
			t.Errorf("%s=%q: the error echoes file contents: %v", tc.field, tc.value, err)
		}
	}
}
