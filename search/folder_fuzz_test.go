package search

import (
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/testfile"
)

// FuzzReadFolderSettings: any settings.json is accepted only with a known
// kind and the files that kind needs, or rejected with an error naming the
// file; never a panic.
func FuzzReadFolderSettings(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"kind":"bm25","corpus":"/c.jsonl","offsets":"offsets.bin","docs":3,"analyzer":{},"bm25":{"k1":0.9,"b":0.4},"index":"bm25.idx"}`,
		`{"version":1,"kind":"dense","corpus":"c.jsonl","offsets":"o","dense":{"vector_index":"v","dim":8}}`,
		`{"version":1,"kind":"dense","corpus":"c.jsonl","offsets":"o","dense":null}`,
		`{"version":2}`, `{"version":1,"kind":"x","corpus":"c","offsets":"o"}`, `[]`, `{"version":1e400}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		testfile.Write(t, dir, SettingsFile, b)
		s, err := ReadFolderSettings(dir)
		if err != nil {
			if !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q does not name the folder", err)
			}
			if len(b) > 16 && strings.Contains(err.Error(), string(b)) {
				t.Fatalf("error echoes the file's contents: %q", err)
			}
			return
		}
		switch {
		case s.Corpus == "" || s.Offsets == "":
			t.Fatalf("accepted settings without corpus or offsets: %+v", s)
		case s.Kind == KindBM25 && (s.Analyzer == nil || s.BM25 == nil || s.Index == ""):
			t.Fatalf("accepted bm25 settings without analyzer, bm25 or index: %+v", s)
		case s.Kind == KindDense && (s.Dense == nil || s.Dense.VectorIndex == ""):
			t.Fatalf("accepted dense settings without a vector index: %+v", s)
		case s.Kind != KindBM25 && s.Kind != KindDense:
			t.Fatalf("accepted kind %q", s.Kind)
		}
	})
}
