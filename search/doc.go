// Package search holds the retrieval side of CAS: the corpus store, Flat
// and IVF vector indexes, BM25, the FAISS file reader, the import of
// Search-R1's FAISS index and corpus as an index folder (import.go, with
// streamed conversions in import_convert.go), and the retriever server and
// client (Search-R1's /retrieve API).
//
// Data flow: corpus → index → retriever → conformal.APS → agent.
package search
