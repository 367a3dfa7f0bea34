package qwen

import "sort"

// architecture is what distinguishes one Hugging Face Qwen class from
// another: which optional tensors its checkpoints hold. Each class lives in
// its own file (qwen2.go, qwen3.go) and is chosen from config.json's
// "architectures".
type architecture struct {
	// name is the Hugging Face class, e.g. "Qwen2ForCausalLM".
	name string
	// modelType is config.json's "model_type".
	modelType string
	// qkvBias reports whether q_proj, k_proj and v_proj carry a bias.
	qkvBias func(*Config) bool
	// oBias reports whether o_proj carries a bias.
	oBias func(*Config) bool
	// qkNorm reports whether each attention head RMS-normalises q and k
	// (q_norm, k_norm) before the rotary embedding.
	qkNorm bool
}

// architectures is the registry of supported classes, by Hugging Face name.
// It is read-only after package initialisation.
var architectures = map[string]architecture{
	qwen2.name: qwen2,
	qwen3.name: qwen3,
}

func lookupArchitecture(names []string) (architecture, bool) {
	for _, n := range names {
		if a, ok := architectures[n]; ok {
			return a, true
		}
	}
	return architecture{}, false
}

func architectureNames() []string {
	names := make([]string, 0, len(architectures))
	for n := range architectures {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
