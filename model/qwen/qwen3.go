package qwen

// qwen3 is Qwen3ForCausalLM: every head RMS-normalises its query and key
// (q_norm, k_norm over head_dim) before the rotary embedding; biases on all
// four attention projections exist only when attention_bias is true; head_dim
// is given explicitly and need not equal hidden_size / num_attention_heads.
var qwen3 = architecture{
	name:      "Qwen3ForCausalLM",
	modelType: "qwen3",
	qkvBias:   func(c *Config) bool { return c.AttentionBias },
	oBias:     func(c *Config) bool { return c.AttentionBias },
	qkNorm:    true,
}
