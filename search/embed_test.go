package search

import (
	"context"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// hashEncoder embeds a text as 4 floats derived from its FNV hash, and can
// fail after a number of calls (to interrupt a run).
type hashEncoder struct {
	calls     atomic.Int32
	failAfter int32
}

func (e *hashEncoder) Dim() int { return 4 }

func (e *hashEncoder) Encode(_ context.Context, texts []string) ([]float32, error) {
	if n := e.calls.Add(1); e.failAfter > 0 && n > e.failAfter {
		return nil, errors.New("interrupted")
	}
	out := make([]float32, 0, 4*len(texts))
	for _, t := range texts {
		h := fnv.New64a()
		h.Write([]byte(t))
		v := h.Sum64()
		for j := 0; j < 4; j++ {
			out = append(out, float32(uint16(v>>(16*j)))/65535)
		}
	}
	return out, nil
}

// TestEmbedCorpusResume interrupts an embedding run, resumes it, and checks
// that the chunks equal an uninterrupted run's and that finished chunks were
// not recomputed.
func TestEmbedCorpusResume(t *testing.T) {
	c := openTestCorpus(t, sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.jsonl"))
	dir := t.TempDir()
	opt := EmbedOptions{Prefix: E5PassagePrefix, Chunk: 300, Batch: 100, Encoder: "hash"}

	full, err := EmbedCorpus(context.Background(), c, &hashEncoder{}, filepath.Join(dir, "full"), opt)
	if err != nil {
		t.Fatal(err)
	}
	if full.Len() != 1000 || len(full.Files) != 4 || full.Rows[3] != 100 {
		t.Fatalf("chunks %v rows %v", full.Files, full.Rows)
	}

	part := filepath.Join(dir, "part")
	if _, err := EmbedCorpus(context.Background(), c, &hashEncoder{failAfter: 7}, part, opt); err == nil {
		t.Fatal("interrupted run: want an error")
	}
	enc := &hashEncoder{}
	got, err := EmbedCorpus(context.Background(), c, enc, part, opt)
	if err != nil {
		t.Fatal(err)
	}
	if calls := enc.calls.Load(); calls != 4 { // chunks 0 and 1 kept; chunk 2 (3 calls) and 3 (1 call) redone
		t.Errorf("resume made %d encoder calls, want 4", calls)
	}
	for i := range full.Files {
		a, _ := full.Read(i)
		b, err := got.Read(i)
		if err != nil {
			t.Fatal(err)
		}
		for j := range a {
			if a[j] != b[j] {
				t.Fatalf("chunk %d differs at %d after resume", i, j)
			}
		}
	}
	// The first vector is the prefixed first passage's.
	x, _ := full.Read(0)
	d0, _ := c.Doc(0)
	want, _ := (&hashEncoder{}).Encode(context.Background(), []string{E5PassagePrefix + d0.Contents})
	for j := range want {
		if x[j] != want[j] {
			t.Fatalf("row 0 = %v, want %v", x[:4], want)
		}
	}
	opt.Chunk = 500
	if _, err := EmbedCorpus(context.Background(), c, &hashEncoder{}, part, opt); err == nil || !strings.Contains(err.Error(), "another run") {
		t.Errorf("resume with another chunk size: err = %v", err)
	}
	os.Remove(got.Files[0])
	os.WriteFile(got.Files[1], []byte("short"), 0o644)
	if _, err := got.Read(1); err == nil {
		t.Error("truncated chunk: want an error")
	}
}
