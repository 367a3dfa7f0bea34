package search

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// The 10k wiki-18 BM25 folder is built once per test binary (≈1 s).
var shared10k sharedtest.BuiltDir

func TestMain(m *testing.M) { sharedtest.Main(m, &shared10k) }

// bm25Folder10k returns an index folder over the harvested 10k corpus.
func bm25Folder10k(t testing.TB) string {
	t.Helper()
	corpus := sharedtest.Path(t, "data", "corpus", "wiki18_harvested_10k.jsonl")
	return shared10k.Get(t, "cas-bm25-10k-", func(dir string) error {
		_, err := BuildBM25Folder(context.Background(), corpus, dir, DefaultBM25BuildOptions())
		return err
	})
}

// openTestCorpus opens the JSONL corpus at path with its offsets built in a
// temporary folder; it is closed when the test ends.
func openTestCorpus(tb testing.TB, path string) *Corpus {
	tb.Helper()
	c, err := BuildCorpusOffsets(path, filepath.Join(tb.TempDir(), "c.offsets"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// openBM25_10k opens the shared folder as a retriever.
func openBM25_10k(t testing.TB) *BM25Retriever {
	t.Helper()
	r, _, err := OpenRetriever(bm25Folder10k(t), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r.(*BM25Retriever)
}
