package qwen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/model/hfbind"
	"github.com/cas-engine/cas/model/safetensors"
)

// writeModelDir writes config.json and model.safetensors built from the
// golden qwen2-tiny tensors after edit has changed the tensor list.
func writeModelDir(t *testing.T, edit func([]safetensors.Tensor) []safetensors.Tensor) string {
	t.Helper()
	src := filepath.Dir(sharedtest.Path(t, "golden", "qwen2-tiny", "config.json"))
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []safetensors.Tensor
	for _, n := range f.Names() {
		v, shape, err := f.Float32(n)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.F32Tensor(n, shape, v))
	}
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), edit(ts), nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStrictBinding: every missing, unused, mis-shaped or non-float tensor
// is reported at once, by Hugging Face name and file.
func TestStrictBinding(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func([]safetensors.Tensor) []safetensors.Tensor
		want []string // substrings of the error; nil means it loads
	}{
		{"unchanged", func(ts []safetensors.Tensor) []safetensors.Tensor { return ts }, nil},
		{"rotary buffer ignored", func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32Tensor("model.layers.0.self_attn.rotary_emb.inv_freq", []int{8}, make([]float32, 8)))
		}, nil},
		{"tied lm_head ignored", func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32Tensor("lm_head.weight", []int{384, 64}, make([]float32, 384*64)))
		}, nil},
		{"all problems at once", func(ts []safetensors.Tensor) []safetensors.Tensor {
			var out []safetensors.Tensor
			for _, x := range ts {
				switch x.Name {
				case "model.layers.1.mlp.up_proj.weight": // dropped
				case "model.layers.0.self_attn.k_proj.weight":
					out = append(out, safetensors.F32Tensor(x.Name, []int{64, 64}, make([]float32, 64*64)))
				case "model.norm.weight":
					out = append(out, safetensors.I64Tensor(x.Name, []int{64}, make([]int64, 64)))
				default:
					out = append(out, x)
				}
			}
			return append(out,
				safetensors.F32Tensor("model.layers.0.self_attn.q_norm.weight", []int{16}, make([]float32, 16)),
				safetensors.F32Tensor("model.layers.7.mlp.up_proj.weight", []int{1}, make([]float32, 1)))
		}, []string{
			"missing tensor model.layers.1.mlp.up_proj.weight",
			"tensor model.layers.0.self_attn.k_proj.weight has shape [64 64], config.json implies [32 64]",
			"num_key_value_heads·head_dim",
			"tensor model.norm.weight has dtype I64",
			"unused tensor model.layers.0.self_attn.q_norm.weight",
			"unused tensor model.layers.7.mlp.up_proj.weight",
			"model.safetensors",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeModelDir(t, tc.edit)
			m, err := Load(dir, backendtest.Shared(t), LoadOptions{})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if m.Config.TieWordEmbeddings != true {
					t.Error("expected tied embeddings")
				}
				return
			}
			if err == nil {
				t.Fatal("loaded a bad checkpoint")
			}
			t.Logf("error:\n%v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
	if _, err := Load(t.TempDir(), backendtest.Shared(t), LoadOptions{}); err == nil {
		t.Error("empty folder loaded")
	}
}

// TestSaveLoadRoundTrip: Save writes Hugging Face names that Load binds
// back to the same logits; HFName inverts the variable scopes.
func TestSaveLoadRoundTrip(t *testing.T) {
	g := loadGolden(t, "qwen3-tiny")
	dir := t.TempDir()
	src := filepath.Dir(sharedtest.Path(t, "golden", "qwen3-tiny", "config.json"))
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := g.model.Save(filepath.Join(dir, "model.safetensors"), safetensors.F32); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(dir, backendtest.Shared(t), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := g.model.Logits(g.ids, g.mask, g.batch, g.seqLen)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m2.Logits(g.ids, g.mask, g.batch, g.seqLen)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := maxAbsDiff(a, b); d != 0 {
		t.Errorf("reloaded model differs by %g", d)
	}
	n := 0
	for v := range m2.Context().IterVariables() {
		name, ok := HFName(m2.Context().Scope(), v)
		scope, vname := hfbind.VariableScope(m2.Context().Scope(), name)
		if !ok || scope != v.Scope() || vname != v.Name() {
			t.Errorf("HFName(%s) = %q, %v does not invert variableScope", v.ScopeAndName(), name, ok)
		}
		n++
	}
	if n != len(weightSpecsNeeded(m2.Config)) {
		t.Errorf("%d variables, want %d", n, len(weightSpecsNeeded(m2.Config)))
	}
}

func weightSpecsNeeded(c *Config) []hfbind.Leaf {
	var out []hfbind.Leaf
	for _, s := range weightSpecs(c) {
		if s.Needed {
			out = append(out, s)
		}
	}
	return out
}
