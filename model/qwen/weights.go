package qwen

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/model/hfbind"
)

// weightTree is the tensor tree of a Qwen checkpoint, bound declaratively
// in hfbind's tag dialect: `hf` is the Hugging Face name (relative to the
// enclosing field's), `shape` its dimensions in the symbols below, and
// `when` the condition (see env) under which the checkpoint holds it. T is
// what a leaf binds to: a graph node (weights, for the graphs) or a host
// view of the variable's values (hostWeights, for the CPU decode step).
//
// Shape symbols: V vocab_size, D hidden_size, I intermediate_size,
// L num_hidden_layers, Q num_attention_heads·head_dim,
// K num_key_value_heads·head_dim, H head_dim.
//
// Every weight stays in Hugging Face's [out, in] layout; matmuls contract on
// the last axis of both operands.
type weightTree[T comparable] struct {
	Embed  T              `hf:"model.embed_tokens.weight" shape:"V,D"` // [V, D]
	Layers []layerTree[T] `hf:"model.layers" count:"L"`                // num_hidden_layers blocks
	Norm   T              `hf:"model.norm.weight" shape:"D"`           // [D]
	// LMHead is nil when the embeddings are tied; a tied checkpoint that
	// still ships lm_head.weight has it ignored, as Hugging Face does.
	LMHead T `hf:"lm_head.weight" shape:"V,D" when:"untied" otherwise:"ignore"` // [V, D]
}

// layerTree is one decoder block, model.layers.N.*.
type layerTree[T comparable] struct {
	InputNorm T `hf:"input_layernorm.weight" shape:"D"`                // [D]
	Q         T `hf:"self_attn.q_proj.weight" shape:"Q,D"`             // [Q, D]
	QBias     T `hf:"self_attn.q_proj.bias" shape:"Q" when:"qkvBias"`  // [Q]
	K         T `hf:"self_attn.k_proj.weight" shape:"K,D"`             // [K, D]
	KBias     T `hf:"self_attn.k_proj.bias" shape:"K" when:"qkvBias"`  // [K]
	V         T `hf:"self_attn.v_proj.weight" shape:"K,D"`             // [K, D]
	VBias     T `hf:"self_attn.v_proj.bias" shape:"K" when:"qkvBias"`  // [K]
	O         T `hf:"self_attn.o_proj.weight" shape:"D,Q"`             // [D, Q]
	OBias     T `hf:"self_attn.o_proj.bias" shape:"D" when:"oBias"`    // [D]
	QNorm     T `hf:"self_attn.q_norm.weight" shape:"H" when:"qkNorm"` // [H]
	KNorm     T `hf:"self_attn.k_norm.weight" shape:"H" when:"qkNorm"` // [H]
	PostNorm  T `hf:"post_attention_layernorm.weight" shape:"D"`       // [D]
	Gate      T `hf:"mlp.gate_proj.weight" shape:"I,D"`                // [I, D]
	Up        T `hf:"mlp.up_proj.weight" shape:"I,D"`                  // [I, D]
	Down      T `hf:"mlp.down_proj.weight" shape:"D,I"`                // [D, I]
}

// weights is the tree bound to graph nodes.
type weights = weightTree[*graph.Node]

// env evaluates the tags of the weights tree for a config.
func env(c *Config) hfbind.Env {
	a := c.arch()
	return hfbind.Env{
		Dims: map[string]int{
			"V": c.VocabSize, "D": c.HiddenSize, "I": c.IntermediateSize, "L": c.NumHiddenLayers,
			"Q": c.NumAttentionHeads * c.HeadDim, "K": c.NumKeyValueHeads * c.HeadDim, "H": c.HeadDim,
		},
		Meaning: symbolMeaning,
		Conds: map[string]bool{
			"untied":  !c.TieWordEmbeddings,
			"qkvBias": a.qkvBias != nil && a.qkvBias(c),
			"oBias":   a.oBias != nil && a.oBias(c),
			"qkNorm":  a.qkNorm,
		},
	}
}

// symbolMeaning documents the symbols in error messages.
var symbolMeaning = map[string]string{
	"V": "vocab_size", "D": "hidden_size", "I": "intermediate_size", "L": "num_hidden_layers",
	"Q": "num_attention_heads·head_dim", "K": "num_key_value_heads·head_dim", "H": "head_dim",
}

// weightSpecs lists every tensor the config's weights tree declares.
func weightSpecs(c *Config) []hfbind.Leaf { return weightLeaves(c, &weights{}) }

// weightLeaves sizes the tree w for the config and lists its leaves, with
// the fields of w to bind.
func weightLeaves[T comparable](c *Config, w *weightTree[T]) []hfbind.Leaf {
	leaves, err := hfbind.Walk(w, env(c))
	if err != nil {
		panic(fmt.Errorf("qwen: weight tags: %w", err)) // the tags are constant
	}
	return leaves
}

// ignoredBuffer reports tensors that older checkpoints save but that are
// recomputed, not learned (the rotary inverse frequencies).
func ignoredBuffer(name string) bool {
	return strings.HasSuffix(name, ".rotary_emb.inv_freq")
}

// checkWeights compares a checkpoint's tensors with what the config implies
// and reports every missing, unused, mis-shaped or non-float tensor at once,
// each by its Hugging Face name, prefixed with source (the file or folder).
func checkWeights(c *Config, source string, r hfbind.Tensors) error {
	ck := hfbind.Checkpoint{Tensors: r, Source: source, Model: c.arch().name, Ignore: ignoredBuffer}
	// Before listing what the config implies (one leaf per tensor per
	// layer), check that the file can hold that many layers.
	if err := ck.CheckLayers("model.layers.", c.NumHiddenLayers); err != nil {
		return err
	}
	return ck.Check(weightSpecs(c), env(c))
}

// HFName returns the Hugging Face tensor name of a model variable whose
// context scope lies under base (the scope the model was loaded into).
func HFName(base string, v *context.Variable) (string, bool) { return hfbind.HFName(base, v) }

// bindWeights fills the weights tree with the graph values of the model
// variables under ctx's scope, cast to the compute dtype set on ctx
// (SetComputeDType), if any. A missing variable is a programmer error
// (the model was loaded strictly), so it panics, as GoMLX graph builders do.
func bindWeights(ctx *context.Context, g *graph.Graph, c *Config) *weights {
	w := &weights{}
	for _, s := range weightLeaves(c, w) {
		if !s.Needed {
			continue
		}
		scope, name := hfbind.VariableScope(ctx.Scope(), s.Name)
		v := ctx.GetVariableByScopeAndName(scope, name)
		if v == nil {
			panic(fmt.Errorf("qwen: model variable for %s (scope %q) is missing from the context", s.Name, scope))
		}
		s.Set(castWeight(ctx, v.ValueGraph(g)))
	}
	return w
}

// lmHead returns the output projection [V, D]: lm_head.weight, or the
// embedding matrix when tie_word_embeddings is set.
func (w *weightTree[T]) lmHead() T {
	var none T
	if w.LMHead != none {
		return w.LMHead
	}
	return w.Embed
}
