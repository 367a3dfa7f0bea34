// Package bert is the E5 / BERT sentence encoder as a GoMLX graph, loading a
// Hugging Face BertModel folder (config.json + model.safetensors).
//
// The forward pass is BERT's post-LayerNorm encoder (Devlin et al., 2019):
//
//	x₀ = LN(E_word[ids] + E_pos[0..T) + E_type[0])
//	a  = LN(x + Attn(x) Wₒᵀ + bₒ)                       per layer
//	x' = LN(a + GELU(a W₁ᵀ + b₁) W₂ᵀ + b₂),  GELU(u) = u·Φ(u) = u·½(1+erf(u/√2))
//
// and E5's sentence embedding (Wang et al., 2022) is the mean of the last
// hidden states over the attention mask followed by L2 normalisation:
//
//	e = h̄ / max(‖h̄‖₂, 1e-12),   h̄ = Σₜ mₜ hₜ / max(Σₜ mₜ, 1e-9)
//
// exactly as sentence-transformers' Pooling(mean) + Normalize modules compute
// it. Texts get E5's "query: " or "passage: " prefix and the tokenizer's
// special tokens ([CLS] … [SEP]); batches are right-padded.
//
// Weights keep Hugging Face's [out, in] layout; every projection contracts
// the last axis of the activations with the last axis of the weight. Graphs
// are compiled once per (batch, length) bucket: lengths are rounded up to a
// power of two (at least 8, at most the maximum length), and batches to the
// configured batch size, so a corpus is embedded with a handful of
// compilations.
package bert
