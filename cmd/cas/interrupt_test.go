package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// TestInterruptibleExitCodes: the first SIGINT/SIGTERM cancels the
// command's context and turns its error into exit status 130/143 with the
// command that continues it; without a signal errors keep status 1.
func TestInterruptibleExitCodes(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		in := newInterruptible(context.Background())
		if err := syscall.Kill(os.Getpid(), tc.sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-in.ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%v did not cancel the context", tc.sig)
		}
		err := in.interrupted(context.Canceled, "the index build", "cas index build --out x")
		in.stop()
		if got := exitCode(err); got != tc.code {
			t.Errorf("%v: exit %d, want %d (%v)", tc.sig, got, tc.code, err)
		}
		if !strings.Contains(err.Error(), "Continue with: cas index build --out x") || !errors.Is(err, err) {
			t.Errorf("%v: %v", tc.sig, err)
		}
	}
	in := newInterruptible(context.Background())
	defer in.stop()
	plain := errors.New("bad flag")
	if err := in.interrupted(plain, "x", "y"); err != plain || exitCode(err) != 1 || exitCode(nil) != 0 {
		t.Errorf("an error without a signal: %v (exit %d)", err, exitCode(err))
	}
	if got := shellJoin([]string{"cas", "demo", "--out", "my runs/x", "it's"}); got != `cas demo --out 'my runs/x' 'it'\''s'` {
		t.Errorf("shellJoin = %s", got)
	}
}

// TestIndexInfoFolders: `cas index info` describes a BM25 index folder
// (kind, passages, the corpus it opens, vocabulary) and says which corpus
// path is missing when it is.
func TestIndexInfoFolders(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.jsonl")
	if err := os.WriteFile(corpus, []byte(`{"id":"1","contents":"\"A\"\nalpha beta"}`+"\n"+`{"id":"2","contents":"\"B\"\ngamma delta"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(dir, "idx")
	if _, stderr, err := runCas(t, "index", "build", "--corpus", corpus, "--bm25", "--out", idx); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var info folderInfo
	stdout, _, err := runCas(t, "index", "info", "--index", idx)
	if err != nil || json.Unmarshal([]byte(stdout), &info) != nil {
		t.Fatalf("index info: %v\n%s", err, stdout)
	}
	if info.Settings.Kind != "bm25" || info.Settings.Docs != 2 || info.Corpus != corpus || info.Terms < 4 || info.Bytes == 0 {
		t.Errorf("info = %+v", info)
	}
	if err := os.Rename(corpus, corpus+".moved"); err != nil {
		t.Fatal(err)
	}
	stdout, _, err = runCas(t, "index", "info", "--index", idx)
	if err != nil || json.Unmarshal([]byte(stdout), &info) != nil || !strings.Contains(info.CorpusError, corpus) ||
		!strings.Contains(info.CorpusError, "--corpus") {
		t.Errorf("info with the corpus gone: %v %+v", err, info)
	}
}

// TestIndexSearchQueryOnBareIndex: --query against a bare FAISS file says
// how to attach a corpus and an encoder, and `index info` describes it.
func TestIndexSearchQueryOnBareIndex(t *testing.T) {
	faiss := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.e5_flat.index")
	_, _, err := runCas(t, "index", "search", "--index", faiss, "--query", "who wrote hamlet")
	if err == nil || !strings.Contains(err.Error(), "bare vector index") || !strings.Contains(err.Error(), "index build --corpus") ||
		!strings.Contains(err.Error(), "--vectors") {
		t.Errorf("--query on a FAISS file: %v", err)
	}
	stdout, _, err := runCas(t, "index", "info", "--index", faiss)
	if err != nil || !strings.Contains(stdout, `"count": 1000`) {
		t.Errorf("index info on a FAISS file: %v\n%s", err, stdout)
	}
}
