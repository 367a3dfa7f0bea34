package bert

import (
	"strings"

	"github.com/cas-engine/cas/model/hfbind"

	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Weights is BertModel's parameter tree. Tags (hfbind's dialect) map each
// field to its Hugging Face name; shapes use the symbolic dimensions of env.
type Weights struct {
	Embeddings Embeddings `hf:"embeddings"`
	Layers     []Layer    `hf:"encoder.layer" count:"layers"`
}

// Embeddings are the token, position and token-type tables and their LayerNorm.
type Embeddings struct {
	Word     *context.Variable `hf:"word_embeddings.weight" shape:"vocab,hidden"`         // [V, H]
	Position *context.Variable `hf:"position_embeddings.weight" shape:"positions,hidden"` // [P, H]
	Type     *context.Variable `hf:"token_type_embeddings.weight" shape:"types,hidden"`   // [2, H]
	Norm     LayerNorm         `hf:"LayerNorm"`
}

// Layer is one post-LayerNorm transformer block.
type Layer struct {
	Query    Linear    `hf:"attention.self.query" dims:"out=hidden,in=hidden"`
	Key      Linear    `hf:"attention.self.key" dims:"out=hidden,in=hidden"`
	Value    Linear    `hf:"attention.self.value" dims:"out=hidden,in=hidden"`
	AttnOut  Linear    `hf:"attention.output.dense" dims:"out=hidden,in=hidden"`
	AttnNorm LayerNorm `hf:"attention.output.LayerNorm"`
	Up       Linear    `hf:"intermediate.dense" dims:"out=intermediate,in=hidden"`
	Down     Linear    `hf:"output.dense" dims:"out=hidden,in=intermediate"`
	OutNorm  LayerNorm `hf:"output.LayerNorm"`
}

// Linear is y = x Wᵀ + b with W in Hugging Face's [out, in] layout.
type Linear struct {
	Weight *context.Variable `hf:"weight" shape:"out,in"` // [out, in]
	Bias   *context.Variable `hf:"bias" shape:"out"`      // [out]
}

// LayerNorm holds γ (weight) and β (bias).
type LayerNorm struct {
	Gamma *context.Variable `hf:"weight" shape:"hidden"` // [H]
	Beta  *context.Variable `hf:"bias" shape:"hidden"`   // [H]
}

// env names the configuration's sizes for the shape and count tags.
func env(c Config) hfbind.Env {
	return hfbind.Env{
		Dims: map[string]int{
			"vocab":        c.VocabSize,
			"hidden":       c.HiddenSize,
			"positions":    c.MaxPositionEmbeddings,
			"types":        c.TypeVocabSize,
			"intermediate": c.IntermediateSize,
			"layers":       c.NumHiddenLayers,
		},
		Meaning: map[string]string{
			"vocab": "vocab_size", "hidden": "hidden_size", "positions": "max_position_embeddings",
			"types": "type_vocab_size", "intermediate": "intermediate_size", "layers": "num_hidden_layers",
		},
	}
}

// ignoredTensor reports tensors a BertModel checkpoint carries that the
// encoder deliberately does not use: the [CLS] pooler (E5 mean-pools
// instead) and the position_ids buffer some exporters save.
func ignoredTensor(name string) bool {
	return strings.HasPrefix(name, "pooler.") || name == "embeddings.position_ids"
}
