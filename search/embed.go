package search

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/internal/meter"
)

// EmbedOptions configure EmbedCorpus.
type EmbedOptions struct {
	Prefix   string    // prepended to every passage's contents (E5: "passage: ")
	Chunk    int       // passages per chunk file (default 8192)
	Batch    int       // passages per Encode call (default 256)
	Encoder  string    // recorded in the manifest, to refuse resuming with another model
	Progress io.Writer // progress bar (nil: silent)
}

// embedManifest binds a folder of chunk files to one corpus and encoder, so a
// resumed run never mixes embeddings of different models or corpora.
type embedManifest struct {
	Corpus      string `json:"corpus"`
	CorpusBytes uint64 `json:"corpus_bytes"`
	Passages    int    `json:"passages"`
	Dim         int    `json:"dim"`
	Chunk       int    `json:"chunk"`
	Prefix      string `json:"prefix"`
	Encoder     string `json:"encoder"`
}

// EmbeddingChunks lists the chunk files of an embedding folder in order.
type EmbeddingChunks struct {
	Dir   string
	Dim   int
	Rows  []int    // passages per chunk
	Files []string // absolute paths
}

// Len is the total number of embedded passages.
func (e EmbeddingChunks) Len() int {
	n := 0
	for _, r := range e.Rows {
		n += r
	}
	return n
}

// Read loads chunk i: Rows[i] × Dim float32, row-major.
func (e EmbeddingChunks) Read(i int) ([]float32, error) {
	raw, err := os.ReadFile(e.Files[i])
	if err != nil {
		return nil, err
	}
	if len(raw) != 4*e.Rows[i]*e.Dim {
		return nil, fmt.Errorf("%s: %d bytes, want %d", e.Files[i], len(raw), 4*e.Rows[i]*e.Dim)
	}
	x := make([]float32, e.Rows[i]*e.Dim)
	for j := range x {
		x[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
	}
	return x, nil
}

// EmbedCorpus embeds every passage of c (opt.Prefix + contents) with enc
// into dir/chunk-NNNNNN.f32 files of opt.Chunk passages (little-endian
// float32, row-major). It is resumable: a chunk already on disk with the
// right size is kept, and each chunk appears atomically, so an interrupted
// run continues where it stopped. dir/manifest.json records the corpus,
// encoder, width, chunk size and prefix; resuming with different ones is an
// error.
func EmbedCorpus(ctx context.Context, c *Corpus, enc Encoder, dir string, opt EmbedOptions) (EmbeddingChunks, error) {
	if opt.Chunk <= 0 {
		opt.Chunk = 8192
	}
	if opt.Batch <= 0 {
		opt.Batch = 256
	}
	d := enc.Dim()
	if d <= 0 {
		return EmbeddingChunks{}, fmt.Errorf("encoder width %d", d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return EmbeddingChunks{}, err
	}
	man := embedManifest{
		Corpus: c.Path(), CorpusBytes: c.offsets[c.Len()], Passages: c.Len(),
		Dim: d, Chunk: opt.Chunk, Prefix: opt.Prefix, Encoder: opt.Encoder,
	}
	manPath := filepath.Join(dir, "manifest.json")
	if raw, err := os.ReadFile(manPath); err == nil {
		var old embedManifest
		if err := json.Unmarshal(raw, &old); err != nil {
			return EmbeddingChunks{}, fmt.Errorf("%s: %w", manPath, err)
		}
		if old != man {
			return EmbeddingChunks{}, fmt.Errorf("%s was written for another run (%+v); use an empty folder", manPath, old)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return EmbeddingChunks{}, err
	} else {
		raw, _ := json.MarshalIndent(man, "", "  ")
		if err := atomicfile.WriteFile(manPath, append(raw, '\n')); err != nil {
			return EmbeddingChunks{}, err
		}
	}
	out := EmbeddingChunks{Dir: dir, Dim: d}
	n := c.Len()
	bar := meter.NewCount(opt.Progress, int64(n), "embed passages")
	defer bar.Finish()
	texts := make([]string, 0, opt.Batch)
	for lo := 0; lo < n; lo += opt.Chunk {
		hi := min(lo+opt.Chunk, n)
		path := filepath.Join(dir, fmt.Sprintf("chunk-%06d.f32", lo/opt.Chunk))
		out.Files = append(out.Files, path)
		out.Rows = append(out.Rows, hi-lo)
		if st, err := os.Stat(path); err == nil && st.Size() == int64(4*(hi-lo)*d) {
			bar.Add(hi - lo)
			continue
		}
		buf := make([]byte, 0, 4*(hi-lo)*d)
		for b := lo; b < hi; b += opt.Batch {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			texts = texts[:0]
			for row := b; row < min(b+opt.Batch, hi); row++ {
				doc, err := c.Doc(row)
				if err != nil {
					return out, err
				}
				texts = append(texts, opt.Prefix+doc.Contents)
			}
			emb, err := enc.Encode(ctx, texts)
			if err != nil {
				return out, fmt.Errorf("embed passages %d–%d: %w", b, b+len(texts)-1, err)
			}
			if len(emb) != len(texts)*d {
				return out, fmt.Errorf("encoder returned %d floats for %d passages of width %d", len(emb), len(texts), d)
			}
			for _, v := range emb {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
			bar.Add(len(texts))
		}
		if err := atomicfile.WriteFile(path, buf); err != nil {
			return out, err
		}
	}
	return out, nil
}
