package search

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// The 10k wiki-18 BM25 folder is built once per test binary (≈1 s).
var shared10k struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared10k.dir != "" {
		os.RemoveAll(shared10k.dir)
	}
	os.Exit(code)
}

// bm25Folder10k returns an index folder over the harvested 10k corpus.
func bm25Folder10k(t testing.TB) string {
	t.Helper()
	corpus := sharedtest.Path(t, "data", "corpus", "wiki18_harvested_10k.jsonl")
	shared10k.once.Do(func() {
		shared10k.dir, shared10k.err = os.MkdirTemp("", "cas-bm25-10k-")
		if shared10k.err != nil {
			return
		}
		_, shared10k.err = BuildBM25Folder(context.Background(), corpus, shared10k.dir, DefaultBM25BuildOptions())
	})
	if shared10k.err != nil {
		t.Fatalf("build 10k bm25 folder: %v", shared10k.err)
	}
	return shared10k.dir
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
