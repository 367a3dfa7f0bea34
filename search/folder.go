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
	"sync"
	"time"
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
	Corpus  string `json:"corpus"`  // absolute path of the JSONL corpus
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
	Encoder       string `json:"encoder"`   // encoder directory (config.json, model.safetensors)
	Tokenizer     string `json:"tokenizer"` // tokenizer file
	QueryPrefix   string `json:"query_prefix"`
	PassagePrefix string `json:"passage_prefix"`
	Dim           int    `json:"dim"`
	VectorIndex   string `json:"vector_index"` // file or folder, relative to the folder
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
	return writeRetrievalFile(filepath.Join(dir, SettingsFile), append(raw, '\n'))
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
	s := FolderSettings{
		Kind: KindBM25, Corpus: abs, Offsets: OffsetsFile, Docs: c.Len(),
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
