// Package bench holds evaluation, ablations and side-by-side comparisons
// against peer implementations (FAISS, PyTorch) measured in the same run.
package bench
