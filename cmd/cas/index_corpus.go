package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cas-engine/cas/model/bert"
	"github.com/cas-engine/cas/search"
	"github.com/spf13/cobra"
)

// denseFlags are the encoder flags of commands that open a dense folder.
type denseFlags struct {
	encoder, tokenizer string
	batch, maxLen      int
	corpus             string // overrides the folder's recorded corpus
}

// registerCorpus adds --corpus to a command that opens an index folder.
func (d *denseFlags) registerCorpus(cmd *cobra.Command) {
	cmd.Flags().StringVar(&d.corpus, "corpus", "", "corpus JSONL file to use instead of the one the index folder records (a moved corpus)")
}

func (d *denseFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&d.encoder, "encoder", "", "E5/BERT encoder directory (dense folders; default: the one recorded in settings.json)")
	f.StringVar(&d.tokenizer, "encoder-tokenizer", "", "tokenizer.json of the encoder (default: <encoder>/tokenizer.json)")
	f.IntVar(&d.batch, "encoder-batch", 32, "encoder batch size")
	f.IntVar(&d.maxLen, "encoder-max-len", 256, "encoder maximum sequence length")
	aliasFlag(cmd, "max-len", "encoder-max-len")
	if f.Lookup("tokenizer") == nil {
		aliasFlag(cmd, "tokenizer", "encoder-tokenizer")
	}
}

// e5Encoder adapts bert.Encoder to search.Encoder (texts arrive with their
// "query: " / "passage: " prefix already applied).
type e5Encoder struct {
	enc *bert.Encoder
	tok bert.Tokenizer
}

func (e e5Encoder) Dim() int { return e.enc.Dim() }

func (e e5Encoder) Encode(ctx context.Context, texts []string) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.enc.EmbedTexts(e.tok, texts, "", nil)
}

// loadE5 loads an encoder and its tokenizer; the returned func releases them.
func loadE5(d denseFlags) (search.Encoder, func(), error) {
	if d.encoder == "" {
		return nil, nil, errors.New("a dense index needs --encoder DIR")
	}
	tok, err := loadModelTokenizer(d.encoder, d.tokenizer)
	if err != nil {
		return nil, nil, err
	}
	enc, closeAll, err := loadBERT(d.encoder, bert.Options{BatchSize: d.batch, MaxLen: d.maxLen})
	if err != nil {
		return nil, nil, err
	}
	return e5Encoder{enc: enc, tok: tok}, closeAll, nil
}

// openRetrieval opens the retriever a command names: a client of the
// Search-R1-compatible server at serverURL when given, else the index
// folder dir (openRetrieverFolder). It returns the source it retrieves from
// (the URL or the folder) and a function that closes what it opened.
func openRetrieval(serverURL, dir string, d denseFlags) (search.Retriever, string, func(), error) {
	if serverURL != "" {
		return search.NewClient(serverURL), serverURL, func() {}, nil
	}
	r, _, closeAll, err := openRetrieverFolder(dir, d)
	if err != nil {
		return nil, "", nil, err
	}
	return r, dir, closeAll, nil
}

// openRetrieverFolder opens an index folder as a retriever: BM25 directly,
// dense with the E5 encoder (flags, else the paths recorded at build time).
func openRetrieverFolder(dir string, d denseFlags) (search.ClosableRetriever, search.FolderSettings, func(), error) {
	s, err := search.ReadFolderSettings(dir)
	if err != nil {
		return nil, s, nil, err
	}
	var (
		opt     = search.OpenOptions{Corpus: d.corpus}
		release = func() {}
	)
	if s.Kind == search.KindDense {
		paths, err := s.Paths(dir, d.corpus)
		if err != nil {
			return nil, s, nil, err
		}
		if d.encoder == "" {
			d.encoder = paths.Encoder
		}
		if d.tokenizer == "" {
			d.tokenizer = paths.Tokenizer
		}
		if s.Dense.MaxLength > 0 && d.maxLen == 256 {
			d.maxLen = s.Dense.MaxLength
		}
		enc, rel, err := loadE5(d)
		if err != nil {
			return nil, s, nil, err
		}
		opt.Encoder, opt.LoadVectors, release = enc, search.OpenVectorSearcher, rel
	}
	r, s, err := search.OpenRetriever(dir, opt)
	if err != nil {
		release()
		return nil, s, nil, err
	}
	return r, s, func() { r.Close(); release() }, nil
}

// corpusBuildFlags are `cas index build`'s corpus modes:
// --corpus F --bm25, or --corpus F --encoder DIR [--tokenizer F] (dense,
// reusing the vector mode's --ivf/--f16/--sq8/--nprobe/--train-size/--out).
type corpusBuildFlags struct {
	corpus string
	bm25   bool
	k1, b  float32
	chunk  int
	dense  denseFlags
}

