package search

import (
	"context"
	"errors"
	"fmt"
)

// Hit is one retrieved passage and its retriever score (BM25 score or inner
// product; higher is better). Hits of one query are sorted best first.
type Hit struct {
	Doc   Doc
	Score float32
}

// Retriever returns the k best passages for each query. The in-process BM25
// and dense retrievers and the HTTP Client all implement it, so the agent
// runs the same with or without a server.
type Retriever interface {
	Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error)
}

// BM25Retriever serves BM25 results with their passages, in process.
type BM25Retriever struct {
	index  *BM25Index
	corpus *Corpus
}

// NewBM25Retriever pairs an index with the corpus it was built from.
func NewBM25Retriever(ix *BM25Index, c *Corpus) (*BM25Retriever, error) {
	if ix.Len() != c.Len() {
		return nil, fmt.Errorf("bm25 index has %d documents, corpus %s has %d", ix.Len(), c.Path(), c.Len())
	}
	return &BM25Retriever{index: ix, corpus: c}, nil
}

// Index returns the BM25 index.
func (r *BM25Retriever) Index() *BM25Index { return r.index }

// Corpus returns the corpus.
func (r *BM25Retriever) Corpus() *Corpus { return r.corpus }

// Retrieve searches all queries in parallel and reads the hit passages.
func (r *BM25Retriever) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	if k < 1 {
		return nil, fmt.Errorf("retrieve: k = %d, want ≥ 1", k)
	}
	rows, err := r.index.SearchBatch(ctx, queries, k)
	if err != nil {
		return nil, err
	}
	return hitsFromRows(r.corpus, rows)
}

// Close closes the corpus file.
func (r *BM25Retriever) Close() error { return r.corpus.Close() }

func hitsFromRows(c *Corpus, rows [][]RowScore) ([][]Hit, error) {
	out := make([][]Hit, len(rows))
	for i, rs := range rows {
		out[i] = make([]Hit, len(rs))
		for j, r := range rs {
			d, err := c.Doc(r.Row)
			if err != nil {
				return nil, err
			}
			out[i][j] = Hit{Doc: d, Score: r.Score}
		}
	}
	return out, nil
}

// OpenOptions carry what OpenRetriever cannot load itself: the dense path
// needs a query encoder (package model provides E5) and a vector-index
// loader (the search package's index formats), both injected so that this
// package does not depend on the model code.
type OpenOptions struct {
	// Encoder embeds queries for kind "dense"; required there.
	Encoder Encoder
	// LoadVectors opens the folder's vector index for kind "dense";
	// required there.
	LoadVectors func(path string) (VectorSearcher, error)
	// Corpus, when not "", is the corpus file to use instead of the one the
	// folder records (a corpus that was moved).
	Corpus string
}

// ClosableRetriever is a Retriever that owns files.
type ClosableRetriever interface {
	Retriever
	Close() error
}

// OpenRetriever opens an index folder (see FolderSettings) as a Retriever.
func OpenRetriever(dir string, opt OpenOptions) (ClosableRetriever, FolderSettings, error) {
	s, err := ReadFolderSettings(dir)
	if err != nil {
		return nil, s, err
	}
	paths, err := s.Paths(dir, opt.Corpus)
	if err != nil {
		return nil, s, err
	}
	c, err := OpenCorpus(paths.Corpus, paths.Offsets)
	if err != nil {
		return nil, s, err
	}
	if c.Len() != s.Docs {
		c.Close()
		return nil, s, fmt.Errorf("index folder %s: settings say %d passages, corpus has %d", dir, s.Docs, c.Len())
	}
	switch s.Kind {
	case KindBM25:
		ix, err := LoadBM25(paths.Index)
		if err != nil {
			c.Close()
			return nil, s, err
		}
		r, err := NewBM25Retriever(ix, c)
		if err != nil {
			c.Close()
			return nil, s, err
		}
		return r, s, nil
	case KindDense:
		if opt.Encoder == nil || opt.LoadVectors == nil {
			c.Close()
			return nil, s, errors.New("index folder " + dir + ": a dense index needs a query encoder and a vector-index loader")
		}
		vs, err := opt.LoadVectors(paths.Vectors)
		if err != nil {
			c.Close()
			return nil, s, err
		}
		r, err := NewDenseRetriever(opt.Encoder, vs, c, s.Dense.QueryPrefix)
		if err != nil {
			c.Close()
			return nil, s, err
		}
		return r, s, nil
	}
	c.Close()
	return nil, s, fmt.Errorf("index folder %s: unknown kind %q", dir, s.Kind)
}
