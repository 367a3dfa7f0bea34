package search

import (
	"context"
	"encoding/binary"
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

// tableEncoder returns stored vectors: the text "<prefix>q<i>" embeds to row i.
type tableEncoder struct {
	d    int
	rows []float32
}

func (e tableEncoder) Dim() int { return e.d }

func (e tableEncoder) Encode(_ context.Context, texts []string) ([]float32, error) {
	out := make([]float32, 0, len(texts)*e.d)
	for _, t := range texts {
		var i int
		if _, err := fmt.Sscanf(t[strings.LastIndex(t, "q"):], "q%d", &i); err != nil || i < 0 || i >= len(e.rows)/e.d {
			return nil, fmt.Errorf("no vector for %q", t)
		}
		out = append(out, e.rows[i*e.d:(i+1)*e.d]...)
	}
	return out, nil
}

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, len(raw)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return x
}

// retrieveGoldenQueries retrieves the top-10 of the 32 golden queries
// ("q0" … "q31", which tableEncoder embeds to the golden query vectors).
func retrieveGoldenQueries(t *testing.T, r Retriever) [][]Hit {
	t.Helper()
	names := make([]string, 32)
	for i := range names {
		names[i] = fmt.Sprintf("q%d", i)
	}
	hits, err := r.Retrieve(context.Background(), names, 10)
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// TestDenseRetrieverFAISSGolden runs the dense retriever over FAISS's own
// IndexFlatIP of the 1k sample's e5-base-v2 embeddings with the golden query
// vectors: ids, passages and scores must be FAISS's.
func TestDenseRetrieverFAISSGolden(t *testing.T) {
	corpus := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.jsonl")
	faiss := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.e5_flat.index")
	queries := readF32(t, sharedtest.Path(t, "golden", "faiss", "queries_32x768.f32"))
	golden := sharedtest.Path(t, "golden", "faiss", "flat_top10.jsonl")
	c, err := BuildCorpusOffsets(corpus, filepath.Join(t.TempDir(), "c.offsets"), nil)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := OpenVectorSearcher(faiss)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewDenseRetriever(tableEncoder{768, queries}, vs, c, E5QueryPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hits := retrieveGoldenQueries(t, r)
	gold := vectest.ReadFAISSGolden(t, golden)
	for _, g := range gold {
		for j, id := range g.IDs {
			h := hits[g.Query][j]
			if h.Doc.ID != fmt.Sprint(id) || math.Abs(float64(h.Score)-float64(g.Scores[j])) > 1e-5 {
				t.Errorf("query %d rank %d: id %s score %v, want %d %v", g.Query, j, h.Doc.ID, h.Score, id, g.Scores[j])
			}
			if d, _ := c.Doc(int(id)); h.Doc.Contents != d.Contents {
				t.Errorf("query %d rank %d: wrong passage", g.Query, j)
			}
		}
	}
	n := len(gold)
	if n != 32 {
		t.Errorf("golden file has %d queries", n)
	}
	if _, err := NewDenseRetriever(tableEncoder{4, nil}, vs, c, ""); err == nil {
		t.Error("width mismatch: want an error")
	}
}

// unitEncoder embeds text with the E5 prefix stripped, so "query: X" and
// "passage: X" get the same unit vector.
type unitEncoder struct{ hashEncoder }

func (e *unitEncoder) Encode(ctx context.Context, texts []string) ([]float32, error) {
	stripped := make([]string, len(texts))
	for i, t := range texts {
		stripped[i] = strings.TrimPrefix(strings.TrimPrefix(t, E5QueryPrefix), E5PassagePrefix)
	}
	x, err := e.hashEncoder.Encode(ctx, stripped)
	for i := 0; i+4 <= len(x); i += 4 {
		n := float32(math.Sqrt(float64(x[i]*x[i] + x[i+1]*x[i+1] + x[i+2]*x[i+2] + x[i+3]*x[i+3])))
		for j := i; j < i+4; j++ {
			x[j] /= n
		}
	}
	return x, err
}

// TestBuildDenseFolder builds flat and IVF dense folders over the 1k sample
// and retrieves a passage by its own text: it must come first with score 1.
func TestBuildDenseFolder(t *testing.T) {
	corpus := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.jsonl")
	for _, tc := range []struct {
		name  string
		nlist int
		enc   vector.Encoding
	}{{"flat-f32", 0, vector.F32}, {"ivf-f16", 4, vector.F16}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			enc := &unitEncoder{}
			s, err := BuildDenseFolder(context.Background(), corpus, dir, DenseBuildOptions{
				Encoder: enc, EncoderPath: "/models/e5", NList: tc.nlist, NProbe: 4, Encoding: tc.enc,
				Embed: EmbedOptions{Chunk: 256, Batch: 64},
			})
			if err != nil {
				t.Fatal(err)
			}
			if s.Kind != KindDense || s.Dense.Dim != 4 || s.Dense.PassagePrefix != E5PassagePrefix || s.Dense.QueryPrefix != E5QueryPrefix || s.Docs != 1000 {
				t.Errorf("settings %+v %+v", s, s.Dense)
			}
			r, _, err := OpenRetriever(dir, OpenOptions{Encoder: enc, LoadVectors: OpenVectorSearcher})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			c, _ := OpenCorpus(corpus, filepath.Join(dir, OffsetsFile))
			defer c.Close()
			for _, row := range []int{0, 5, 999} {
				d, _ := c.Doc(row)
				hits, err := r.Retrieve(context.Background(), []string{d.Contents}, 3)
				if err != nil {
					t.Fatal(err)
				}
				if len(hits[0]) == 0 || hits[0][0].Doc.ID != d.ID || math.Abs(float64(hits[0][0].Score)-1) > 1e-3 {
					t.Errorf("row %d: top hit %+v score %v", row, hits[0][0].Doc.ID, hits[0][0].Score)
				}
			}
			if _, _, err := OpenRetriever(dir, OpenOptions{}); err == nil {
				t.Error("dense folder without an encoder: want an error")
			}
		})
	}
}
