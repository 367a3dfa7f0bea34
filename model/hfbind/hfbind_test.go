package hfbind

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/model/safetensors"
)

type linear struct {
	W *int `hf:"weight" shape:"out,in"`
	B *int `hf:"bias" shape:"out" when:"bias"`
}

type block struct {
	Up   linear `hf:"up" dims:"out=inner,in=model"`
	Down linear `hf:"down" dims:"out=model,in=inner"`
}

type tree struct {
	Embed  *int    `hf:"embed.weight" shape:"vocab,model"`
	Blocks []block `hf:"blocks" count:"n"`
	Head   *int    `hf:"head.weight" shape:"vocab,model" when:"untied" otherwise:"ignore"`
	Note   string  // untagged: skipped
}

func testEnv(bias bool) Env {
	return Env{
		Dims:    map[string]int{"vocab": 10, "model": 4, "inner": 8, "n": 2},
		Meaning: map[string]string{"model": "hidden_size", "inner": "intermediate_size"},
		Conds:   map[string]bool{"bias": bias, "untied": false},
	}
}

// fakeTensors holds tensor infos by name.
type fakeTensors map[string]safetensors.TensorInfo

func (f fakeTensors) Names() []string { return slices.Sorted(maps.Keys(f)) }

func (f fakeTensors) Info(name string) (safetensors.TensorInfo, bool) {
	ti, ok := f[name]
	return ti, ok
}

func TestWalk(t *testing.T) {
	var w tree
	leaves, err := Walk(&w, testEnv(false))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Blocks) != 2 {
		t.Fatalf("count sized %d blocks, want 2", len(w.Blocks))
	}
	got := map[string]Leaf{}
	for _, l := range leaves {
		got[l.Name] = l
	}
	for _, tc := range []struct {
		name            string
		shape           []int
		needed, ignored bool
	}{
		{"embed.weight", []int{10, 4}, true, false},
		{"blocks.1.up.weight", []int{8, 4}, true, false},
		{"blocks.1.down.weight", []int{4, 8}, true, false},
		{"blocks.0.down.bias", []int{4}, false, false},
		{"head.weight", []int{10, 4}, false, true},
	} {
		l, ok := got[tc.name]
		if !ok || !slices.Equal(l.Shape, tc.shape) || l.Needed != tc.needed || l.Ignored != tc.ignored {
			t.Errorf("%s: got %+v (present %v), want shape %v needed %v ignored %v", tc.name, l, ok, tc.shape, tc.needed, tc.ignored)
		}
	}
	if len(leaves) != 1+2*4+1 {
		t.Errorf("%d leaves, want 10", len(leaves))
	}
	x := 7
	got["blocks.1.up.weight"].Set(&x)
	if w.Blocks[1].Up.W != &x {
		t.Error("Set did not bind the field")
	}
}

func TestWalkBadTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		root any
		want string
	}{
		{"unknown dim", &struct {
			A *int `hf:"a" shape:"nope"`
		}{}, `unknown dimension "nope"`},
		{"unknown condition", &struct {
			A *int `hf:"a" when:"nope"`
		}{}, `unknown condition "nope"`},
		{"bad dims", &struct {
			A linear `hf:"a" dims:"out"`
		}{}, "bad dims tag"},
		{"bad type", &struct {
			A int `hf:"a"`
		}{}, "cannot carry an hf tag"},
	} {
		if _, err := Walk(tc.root, testEnv(true)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	f32 := func(s ...int) safetensors.TensorInfo { return safetensors.TensorInfo{DType: safetensors.F32, Shape: s} }
	good := fakeTensors{"p.embed.weight": f32(10, 4), "p.head.weight": f32(10, 4), "p.buffer": {DType: safetensors.I64}}
	for i := range 2 {
		b := "p.blocks." + string(rune('0'+i))
		good[b+".up.weight"], good[b+".down.weight"] = f32(8, 4), f32(4, 8)
	}
	env := testEnv(false)
	leaves, _ := Walk(&tree{}, env)
	ck := Checkpoint{Tensors: good, Source: "m.safetensors", Prefix: "p.", Model: "Tiny", Ignore: func(n string) bool { return n == "buffer" }}
	if err := ck.Check(leaves, env); err != nil {
		t.Fatalf("good checkpoint: %v", err)
	}
	if err := ck.CheckLayers("blocks.", 2); err != nil {
		t.Fatal(err)
	}
	if err := ck.CheckLayers("blocks.", 3); err == nil || !strings.Contains(err.Error(), "num_hidden_layers = 3, the weights hold 2 layers (p.blocks.0 … p.blocks.1)") {
		t.Errorf("CheckLayers: %v", err)
	}
	if err := ck.CheckLayers("layers.", 1); err == nil || !strings.Contains(err.Error(), "the weights hold 0 layers (no p.layers.N.* tensor)") {
		t.Errorf("CheckLayers without layers: %v", err)
	}

	bad := fakeTensors{}
	for k, v := range good {
		bad[k] = v
	}
	delete(bad, "p.blocks.1.up.weight")
	bad["p.blocks.0.down.weight"] = f32(8, 4)
	bad["p.embed.weight"] = safetensors.TensorInfo{DType: safetensors.I64, Shape: []int{10, 4}}
	bad["p.blocks.0.up.bias"] = f32(8)
	bad["extra"] = f32(1)
	err := Checkpoint{Tensors: bad, Source: "m.safetensors", Prefix: "p.", Model: "Tiny"}.Check(leaves, env)
	var be *BindError
	if !errors.As(err, &be) {
		t.Fatalf("want *BindError, got %v", err)
	}
	if !slices.Equal(be.Missing, []string{"p.blocks.1.up.weight"}) || len(be.Misshaped) != 2 ||
		!slices.Equal(be.Unused, []string{"extra", "p.blocks.0.up.bias", "p.buffer"}) {
		t.Errorf("got missing %v, misshaped %v, unused %v", be.Missing, be.Misshaped, be.Unused)
	}
	for _, want := range []string{
		"m.safetensors: missing tensor p.blocks.1.up.weight [intermediate_size, hidden_size]",
		"m.safetensors: tensor p.blocks.0.down.weight has shape [8 4], config.json implies [4 8] [hidden_size, intermediate_size]",
		"m.safetensors: tensor p.embed.weight has dtype I64, want a float type",
		"m.safetensors: unused tensor p.blocks.0.up.bias (not part of a Tiny with this config.json)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestVariableScope(t *testing.T) {
	ctx := context.New()
	for _, tc := range []struct{ base, name, scope, vname string }{
		{context.RootScope, "model.layers.0.mlp.up_proj.weight", "/model/layers/0/mlp/up_proj", "weight"},
		{"/policy", "model.norm.weight", "/policy/model/norm", "weight"},
		{context.RootScope, "bias", "/", "bias"},
	} {
		scope, name := VariableScope(tc.base, tc.name)
		if scope != tc.scope || name != tc.vname {
			t.Errorf("VariableScope(%q, %q) = %q, %q", tc.base, tc.name, scope, name)
		}
		v := ctx.InAbsPath(scope).VariableWithValue(name, float32(1))
		if hf, ok := HFName(tc.base, v); !ok || hf != tc.name {
			t.Errorf("HFName(%s) = %q, %v, want %q", v.ScopeAndName(), hf, ok, tc.name)
		}
	}
}
