// Package hfbind binds a model's tagged weight tree to the tensors of a
// Hugging Face checkpoint, strictly: every missing, unused, mis-shaped or
// non-float tensor is reported at once, by its Hugging Face name. Qwen and
// BERT declare their trees in one tag dialect:
//
//	hf:"name"          the name segment the field adds (joined with ".")
//	shape:"out,in"     a leaf's shape, in symbolic dimensions (or integers)
//	dims:"out=hidden"  rebinds symbolic dimensions for the field's subtree
//	count:"layers"     a slice of structs: one element per index, named hf.N
//	when:"cond"        a leaf the checkpoint holds only when the condition is true
//	otherwise:"ignore" with when: a tensor present while the condition is
//	                   false is tolerated and ignored (a tied lm_head)
//
// Leaves are pointer fields (*graph.Node, *context.Variable); the model sets
// them from the Leaf list that Walk returns. A tensor "a.b.c.weight" lives in
// the GoMLX variable "weight" of scope base+"/a/b/c" (VariableScope), so the
// scope tree mirrors the checkpoint's name tree and HFName inverts it.
package hfbind

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/model/safetensors"
)

// Env evaluates the tags for one configuration.
type Env struct {
	// Dims gives the size of each symbolic dimension.
	Dims map[string]int
	// Meaning names each dimension's config.json key(s), for errors.
	Meaning map[string]string
	// Conds evaluates the when tags.
	Conds map[string]bool
}

// Leaf is one tensor a weight tree declares.
type Leaf struct {
	Name    string   // Hugging Face name, without the checkpoint's prefix
	Shape   []int    // the dimensions the config implies
	Dims    []string // the symbol of each dimension (after dims rebinding)
	Needed  bool     // the checkpoint must hold it
	Ignored bool     // not needed, but tolerated (and ignored) when present
	Field   reflect.Value
}

// Set binds the leaf's field to v (a *graph.Node or *context.Variable).
func (l Leaf) Set(v any) { l.Field.Set(reflect.ValueOf(v)) }

// Walk lists the leaves of the struct root points to, sizing its count
// slices from env. A bad tag is a programming error, reported as an error.
func Walk(root any, env Env) ([]Leaf, error) {
	var out []Leaf
	err := walk(reflect.ValueOf(root).Elem(), "", env, nil, &out)
	return out, err
}

// walk visits v's tagged fields; alias maps rebound symbols to env's.
func walk(v reflect.Value, prefix string, env Env, alias map[string]string, out *[]Leaf) error {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		hf, ok := f.Tag.Lookup("hf")
		if !ok {
			continue
		}
		name := joinName(prefix, hf)
		sub := alias
		if d := f.Tag.Get("dims"); d != "" {
			sub = make(map[string]string, len(alias)+2)
			for k, x := range alias {
				sub[k] = x
			}
			for _, kv := range strings.Split(d, ",") {
				k, sym, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("field %s: bad dims tag %q", f.Name, d)
				}
				sub[k] = resolveSymbol(sym, alias)
			}
		}
		switch f.Type.Kind() {
		case reflect.Pointer:
			l := Leaf{Name: name, Needed: true, Field: fv}
			if s := f.Tag.Get("shape"); s != "" {
				for _, sym := range strings.Split(s, ",") {
					sym = resolveSymbol(sym, sub)
					n, err := dimension(sym, env)
					if err != nil {
						return fmt.Errorf("field %s: %w", f.Name, err)
					}
					l.Shape, l.Dims = append(l.Shape, n), append(l.Dims, sym)
				}
			}
			if cond := f.Tag.Get("when"); cond != "" {
				holds, known := env.Conds[cond]
				if !known {
					return fmt.Errorf("field %s: unknown condition %q", f.Name, cond)
				}
				if !holds {
					l.Needed, l.Ignored = false, f.Tag.Get("otherwise") == "ignore"
				}
			}
			*out = append(*out, l)
		case reflect.Struct:
			if err := walk(fv, name, env, sub, out); err != nil {
				return err
			}
		case reflect.Slice:
			if f.Type.Elem().Kind() != reflect.Struct {
				return fmt.Errorf("field %s: type %s cannot carry an hf tag", f.Name, f.Type)
			}
			n, err := dimension(resolveSymbol(f.Tag.Get("count"), sub), env)
			if err != nil {
				return fmt.Errorf("field %s: count: %w", f.Name, err)
			}
			fv.Set(reflect.MakeSlice(f.Type, n, n))
			for j := range n {
				if err := walk(fv.Index(j), joinName(name, strconv.Itoa(j)), env, sub, out); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("field %s: type %s cannot carry an hf tag", f.Name, f.Type)
		}
	}
	return nil
}

func resolveSymbol(sym string, alias map[string]string) string {
	if a, ok := alias[sym]; ok {
		return a
	}
	return sym
}

func dimension(sym string, env Env) (int, error) {
	if n, err := strconv.Atoi(sym); err == nil {
		return n, nil
	}
	n, ok := env.Dims[sym]
	if !ok {
		return 0, fmt.Errorf("unknown dimension %q", sym)
	}
	return n, nil
}

func joinName(prefix, name string) string {
	switch {
	case prefix == "":
		return name
	case name == "":
		return prefix
	}
	return prefix + "." + name
}

