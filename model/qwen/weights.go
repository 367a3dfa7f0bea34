package qwen

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/model/safetensors"
)

// weights is the tensor tree of a Qwen checkpoint, bound declaratively: the
// `hf` tag is the Hugging Face name (relative to the enclosing field's
// prefix), `shape` its dimensions in the symbols below, and `when` the
// condition (see conditions) under which the checkpoint holds it.
//
// Shape symbols: V vocab_size, D hidden_size, I intermediate_size,
// Q num_attention_heads·head_dim, K num_key_value_heads·head_dim, H head_dim.
//
// Every weight stays in Hugging Face's [out, in] layout; matmuls contract on
// the last axis of both operands.
type weights struct {
	Embed  *graph.Node `hf:"model.embed_tokens.weight" shape:"V,D"` // [V, D]
	Layers []layer     `hf:"model.layers"`                          // num_hidden_layers blocks
	Norm   *graph.Node `hf:"model.norm.weight" shape:"D"`           // [D]
	// LMHead is nil when the embeddings are tied; a tied checkpoint that
	// still ships lm_head.weight has it ignored, as Hugging Face does.
	LMHead *graph.Node `hf:"lm_head.weight" shape:"V,D" when:"untied" otherwise:"ignore"` // [V, D]
}

// layer is one decoder block, model.layers.N.*.
type layer struct {
	InputNorm *graph.Node `hf:"input_layernorm.weight" shape:"D"`                // [D]
	Q         *graph.Node `hf:"self_attn.q_proj.weight" shape:"Q,D"`             // [Q, D]
	QBias     *graph.Node `hf:"self_attn.q_proj.bias" shape:"Q" when:"qkvBias"`  // [Q]
	K         *graph.Node `hf:"self_attn.k_proj.weight" shape:"K,D"`             // [K, D]
	KBias     *graph.Node `hf:"self_attn.k_proj.bias" shape:"K" when:"qkvBias"`  // [K]
	V         *graph.Node `hf:"self_attn.v_proj.weight" shape:"K,D"`             // [K, D]
	VBias     *graph.Node `hf:"self_attn.v_proj.bias" shape:"K" when:"qkvBias"`  // [K]
	O         *graph.Node `hf:"self_attn.o_proj.weight" shape:"D,Q"`             // [D, Q]
	OBias     *graph.Node `hf:"self_attn.o_proj.bias" shape:"D" when:"oBias"`    // [D]
	QNorm     *graph.Node `hf:"self_attn.q_norm.weight" shape:"H" when:"qkNorm"` // [H]
	KNorm     *graph.Node `hf:"self_attn.k_norm.weight" shape:"H" when:"qkNorm"` // [H]
	PostNorm  *graph.Node `hf:"post_attention_layernorm.weight" shape:"D"`       // [D]
	Gate      *graph.Node `hf:"mlp.gate_proj.weight" shape:"I,D"`                // [I, D]
	Up        *graph.Node `hf:"mlp.up_proj.weight" shape:"I,D"`                  // [I, D]
	Down      *graph.Node `hf:"mlp.down_proj.weight" shape:"D,I"`                // [D, I]
}

// conditions evaluates the `when` tags for a config.
func conditions(c *Config) map[string]bool {
	a := c.arch()
	return map[string]bool{
		"untied":  !c.TieWordEmbeddings,
		"qkvBias": a.qkvBias != nil && a.qkvBias(c),
		"oBias":   a.oBias != nil && a.oBias(c),
		"qkNorm":  a.qkNorm,
	}
}

// symbols evaluates the `shape` symbols for a config.
func symbols(c *Config) map[string]int {
	return map[string]int{
		"V": c.VocabSize, "D": c.HiddenSize, "I": c.IntermediateSize,
		"Q": c.NumAttentionHeads * c.HeadDim, "K": c.NumKeyValueHeads * c.HeadDim, "H": c.HeadDim,
	}
}

// symbolMeaning documents the symbols in error messages.
var symbolMeaning = map[string]string{
	"V": "vocab_size", "D": "hidden_size", "I": "intermediate_size",
	"Q": "num_attention_heads·head_dim", "K": "num_key_value_heads·head_dim", "H": "head_dim",
}

// weightSpec is one tensor the config implies.
type weightSpec struct {
	name    string // Hugging Face name
	shape   []int
	symbols string // the shape tag, e.g. "Q,D"
	needed  bool   // the checkpoint must hold it
	ignored bool   // not needed, but tolerated (and ignored) when present
}

// walkWeights visits every *graph.Node field of the weights tree (with
// Layers sized by the config) together with its spec; visit may set the
// field to bind it.
func walkWeights(c *Config, w *weights, visit func(spec weightSpec, field reflect.Value)) {
	conds, syms := conditions(c), symbols(c)
	w.Layers = make([]layer, c.NumHiddenLayers)
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			name := prefix + f.Tag.Get("hf")
			switch fv.Kind() {
			case reflect.Slice:
				for j := range fv.Len() {
					walk(fv.Index(j), name+"."+strconv.Itoa(j)+".")
				}
			case reflect.Pointer:
				spec := weightSpec{name: name, symbols: f.Tag.Get("shape"), needed: true}
				for _, s := range strings.Split(spec.symbols, ",") {
					spec.shape = append(spec.shape, syms[s])
				}
				if cond := f.Tag.Get("when"); cond != "" && !conds[cond] {
					spec.needed = false
					spec.ignored = f.Tag.Get("otherwise") == "ignore"
				}
				visit(spec, fv)
			}
		}
	}
	walk(reflect.ValueOf(w).Elem(), "")
}

