// Package vector holds the vector indexes of the retrieval side, FAISS's
// Index in Go: exact Flat search (F32, F16 and SQ8 codes; batches through
// tensor's GEMM fused with the top-k, or, where the CPU has AMX-BF16,
// screened in bfloat16 on its tiles and rescored exactly in F32 under a
// proven rounding bound: flat_screen.go), IVF with a k-means coarse quantizer
// and flat or SQ8 residual lists, the FAISS index file reader and writer
// (IndexFlat, IndexIVFFlat, IndexIDMap), cas's own memory-mapped index file
// (store.go), raw vector files, and the streamed conversions of a FAISS
// flat file used by `cas index import` (convert.go). It knows nothing of
// corpora, text or servers; package search builds retrievers on it.
package vector