// Checkpoint is the side of a binding that holds the tensors.
type Checkpoint struct {
	Tensors Tensors
	// Source names the file or folder in errors.
	Source string
	// Prefix is prepended to every leaf name ("bert." in BertFor* files).
	Prefix string
	// Model names the architecture in errors ("Qwen2ForCausalLM").
	Model string
	// Ignore reports tensors (named without Prefix) that checkpoints save
	// but the model recomputes or does not use; nil ignores none.
	Ignore func(name string) bool
}

// Tensors is what binding reads of a checkpoint (safetensors.Reader has it).
type Tensors interface {
	Names() []string
	Info(name string) (safetensors.TensorInfo, bool)
}

// CheckLayers compares the config's layer count with the layers the
// checkpoint holds (layerPrefix+"N.…"), in time linear in the tensors, so
// that num_hidden_layers = 10^6 over a two-layer file is rejected before any
// per-layer leaf is built.
func (c Checkpoint) CheckLayers(layerPrefix string, want int) error {
	layerPrefix = c.Prefix + layerPrefix
	have := safetensors.CountLayers(c.Tensors.Names(), layerPrefix)
	switch {
	case want <= have:
		return nil
	case have == 0:
		return fmt.Errorf("%s: config.json has num_hidden_layers = %d, the weights hold 0 layers (no %sN.* tensor)",
			c.Source, want, layerPrefix)
	}
	return fmt.Errorf("%s: config.json has num_hidden_layers = %d, the weights hold %d layers (%s0 … %s%d)",
		c.Source, want, have, layerPrefix, layerPrefix, have-1)
}

// BindError lists every problem found while binding a checkpoint, by
// Hugging Face name (with the checkpoint's prefix).
type BindError struct {
	Source    string
	Model     string
	Missing   []string // needed tensors absent from the checkpoint
	Misshaped []string // "tensor X has shape [..], config.json implies [..] [..]" or a dtype problem
	Unused    []string // tensors no leaf asked for
	meaning   map[string]string
}

func (e *BindError) Error() string {
	var lines []string
	for _, n := range e.Missing {
		lines = append(lines, fmt.Sprintf("%s: missing tensor %s%s", e.Source, n, e.meaning[n]))
	}
	for _, m := range e.Misshaped {
		lines = append(lines, e.Source+": "+m)
	}
	for _, n := range e.Unused {
		lines = append(lines, fmt.Sprintf("%s: unused tensor %s (not part of a %s with this config.json)", e.Source, n, e.Model))
	}
	return strings.Join(lines, "\n")
}

// Check compares the checkpoint with the leaves (from Walk) and returns a
// *BindError naming every missing, unused, mis-shaped or non-float tensor,
// or nil when the leaves can be read from it.
func (c Checkpoint) Check(leaves []Leaf, env Env) error {
	e := &BindError{Source: c.Source, Model: c.Model, meaning: map[string]string{}}
	known := map[string]bool{}
	for _, l := range leaves {
		full := c.Prefix + l.Name
		known[full] = l.Needed || l.Ignored
		if !l.Needed {
			continue
		}
		explain := ""
		if len(l.Dims) > 0 {
			parts := make([]string, len(l.Dims))
			for i, d := range l.Dims {
				if parts[i] = env.Meaning[d]; parts[i] == "" {
					parts[i] = d
				}
			}
			explain = " [" + strings.Join(parts, ", ") + "]"
		}
		ti, present := c.Tensors.Info(full)
		switch {
		case !present:
			e.Missing = append(e.Missing, full)
			e.meaning[full] = explain
		case !ti.DType.IsFloat():
			e.Misshaped = append(e.Misshaped, fmt.Sprintf("tensor %s has dtype %s, want a float type", full, ti.DType))
		case l.Shape != nil && !slices.Equal(ti.Shape, l.Shape):
			e.Misshaped = append(e.Misshaped, fmt.Sprintf("tensor %s has shape %v, config.json implies %v%s", full, ti.Shape, l.Shape, explain))
		}
	}
	for _, n := range c.Tensors.Names() {
		if known[n] {
			continue
		}
		if rel, ok := strings.CutPrefix(n, c.Prefix); ok && c.Ignore != nil && c.Ignore(rel) {
			continue
		}
		e.Unused = append(e.Unused, n)
	}
	sort.Strings(e.Unused)
	if len(e.Missing)+len(e.Misshaped)+len(e.Unused) == 0 {
		return nil
	}
	return e
}

// VariableScope maps a Hugging Face tensor name to the context scope (below
// base) and variable name that hold it: "model.layers.0.mlp.up_proj.weight"
// → scope base+"/model/layers/0/mlp/up_proj", name "weight".
func VariableScope(base, hfName string) (scope, name string) {
	if base == context.RootScope {
		base = ""
	}
	i := strings.LastIndexByte(hfName, '.')
	if i < 0 {
		return base + context.ScopeSeparator, hfName
	}
	return base + context.ScopeSeparator + strings.ReplaceAll(hfName[:i], ".", context.ScopeSeparator), hfName[i+1:]
}

// HFName returns the Hugging Face tensor name of a variable whose scope
// lies under base (the scope the model was loaded into): VariableScope's
// inverse.
func HFName(base string, v *context.Variable) (string, bool) {
	if base == context.RootScope {
		base = ""
	}
	rel, ok := strings.CutPrefix(v.Scope(), base+context.ScopeSeparator)
	if !ok {
		return "", false
	}
	if rel == "" {
		return v.Name(), true
	}
	return strings.ReplaceAll(rel, context.ScopeSeparator, ".") + "." + v.Name(), true
}