// weightSpecs lists every tensor name the weights tree knows for a config.
func weightSpecs(c *Config) []weightSpec {
	var specs []weightSpec
	walkWeights(c, &weights{}, func(s weightSpec, _ reflect.Value) { specs = append(specs, s) })
	return specs
}

// ignoredBuffer reports tensors that older checkpoints save but that are
// recomputed, not learned (the rotary inverse frequencies).
func ignoredBuffer(name string) bool {
	return strings.HasSuffix(name, ".rotary_emb.inv_freq")
}

// tensorInfo is what checkWeights needs to know of a stored tensor.
type tensorInfo struct {
	shape   []int
	isFloat bool
	dtype   string
}

// checkWeights compares a checkpoint's tensors with what the config implies
// and reports every missing, unused, mis-shaped or non-float tensor at once,
// each by its Hugging Face name, prefixed with source (the file or folder).
func checkWeights(c *Config, source string, names []string, info func(string) (tensorInfo, bool)) error {
	// Before listing what the config implies (one spec per tensor per layer),
	// check that the file can hold that many layers: num_hidden_layers = 10^6
	// would otherwise build millions of specs for a file of a few tensors.
	if err := checkLayerCount(c, source, names); err != nil {
		return err
	}
	var errs []error
	known := map[string]bool{}
	for _, s := range weightSpecs(c) {
		known[s.name] = s.needed || s.ignored
		ti, present := info(s.name)
		switch {
		case !s.needed:
			continue
		case !present:
			errs = append(errs, fmt.Errorf("%s: missing tensor %s [%s]", source, s.name, explainShape(s)))
		case !ti.isFloat:
			errs = append(errs, fmt.Errorf("%s: tensor %s has dtype %s, want a float type", source, s.name, ti.dtype))
		case !equalInts(ti.shape, s.shape):
			errs = append(errs, fmt.Errorf("%s: tensor %s has shape %v, config.json implies %v [%s]",
				source, s.name, ti.shape, s.shape, explainShape(s)))
		}
	}
	var unused []string
	for _, n := range names {
		if ok, listed := known[n]; (!listed || !ok) && !ignoredBuffer(n) {
			unused = append(unused, n)
		}
	}
	sort.Strings(unused)
	for _, n := range unused {
		errs = append(errs, fmt.Errorf("%s: unused tensor %s (not part of a %s with this config.json)",
			source, n, c.arch().name))
	}
	return errors.Join(errs...)
}

// checkLayerCount compares num_hidden_layers with the layers the weights
// hold (model.layers.N.*), in time linear in the number of tensors.
func checkLayerCount(c *Config, source string, names []string) error {
	if layers := safetensors.CountLayers(names, "model.layers."); c.NumHiddenLayers > layers {
		return fmt.Errorf("%s: config.json has num_hidden_layers = %d, the weights hold %d layers (model.layers.0 … model.layers.%d)",
			source, c.NumHiddenLayers, layers, layers-1)
	}
	return nil
}

func explainShape(s weightSpec) string {
	parts := strings.Split(s.symbols, ",")
	for i, p := range parts {
		parts[i] = symbolMeaning[p]
	}
	return strings.Join(parts, ", ")
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// variableScope maps a Hugging Face tensor name to the context scope (below
// base) and variable name that hold it: "model.layers.0.mlp.up_proj.weight"
// → scope base+"/model/layers/0/mlp/up_proj", name "weight". The scope tree
// therefore mirrors the checkpoint's name tree, and HFName inverts it.
func variableScope(base, hfName string) (scope, name string) {
	i := strings.LastIndexByte(hfName, '.')
	path := strings.ReplaceAll(hfName[:i], ".", context.ScopeSeparator)
	if base == context.RootScope {
		base = ""
	}
	return base + context.ScopeSeparator + path, hfName[i+1:]
}

// HFName returns the Hugging Face tensor name of a model variable whose
// context scope lies under base (the scope the model was loaded into).
func HFName(base string, v *context.Variable) (string, bool) {
	if base == context.RootScope {
		base = ""
	}
	rel, ok := strings.CutPrefix(v.Scope(), base+context.ScopeSeparator)
	if !ok {
		return "", false
	}
	return strings.ReplaceAll(rel, context.ScopeSeparator, ".") + "." + v.Name(), true
}

// bindWeights fills the weights tree with the graph values of the model
// variables under ctx's scope, cast to the compute dtype set on ctx
// (SetComputeDType), if any. A missing variable is a programmer error
// (the model was loaded strictly), so it panics, as GoMLX graph builders do.
func bindWeights(ctx *context.Context, g *graph.Graph, c *Config) *weights {
	w := &weights{}
	walkWeights(c, w, func(s weightSpec, field reflect.Value) {
		if !s.needed {
			return
		}
		scope, name := variableScope(ctx.Scope(), s.name)
		v := ctx.GetVariableByScopeAndName(scope, name)
		if v == nil {
			panic(fmt.Errorf("qwen: model variable for %s (scope %q) is missing from the context", s.name, scope))
		}
		field.Set(reflect.ValueOf(castWeight(ctx, v.ValueGraph(g))))
	})
	return w
}

// lmHead returns the output projection [V, D]: lm_head.weight, or the
// embedding matrix when tie_word_embeddings is set.
func (w *weights) lmHead() *graph.Node {
	if w.LMHead != nil {
		return w.LMHead
	}
	return w.Embed
}
