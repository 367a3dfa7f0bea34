// Package model holds what turns text into numbers and back: Hugging Face
// tokenizers (byte-level BPE, WordPiece, chat templates), safetensors I/O,
// and the Qwen2/Qwen3 causal LMs and the E5/BERT encoder as GoMLX graphs,
// with KV-cache generation and log-prob scoring.
//
// Data flow: search uses the encoder to embed passages and queries; agent
// uses the causal LM to generate rollouts; train differentiates its scores.
package model