func (c *corpusBuildFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.corpus, "corpus", "", "wiki-18 JSONL corpus ({\"id\",\"contents\"} per line) to index")
	f.BoolVar(&c.bm25, "bm25", false, "with --corpus: build a BM25 index (Lucene's English analyzer, pyserini's scoring)")
	f.Float32Var(&c.k1, "k1", search.DefaultBM25Params().K1, "BM25 k1")
	f.Float32Var(&c.b, "b", search.DefaultBM25Params().B, "BM25 b")
	f.IntVar(&c.chunk, "chunk", 8192, "dense: passages per resumable embedding chunk")
	c.dense.register(cmd)
}

// runIndexBuildCorpus builds an index folder from a corpus: BM25, or dense
// with the E5 encoder ("passage: " prefix, resumable chunks).
func runIndexBuildCorpus(cmd *cobra.Command, f *indexBuildFlags, c *corpusBuildFlags) error {
	if f.out == "" {
		return errors.New("index build: --out DIR is required")
	}
	if c.bm25 == (c.dense.encoder != "") {
		return errors.New("index build: with --corpus give exactly one of --bm25 and --encoder DIR")
	}
	start := time.Now()
	var (
		s   search.FolderSettings
		err error
	)
	if c.bm25 {
		if f.ivf > 0 || f.f16 || f.sq8 || f.flat {
			return errors.New("index build: --flat/--ivf/--f16/--sq8 apply to vector indexes, not --bm25")
		}
		s, err = search.BuildBM25Folder(cmd.Context(), c.corpus, f.out, search.BM25BuildOptions{
			Analyzer: search.DefaultAnalyzerSettings(),
			Params:   search.BM25Params{K1: c.k1, B: c.b},
			Progress: progressOut(cmd.ErrOrStderr()),
		})
	} else {
		encoding, eerr := f.encoding("index build")
		if eerr != nil {
			return eerr
		}
		if f.flat && f.ivf > 0 {
			return errors.New("index build: give at most one of --flat and --ivf NLIST")
		}
		enc, release, lerr := loadE5(c.dense)
		if lerr != nil {
			return lerr
		}
		defer release()
		opt := search.DenseBuildOptions{
			Encoder: enc, EncoderPath: absPath(c.dense.encoder), TokenizerPath: absPath(c.dense.tokenizer), MaxLength: c.dense.maxLen,
			Embed: search.EmbedOptions{Chunk: c.chunk, Batch: 8 * c.dense.batch},
			NList: f.ivf, NProbe: f.nprobe, TrainSize: f.trainSize,
			Encoding: encoding, KMeans: f.kmeans(),
			Progress: progressOut(cmd.ErrOrStderr()),
		}
		s, err = search.BuildDenseFolder(cmd.Context(), c.corpus, f.out, opt)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "built a %s index of %d passages of %s in %.2fs; wrote %s\n",
		s.Kind, s.Docs, s.Corpus, time.Since(start).Seconds(), f.out)
	return err
}

func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// corpusSearchFlags are `cas index search`'s text mode: --query TEXT
// (repeatable) against an index folder.
type corpusSearchFlags struct {
	queries []string
	dense   denseFlags
}

func (c *corpusSearchFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&c.queries, "query", nil, "query text (repeatable) against an index folder built with --corpus")
	c.dense.register(cmd)
	c.dense.registerCorpus(cmd)
}

// textSearchResult is one output line of `cas index search --query`.
type textSearchResult struct {
	Query string          `json:"query"`
	Hits  []textSearchHit `json:"hits"`
}

type textSearchHit struct {
	ID    string  `json:"id"`
	Score float32 `json:"score"`
	Title string  `json:"title"`
	Text  string  `json:"text"`
}

// runIndexSearchQuery retrieves -k passages per --query from an index
// folder and prints one JSON line per query.
func runIndexSearchQuery(cmd *cobra.Command, f *indexSearchFlags, c *corpusSearchFlags) error {
	if f.index == "" {
		return errors.New("index search: --index DIR is required")
	}
	if f.k <= 0 {
		return fmt.Errorf("index search: -k %d must be positive", f.k)
	}
	if !isIndexFolder(f.index) {
		return fmt.Errorf("index search --query: %s is a bare vector index, not an index folder: it has no corpus to return "+
			"passages from and no encoder to embed the query. Build a folder with `cas index build --corpus CORPUS.jsonl "+
			"--encoder E5_DIR --out DIR` (or --bm25), or search this index with query vectors: "+
			"`cas embed --encoder E5_DIR --in queries.jsonl --out q.f32 --prefix query` then `cas index search --index %s --vectors q.f32`",
			f.index, f.index)
	}
	r, _, closeAll, err := openRetrieverFolder(f.index, c.dense)
	if err != nil {
		return err
	}
	defer closeAll()
	hits, err := r.Retrieve(cmd.Context(), c.queries, f.k)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	for i, hs := range hits {
		line := textSearchResult{Query: c.queries[i], Hits: make([]textSearchHit, len(hs))}
		for j, h := range hs {
			line.Hits[j] = textSearchHit{ID: h.Doc.ID, Score: h.Score, Title: h.Doc.Title, Text: h.Doc.Text}
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}
