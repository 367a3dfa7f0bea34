// Package calibrate calibrates APS (conformal.APS) on real retrieval: it
// retrieves candidates for questions of a FlashRAG/Search-R1 QA file, labels
// each question's gold passage with a pluggable Judge, computes the APS
// threshold q̂ on a random calibration split, and measures coverage and kept
// passages on the held-out questions, next to a fixed top-k baseline.
//
// Data flow: search (Retriever) → calibrate → conformal (threshold); the
// agent later loads the threshold. This package imports only search and
// conformal.
package calibrate
