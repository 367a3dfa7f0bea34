package qwen

// qwen2 is Qwen2ForCausalLM, also used by Qwen2.5: q/k/v projections always
// carry a bias, o_proj never does, and there is no per-head q/k norm.
var qwen2 = architecture{
	name:      "Qwen2ForCausalLM",
	modelType: "qwen2",
	qkvBias:   func(*Config) bool { return true },
	oBias:     func(*Config) bool { return false },
	qkNorm:    false,
}
