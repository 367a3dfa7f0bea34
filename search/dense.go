package search

import (
	"context"
	"fmt"

	"github.com/cas-engine/cas/search/vector"
)

// Encoder embeds texts into vectors (E5: mean-pooled, L2-normalised). The
// caller applies any prefix ("query: " / "passage: ").
type Encoder interface {
	// Dim is the embedding width.
	Dim() int
	// Encode returns len(texts) embeddings, row-major [len(texts) × Dim()].
	Encode(ctx context.Context, texts []string) ([]float32, error)
}

// VectorSearcher is what a dense retriever needs from a vector index:
// batched top-k by score (inner product for E5), row-major queries, results
// for query i at [i·k, (i+1)·k) best first, ids −1 where fewer than k exist.
// The ids are corpus rows.
type VectorSearcher interface {
	Dim() int
	Len() int
	SearchBatch(ctx context.Context, queries []float32, k int) (scores []float32, ids []int64, err error)
}

// DenseRetriever embeds queries with an encoder and searches a vector index
// of the corpus passages (Search-R1's E5 + FAISS retriever).
type DenseRetriever struct {
	enc    Encoder
	vecs   VectorSearcher
	corpus *Corpus
	prefix string
}

// NewDenseRetriever checks that encoder, index and corpus agree.
func NewDenseRetriever(enc Encoder, vecs VectorSearcher, c *Corpus, queryPrefix string) (*DenseRetriever, error) {
	if enc.Dim() != vecs.Dim() {
		return nil, fmt.Errorf("dense retriever: encoder width %d, vector index width %d", enc.Dim(), vecs.Dim())
	}
	if vecs.Len() != c.Len() {
		return nil, fmt.Errorf("dense retriever: vector index holds %d vectors, corpus %s has %d passages", vecs.Len(), c.Path(), c.Len())
	}
	return &DenseRetriever{enc: enc, vecs: vecs, corpus: c, prefix: queryPrefix}, nil
}

// Retrieve embeds the whole batch at once, searches it, and reads passages.
func (r *DenseRetriever) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	if k < 1 {
		return nil, fmt.Errorf("retrieve: k = %d, want ≥ 1", k)
	}
	if len(queries) == 0 {
		return [][]Hit{}, nil
	}
	texts := make([]string, len(queries))
	for i, q := range queries {
		texts[i] = r.prefix + q
	}
	emb, err := r.enc.Encode(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("encode queries: %w", err)
	}
	if len(emb) != len(queries)*r.enc.Dim() {
		return nil, fmt.Errorf("encoder returned %d floats for %d queries of width %d", len(emb), len(queries), r.enc.Dim())
	}
	scores, ids, err := r.vecs.SearchBatch(ctx, emb, k)
	if err != nil {
		return nil, err
	}
	if len(scores) != len(queries)*k || len(ids) != len(queries)*k {
		return nil, fmt.Errorf("vector index returned %d results for %d queries × k=%d", len(ids), len(queries), k)
	}
	rows := make([][]RowScore, len(queries))
	for i := range rows {
		for j := 0; j < k; j++ {
			id := ids[i*k+j]
			if id < 0 {
				break
			}
			if id >= int64(r.corpus.Len()) {
				return nil, fmt.Errorf("vector index returned id %d outside the corpus (%d passages)", id, r.corpus.Len())
			}
			rows[i] = append(rows[i], RowScore{Row: int(id), Score: scores[i*k+j]})
		}
	}
	return hitsFromRows(r.corpus, rows)
}

// Close closes the corpus file and the vector index (when it has Close).
func (r *DenseRetriever) Close() error {
	err := r.corpus.Close()
	if c, ok := r.vecs.(interface{ Close() error }); ok {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// VectorIndexSearcher adapts an Index to the dense retriever's
// VectorSearcher with fixed search parameters.
type VectorIndexSearcher struct {
	Index  vector.Index
	Params vector.SearchParams
}

// Dim is the index dimension.
func (s VectorIndexSearcher) Dim() int { return s.Index.Dim() }

// Len is the number of stored vectors.
func (s VectorIndexSearcher) Len() int { return s.Index.Len() }

// SearchBatch searches a batch of queries (the context is checked before
// the search starts; a search in progress runs to completion).
func (s VectorIndexSearcher) SearchBatch(ctx context.Context, queries []float32, k int) ([]float32, []int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	p := s.Params
	return s.Index.Search(queries, k, &p)
}

// Close closes the index.
func (s VectorIndexSearcher) Close() error { return s.Index.Close() }

// OpenVectorSearcher opens an index (vector.OpenIndex) as a VectorSearcher with
// default parameters; it fits OpenOptions.LoadVectors.
func OpenVectorSearcher(path string) (VectorSearcher, error) {
	ix, err := vector.OpenIndex(path, nil)
	if err != nil {
		return nil, err
	}
	return VectorIndexSearcher{Index: ix}, nil
}
