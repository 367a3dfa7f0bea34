// Package search holds the retrieval side of CAS around the vector indexes
// (package search/vector): the corpus store, BM25, dense retrieval (query
// encoder + vector index + corpus), index folders, the import of
// Search-R1's FAISS index and corpus as an index folder (import.go), and the
// retriever server and client (Search-R1's /retrieve API). The load
// generator that drives the server is bench's (bench/loadtest.go).
//
// Data flow: corpus → index → retriever → conformal.APS → agent.
package search
