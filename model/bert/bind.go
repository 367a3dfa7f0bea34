package bert

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/cas-engine/cas/model/safetensors"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Weights are bound to Hugging Face tensor names through struct tags:
//
//	hf:"name"        the name segment this field adds (joined with ".")
//	shape:"out,in"   the expected shape of a leaf, in symbolic dimensions
//	dims:"out=hidden,in=intermediate"
//	                 binds symbolic dimensions for the field's subtree
//	count:"layers"   a slice field: one element per index, named hf.N
//	optional:"true"  a leaf that may be absent (left nil)
//
// Leaves are *context.Variable. A tensor "a.b.c.weight" becomes the variable
// "weight" in the context scope "/a/b/c", so the scope tree mirrors the file.

// leaf is one weight the struct tree asks for.
type leaf struct {
	field    reflect.Value // the *context.Variable field to set
	name     string        // Hugging Face name, without the file's prefix
	shape    []int
	optional bool
}

var variableType = reflect.TypeFor[*context.Variable]()

// collectLeaves walks the struct pointed to by root and lists its leaves.
// dims resolves symbolic dimension names. Errors here are programming errors
// in the tags, reported as errors rather than panics.
func collectLeaves(root any, dims map[string]int) ([]leaf, error) {
	var out []leaf
	err := walk(reflect.ValueOf(root).Elem(), "", dims, &out)
	return out, err
}

func walk(v reflect.Value, prefix string, dims map[string]int, out *[]leaf) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		hf, ok := f.Tag.Lookup("hf")
		if !ok {
			continue
		}
		name := joinName(prefix, hf)
		env := dims
		if d := f.Tag.Get("dims"); d != "" {
			env = make(map[string]int, len(dims)+2)
			for k, x := range dims {
				env[k] = x
			}
			for _, kv := range strings.Split(d, ",") {
				k, sym, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("field %s: bad dims tag %q", f.Name, d)
				}
				n, err := resolveDim(sym, dims)
				if err != nil {
					return fmt.Errorf("field %s: %w", f.Name, err)
				}
				env[k] = n
			}
		}
		fv := v.Field(i)
		switch {
		case f.Type == variableType:
			var shape []int
			if s := f.Tag.Get("shape"); s != "" {
				for _, sym := range strings.Split(s, ",") {
					n, err := resolveDim(sym, env)
					if err != nil {
						return fmt.Errorf("field %s: %w", f.Name, err)
					}
					shape = append(shape, n)
				}
			}
			*out = append(*out, leaf{field: fv, name: name, shape: shape, optional: f.Tag.Get("optional") == "true"})
		case f.Type.Kind() == reflect.Struct:
			if err := walk(fv, name, env, out); err != nil {
				return err
			}
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			n, err := resolveDim(f.Tag.Get("count"), env)
			if err != nil {
				return fmt.Errorf("field %s: count: %w", f.Name, err)
			}
			fv.Set(reflect.MakeSlice(f.Type, n, n))
			for j := 0; j < n; j++ {
				if err := walk(fv.Index(j), joinName(name, strconv.Itoa(j)), env, out); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("field %s: type %s cannot carry an hf tag", f.Name, f.Type)
		}
	}
	return nil
}

func resolveDim(sym string, env map[string]int) (int, error) {
	if n, err := strconv.Atoi(sym); err == nil {
		return n, nil
	}
	n, ok := env[sym]
	if !ok {
		return 0, fmt.Errorf("unknown dimension %q", sym)
	}
	return n, nil
}

func joinName(prefix, name string) string {
	if prefix == "" {
		return name
	}
	if name == "" {
		return prefix
	}
	return prefix + "." + name
}

// BindError lists every problem found while binding a checkpoint's tensors,
// by Hugging Face name.
type BindError struct {
	Source    string   // the weights file or folder
	Missing   []string // required tensors absent from the file
	Misshaped []string // "name: shape [..], want [..]" or a dtype problem
	Unused    []string // tensors in the file no weight asked for
}

func (e *BindError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: weights do not match the model:", e.Source)
	for _, l := range []struct {
		what  string
		names []string
	}{{"missing", e.Missing}, {"mis-shaped", e.Misshaped}, {"unused", e.Unused}} {
		if len(l.names) > 0 {
			fmt.Fprintf(&b, "\n  %s (%d): %s", l.what, len(l.names), strings.Join(l.names, ", "))
		}
	}
	return b.String()
}

// bindWeights checks every leaf against the reader (names carry prefix in the
// file), reports all mismatches at once, and only then loads the tensors into
// context variables, converting one tensor at a time to float32. Tensors
// named in ignore (without prefix) are accepted and skipped.
func bindWeights(ctx *context.Context, r safetensors.Reader, source, prefix string, leaves []leaf, ignore func(string) bool) (err error) {
	berr := &BindError{Source: source}
	used := map[string]bool{}
	var present []leaf
	for _, l := range leaves {
		full := prefix + l.name
		ti, ok := r.Info(full)
		if !ok {
			if !l.optional {
				berr.Missing = append(berr.Missing, full)
			}
			continue
		}
		used[full] = true
		if !ti.DType.IsFloat() {
			berr.Misshaped = append(berr.Misshaped, fmt.Sprintf("%s: dtype %s, want a float type", full, ti.DType))
			continue
		}
		if l.shape != nil && !slices.Equal(ti.Shape, l.shape) {
			berr.Misshaped = append(berr.Misshaped, fmt.Sprintf("%s: shape %v, want %v", full, ti.Shape, l.shape))
			continue
		}
		present = append(present, l)
	}
	for _, n := range r.Names() {
		if used[n] {
			continue
		}
		if strings.HasPrefix(n, prefix) && ignore(strings.TrimPrefix(n, prefix)) {
			continue
		}
		berr.Unused = append(berr.Unused, n)
	}
	if len(berr.Missing)+len(berr.Misshaped)+len(berr.Unused) > 0 {
		return berr
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %v", source, r)
		}
	}()
	for _, l := range present {
		full := prefix + l.name
		ti, _ := r.Info(full)
		t := tensors.FromShape(shapes.Make(dtypes.Float32, ti.Shape...))
		var ferr error
		tensors.MustMutableFlatData(t, func(flat []float32) { ferr = r.Float32Into(full, flat) })
		if ferr != nil {
			return ferr
		}
		scope, name := "/"+strings.ReplaceAll(l.name, ".", "/"), l.name
		if i := strings.LastIndexByte(scope, '/'); i >= 0 {
			scope, name = scope[:i], scope[i+1:]
		}
		if scope == "" {
			scope = "/"
		}
		v := ctx.InAbsPath(scope).Checked(false).VariableWithValue(name, t)
		v.SetTrainable(false)
		l.field.Set(reflect.ValueOf(v))
	}
	return nil
}
