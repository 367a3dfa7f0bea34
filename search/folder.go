package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/internal/meter"
	"github.com/cas-engine/cas/internal/relpath"
	"github.com/cas-engine/cas/search/vector"
)

// An index folder holds everything a retriever needs next to a corpus file
// that stays where it is (wiki-18 is 13 GB):
//
//	settings.json   FolderSettings (written last: its presence marks a complete folder)
//	corpus.offsets  the corpus offsets table (BuildCorpusOffsets)
//	bm25.idx        the BM25 inverted index   (kind "bm25")
//	<vector index>  the vector index          (kind "dense", file named in settings)
const (
	SettingsFile = "settings.json"
	OffsetsFile  = "corpus.offsets"
	BM25File     = "bm25.idx"
)

// Retriever kinds stored in FolderSettings.Kind.
const (
	KindBM25  = "bm25"
	KindDense = "dense"
)

// FolderSettings is an index folder's settings.json.
type FolderSettings struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`    // "bm25" | "dense"
	Corpus  string `json:"corpus"`  // the JSONL corpus: relative to the folder when inside it, else absolute
	Offsets string `json:"offsets"` // offsets file, relative to the folder
	Docs    int    `json:"docs"`
	Created string `json:"created,omitempty"`

	// BM25 (kind "bm25").
	Analyzer *AnalyzerSettings `json:"analyzer,omitempty"`
	BM25     *BM25Params       `json:"bm25,omitempty"`
	Index    string            `json:"index,omitempty"` // index file, relative to the folder

	// Dense (kind "dense").
	Dense *DenseSettings `json:"dense,omitempty"`
}

// DenseSettings describe a dense retriever: the encoder that embeds queries
// and the vector index of the passages.
type DenseSettings struct {
	Encoder       string `json:"encoder"`   // encoder directory (config.json, model.safetensors); stored like Corpus
	Tokenizer     string `json:"tokenizer"` // tokenizer file; stored like Corpus
	QueryPrefix   string `json:"query_prefix"`
	PassagePrefix string `json:"passage_prefix"`
	Dim           int    `json:"dim"`
	VectorIndex   string `json:"vector_index"` // file or folder: relative to the folder when inside it, else absolute (an imported FAISS file)
	MaxLength     int    `json:"max_length,omitempty"`
}

// Default E5 prefixes ("query: " / "passage: "), as the E5 paper and
// Search-R1's retriever use them.
const (
	E5QueryPrefix   = "query: "
	E5PassagePrefix = "passage: "
)

const folderVersion = 1

// ReadFolderSettings reads and validates dir/settings.json.
func ReadFolderSettings(dir string) (FolderSettings, error) {
	p := filepath.Join(dir, SettingsFile)
	raw, err := os.ReadFile(p)
	if err != nil {
		return FolderSettings{}, fmt.Errorf("index folder %s: %w", dir, err)
	}
	var s FolderSettings
	if err := json.Unmarshal(raw, &s); err != nil {
		return FolderSettings{}, fmt.Errorf("%s: %w", p, err)
	}
	if s.Version != folderVersion {
		return FolderSettings{}, fmt.Errorf("%s: unsupported version %d", p, s.Version)
	}
	if s.Corpus == "" || s.Offsets == "" {
		return FolderSettings{}, fmt.Errorf("%s: corpus and offsets are required", p)
	}
	switch s.Kind {
	case KindBM25:
		if s.Analyzer == nil || s.BM25 == nil || s.Index == "" {
			return FolderSettings{}, fmt.Errorf("%s: kind bm25 needs analyzer, bm25 and index", p)
		}
	case KindDense:
		if s.Dense == nil || s.Dense.VectorIndex == "" {
			return FolderSettings{}, fmt.Errorf("%s: kind dense needs dense.vector_index", p)
		}
	default:
		return FolderSettings{}, fmt.Errorf("%s: unknown kind %q (want %q or %q)", p, s.Kind, KindBM25, KindDense)
	}
	return s, nil
}

// FolderPaths are the files an index folder's settings name, resolved
// (internal/relpath): the folder's own files (offsets, index, vectors)
// must lie inside it; the corpus, encoder and tokenizer are inside it or
// absolute.
type FolderPaths struct {
	Corpus, Offsets, Index, Vectors, Encoder, Tokenizer string
}

// CorpusFlag is the flag that overrides a folder's recorded corpus, named
// in the error of a folder whose corpus is missing.
const CorpusFlag = "--corpus"

// Paths resolves the files s names for the folder dir. corpus, when not
// "", overrides the recorded corpus (a moved corpus). A recorded corpus
// that is missing is looked for, under its file name, beside the folder and
// inside it (a folder moved together with its corpus); if it is in neither
// place the error names every path tried and the flag that overrides it.
func (s FolderSettings) Paths(dir, corpus string) (FolderPaths, error) {
	var p FolderPaths
	var err error
	p.Offsets, err = relpath.Inside(dir, "offsets", s.Offsets)
	if err != nil {
		return p, fmt.Errorf("%s: %w", filepath.Join(dir, SettingsFile), err)
	}
	switch s.Kind {
	case KindBM25:
		p.Index, err = relpath.Inside(dir, "index", s.Index)
	case KindDense:
		if p.Vectors, err = relpath.InsideOrAbs(dir, "dense.vector_index", s.Dense.VectorIndex); err == nil && s.Dense.Encoder != "" {
			if p.Encoder, err = relpath.InsideOrAbs(dir, "dense.encoder", s.Dense.Encoder); err == nil && s.Dense.Tokenizer != "" {
				p.Tokenizer, err = relpath.InsideOrAbs(dir, "dense.tokenizer", s.Dense.Tokenizer)
			}
		}
	}
	if err != nil {
		return p, fmt.Errorf("%s: %w", filepath.Join(dir, SettingsFile), err)
	}
	if corpus != "" {
		p.Corpus = corpus
		if _, err := os.Stat(corpus); err != nil {
			return p, fmt.Errorf("index folder %s: corpus given by %s: %w", dir, CorpusFlag, err)
		}
		return p, nil
	}
	rec, err := relpath.InsideOrAbs(dir, "corpus", s.Corpus)
	if err != nil {
		return p, fmt.Errorf("%s: %w", filepath.Join(dir, SettingsFile), err)
	}
	tried := []string{rec}
	if name := filepath.Base(rec); name != "." && name != string(filepath.Separator) {
		tried = append(tried, filepath.Join(filepath.Dir(filepath.Clean(dir)), name), filepath.Join(dir, name))
	}
	for _, c := range tried {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			p.Corpus = c
			return p, nil
		}
	}
	return p, fmt.Errorf("index folder %s: its corpus is missing: looked for %s; give the corpus file with %s PATH",
		dir, strings.Join(tried, ", "), CorpusFlag)
}

// WriteFolderSettings writes dir/settings.json atomically. Write it last:
// a folder without settings.json is incomplete.
func WriteFolderSettings(dir string, s FolderSettings) error {
	s.Version = folderVersion
	if s.Created == "" {
		s.Created = time.Now().UTC().Format(time.RFC3339)
	}
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, SettingsFile), append(raw, '\n'))
}

// BM25BuildOptions configure BuildBM25Folder.
type BM25BuildOptions struct {
	Analyzer AnalyzerSettings
	Params   BM25Params
	Progress io.Writer // progress bars (nil: silent)
	Workers  int       // analysis goroutines (0: GOMAXPROCS)
}

// DefaultBM25BuildOptions returns pyserini's analyzer and k1 = 0.9, b = 0.4.
func DefaultBM25BuildOptions() BM25BuildOptions {
	return BM25BuildOptions{Analyzer: DefaultAnalyzerSettings(), Params: DefaultBM25Params()}
}

// BuildBM25Folder indexes a JSONL corpus into dir: offsets table, BM25
// index, settings.json (in that order, each written atomically).
func BuildBM25Folder(ctx context.Context, corpusPath, dir string, opt BM25BuildOptions) (FolderSettings, error) {
	abs, err := filepath.Abs(corpusPath)
	if err != nil {
		return FolderSettings{}, err
	}
	a, err := NewAnalyzer(opt.Analyzer)
	if err != nil {
		return FolderSettings{}, err
	}
	if err := opt.Params.Validate(); err != nil {
		return FolderSettings{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return FolderSettings{}, fmt.Errorf("create index folder: %w", err)
	}
	c, err := BuildCorpusOffsets(abs, filepath.Join(dir, OffsetsFile), opt.Progress)
	if err != nil {
		return FolderSettings{}, err
	}
	defer c.Close()
	ix, err := BuildBM25(ctx, c, a, opt.Params, opt.Workers, opt.Progress)
	if err != nil {
		return FolderSettings{}, err
	}
	if err := ix.Save(filepath.Join(dir, BM25File)); err != nil {
		return FolderSettings{}, err
	}
	as, p := a.Settings(), opt.Params
	rec, err := relpath.Store(dir, "", abs)
	if err != nil {
		return FolderSettings{}, err
	}
	s := FolderSettings{
		Kind: KindBM25, Corpus: rec, Offsets: OffsetsFile, Docs: c.Len(),
		Analyzer: &as, BM25: &p, Index: BM25File,
	}
	if err := WriteFolderSettings(dir, s); err != nil {
		return FolderSettings{}, err
	}
	return s, nil
}

// BuildBM25 indexes every passage of c (its full `contents`, title line
// included, as pyserini indexes Search-R1's wiki-18) with analysis spread
// over workers goroutines and postings appended in row order.
func BuildBM25(ctx context.Context, c *Corpus, a *Analyzer, p BM25Params, workers int, progress io.Writer) (*BM25Index, error) {
	b, err := NewBM25Builder(a, p)
	if err != nil {
		return nil, err
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	const batch = 2048
	texts := make([]string, 0, batch)
	terms := make([][]string, batch)
	caches := make([]stemCache, workers)
	for i := range caches {
		caches[i] = stemCache{}
	}
	flush := func() {
		var wg sync.WaitGroup
		per := (len(texts) + workers - 1) / workers
		for w := 0; w < workers; w++ {
			lo, hi := w*per, min((w+1)*per, len(texts))
			if lo >= hi {
				break
			}
			wg.Add(1)
			go func(w, lo, hi int) {
				defer wg.Done()
				for i := lo; i < hi; i++ {
					terms[i] = a.appendTerms(terms[i][:0], texts[i], caches[w])
				}
				// Bound the per-worker stem cache (wiki-scale vocabularies).
				if len(caches[w]) > 1<<21 {
					caches[w] = stemCache{}
				}
			}(w, lo, hi)
		}
		wg.Wait()
		for i := range texts {
			b.AddTerms(terms[i])
		}
		texts = texts[:0]
	}
	err = c.Scan(progress, func(row int, d Doc) error {
		if row%batch == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		texts = append(texts, d.Contents)
		if len(texts) == batch {
			flush()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", c.Path(), err)
	}
	flush()
	if b.Len() != c.Len() {
		return nil, errors.New("bm25 build: row count mismatch")
	}
	return b.Finish(), nil
}

// DenseBuildOptions configure BuildDenseFolder.
type DenseBuildOptions struct {
	Encoder       Encoder // passage encoder (E5)
	EncoderPath   string  // recorded in settings.json (where `cas serve` finds the model)
	TokenizerPath string  // recorded in settings.json
	MaxLength     int     // recorded in settings.json (0: the encoder's default)
	// Embed configures the resumable embedding pass (Prefix defaults to
	// "passage: "; QueryPrefix below to "query: ").
	Embed       EmbedOptions
	QueryPrefix string
	// NList > 0 builds an IVF index with that many lists (trained on up to
	// TrainSize vectors, default 256·NList); 0 builds an exact Flat index.
	NList     int
	NProbe    int
	TrainSize int                  // vectors sampled for training (IVF: 256·NList, SQ8 flat: 65,536)
	KMeans    vector.KMeansOptions // IVF coarse-quantizer training
	Encoding  vector.Encoding      // F32, F16 or SQ8
	Progress  io.Writer
}

// VectorsDir is the vector index's folder inside a dense index folder, and
// EmbeddingsDir the resumable embedding chunks'.
const (
	VectorsDir    = "vectors"
	EmbeddingsDir = "embeddings"
)

// BuildDenseFolder embeds a corpus with opt.Encoder (resumably, in chunks
// under dir/embeddings) and indexes the vectors (inner product) into
// dir/vectors, then writes settings.json. Rerunning after an interruption
// reuses the offsets and every finished embedding chunk.
func BuildDenseFolder(ctx context.Context, corpusPath, dir string, opt DenseBuildOptions) (FolderSettings, error) {
	if opt.Encoder == nil {
		return FolderSettings{}, errors.New("dense build: no encoder")
	}
	if opt.Embed.Prefix == "" {
		opt.Embed.Prefix = E5PassagePrefix
	}
	if opt.QueryPrefix == "" {
		opt.QueryPrefix = E5QueryPrefix
	}
	if opt.Embed.Progress == nil {
		opt.Embed.Progress = opt.Progress
	}
	if opt.Embed.Encoder == "" {
		opt.Embed.Encoder = opt.EncoderPath
	}
	abs, err := filepath.Abs(corpusPath)
	if err != nil {
		return FolderSettings{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return FolderSettings{}, fmt.Errorf("create index folder: %w", err)
	}
	offs := filepath.Join(dir, OffsetsFile)
	c, err := OpenCorpus(abs, offs)
	if err != nil {
		if c, err = BuildCorpusOffsets(abs, offs, opt.Progress); err != nil {
			return FolderSettings{}, err
		}
	}
	defer c.Close()
	chunks, err := EmbedCorpus(ctx, c, opt.Encoder, filepath.Join(dir, EmbeddingsDir), opt.Embed)
	if err != nil {
		return FolderSettings{}, err
	}
	ix, err := indexChunks(chunks, opt)
	if err != nil {
		return FolderSettings{}, err
	}
	if err := vector.SaveIndex(ix, filepath.Join(dir, VectorsDir)); err != nil {
		return FolderSettings{}, err
	}
	ix.Close()
	var rec [3]string
	for i, p := range []string{abs, opt.EncoderPath, opt.TokenizerPath} {
		if rec[i], err = relpath.Store(dir, "", p); err != nil {
			return FolderSettings{}, err
		}
	}
	s := FolderSettings{
		Kind: KindDense, Corpus: rec[0], Offsets: OffsetsFile, Docs: c.Len(),
		Dense: &DenseSettings{
			Encoder: rec[1], Tokenizer: rec[2],
			QueryPrefix: opt.QueryPrefix, PassagePrefix: opt.Embed.Prefix,
			Dim: chunks.Dim, VectorIndex: VectorsDir, MaxLength: opt.MaxLength,
		},
	}
	if err := WriteFolderSettings(dir, s); err != nil {
		return FolderSettings{}, err
	}
	return s, nil
}

// indexChunks trains (IVF, SQ8) on an evenly spaced sample and adds every
// chunk in row order, so vector ids are corpus rows.
func indexChunks(chunks EmbeddingChunks, opt DenseBuildOptions) (vector.Index, error) {
	var (
		ix  vector.Index
		err error
	)
	if opt.NList > 0 {
		ix, err = vector.NewIVF(chunks.Dim, opt.NList, vector.IVFOptions{Metric: vector.InnerProduct, Encoding: opt.Encoding, NProbe: opt.NProbe, KMeans: opt.KMeans, Progress: opt.Progress})
	} else {
		var f *vector.Flat
		if f, err = vector.NewFlat(chunks.Dim, vector.InnerProduct, opt.Encoding); err == nil {
			f.Reserve(chunks.Len())
			ix = f
		}
	}
	if err != nil {
		return nil, err
	}
	if !ix.IsTrained() {
		want := min(vector.TrainSize(opt.TrainSize, opt.NList), chunks.Len())
		step := max(chunks.Len()/want, 1)
		sample := make([]float32, 0, want*chunks.Dim)
		row := 0
		for i := range chunks.Files {
			x, err := chunks.Read(i)
			if err != nil {
				return nil, err
			}
			for j := 0; j < chunks.Rows[i]; j, row = j+1, row+1 {
				if row%step == 0 && len(sample) < want*chunks.Dim {
					sample = append(sample, x[j*chunks.Dim:(j+1)*chunks.Dim]...)
				}
			}
		}
		if err := ix.Train(sample); err != nil {
			return nil, fmt.Errorf("train vector index: %w", err)
		}
	}
	bar := meter.NewCount(opt.Progress, int64(chunks.Len()), "index vectors")
	defer bar.Finish()
	for i := range chunks.Files {
		x, err := chunks.Read(i)
		if err != nil {
			return nil, err
		}
		if err := ix.Add(nil, x); err != nil {
			return nil, fmt.Errorf("add chunk %d: %w", i, err)
		}
		bar.Add(chunks.Rows[i])
	}
	return ix, nil
}
