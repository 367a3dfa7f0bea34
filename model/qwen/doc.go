// Package qwen is the Qwen2 / Qwen2.5 / Qwen3 causal language model of CAS
// in GoMLX: the policy that writes <think>, <search> and <answer>.
//
// # Loading
//
// Load reads a Hugging Face model folder — config.json (typed as Config,
// checked by Validate), the EOS ids of generation_config.json, and
// model.safetensors or a sharded model.safetensors.index.json in BF16, F16 or
// F32. The architecture (Qwen2ForCausalLM in qwen2.go, Qwen3ForCausalLM in
// qwen3.go) comes from config.json's "architectures". Weights are bound
// strictly and declaratively (the tagged weights struct in weights.go, bound
// by model/hfbind, the binder BERT shares): every
// missing, unused, mis-shaped or non-float tensor is reported at once by its
// Hugging Face name; optional tensors (q/k/v/o biases, q_norm/k_norm, an
// untied lm_head) are expected exactly when the config implies them.
//
// Each tensor becomes one float32 GoMLX variable whose scope mirrors the
// Hugging Face name ("model.layers.3.mlp.up_proj.weight" → scope
// /model/layers/3/mlp/up_proj, variable "weight"; HFName inverts it), kept in
// the [out, in] layout with matmuls contracting the last axis of both
// operands (10× faster single-token decoding on the pure-Go backend than
// transposed weights).
//
// Host memory: tensors are converted one at a time from the memory-mapped
// file into a float32 buffer that the pure-Go backend then shares (an XLA
// backend copies it to the device and the host copy is freed), so the
// anonymous memory peaks at the float32 model plus its largest tensor; the
// BF16 file is only ever mapped (page cache, reclaimable). For
// Qwen2.5-3B-Instruct (3.09 B parameters, tied 151936×2048 embedding) that is
// 12.3 GB + 1.2 GB ≈ 13.6 GB anonymous, plus up to the 6.2 GB file in mapped
// pages while loading; never two float32 copies. Measured on a Qwen2.5-0.5B
// shape in BF16 (494 M parameters, 1.98 GB as float32, largest tensor
// 0.54 GB): peak RssAnon 2.46 GB, peak RssFile 0.97 GB.
//
// # Forward pass
//
// Per decoder block (forward.go): x += o_proj(GQA(rope(q), rope(k), v)),
// then x += down(silu(gate(n)) ⊙ up(n)), with RMSNorm in float32 before
// each, rotate-half RoPE at rope_theta, q/k/v biases (Qwen2), per-head
// q_norm/k_norm (Qwen3) and a tied or separate lm_head. Left-padded batches
// use position ids cumsum(mask) − 1 and mask padded keys. The same graph code
// runs on the pure-Go backend (default) and XLA (build tag xla).
//
// # Generation
//
// A Session (generate.go) holds a batch and a KV cache in fixed-size buffers
// (cache.go): a compiled step depends only on (batch, tokens, slots), so
// decoding compiles once and prefill once per power-of-two chunk length. The
// cache is written without DynamicUpdateSlice (absent from the pure-Go
// backend) by writeSlots. Append prefills new tokens for any rows (e.g. an
// <information> block) keeping the cache; Generate samples greedily or with
// temperature / top-k / top-p from a seeded generator, stops rows at EOS ids,
// stop strings (checked on decoded text through a Decode hook) or a token
// limit, and returns ids with their log-probabilities under the model.
// Finished rows stay in the batch, masked, until Session.Keep drops them.
//
// On the gocpu backend, a model computing in float32 (weights stored in
// float32 or bfloat16) runs a Session's steps on the host instead
// (hoststep.go): the same arithmetic written out like llama2.c's forward,
// over the variables' own buffers (host.go) and host KV caches in the
// graph's layouts, computing only the tokens that fill a slot, with
// batch-1 matrix-vector products split over a team of spinning helper
// threads (team.go) instead of ≈ 345 graph ops through the executor. Its
// logits match the step graph's within 1e-6 of max |logit|
// (hoststep_test.go); the graph stays the reference and the path of the
// other backends, and $CAS_QWEN_STEP=graph or Model.SetGraphStep forces it.
//
// # Scoring
//
// TokenLogProbs (score.go) is a graph function giving teacher-forced
// per-token log-probabilities (and optionally entropies) under a response
// mask; it is differentiable, so GRPO's trainer builds it into its loss.
// The ops whose gradients need Pad (Slice) are avoided on the differentiable
// path.
package qwen
