package qwen

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const minimalQwen2 = `{"architectures":["Qwen2ForCausalLM"],"vocab_size":100,"hidden_size":32,
"intermediate_size":64,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"eos_token_id":99}`

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		json    string
		wantErr string // substring; empty means valid
		check   func(*Config) bool
	}{
		{"defaults", minimalQwen2, "", func(c *Config) bool {
			return c.HeadDim == 8 && c.RopeTheta == 10000 && c.RMSNormEps == 1e-6 && c.ModelType == "qwen2" &&
				slices.Equal(c.EOSTokenID, []int{99}) && c.KVGroups() == 2
		}},
		{"eos list and explicit head_dim", strings.Replace(minimalQwen2, `"eos_token_id":99`,
			`"eos_token_id":[98,99],"head_dim":16,"architectures":["Qwen3ForCausalLM"]`, 1), "", func(c *Config) bool {
			return c.HeadDim == 16 && slices.Equal(c.EOSTokenID, []int{98, 99}) && c.arch().qkNorm
		}},
		{"null rope_scaling", strings.Replace(minimalQwen2, `}`, `,"rope_scaling":null}`, 1), "", nil},
		{"unknown architecture", strings.Replace(minimalQwen2, "Qwen2ForCausalLM", "LlamaForCausalLM", 1), "unknown architecture", nil},
		{"kv heads do not divide", strings.Replace(minimalQwen2, `"num_key_value_heads":2`, `"num_key_value_heads":3`, 1), "must divide", nil},
		{"odd head_dim", strings.Replace(minimalQwen2, `}`, `,"head_dim":7}`, 1), "even", nil},
		{"negative layers", strings.Replace(minimalQwen2, `"num_hidden_layers":2`, `"num_hidden_layers":-1`, 1), "num_hidden_layers", nil},
		{"rope scaling", strings.Replace(minimalQwen2, `}`, `,"rope_scaling":{"type":"yarn","factor":4}}`, 1), "rope_scaling", nil},
		{"gelu", strings.Replace(minimalQwen2, `}`, `,"hidden_act":"gelu"}`, 1), "hidden_act", nil},
		{"eos outside vocab", strings.Replace(minimalQwen2, `"eos_token_id":99`, `"eos_token_id":100`, 1), "outside the vocabulary", nil},
		{"eos wrong type", strings.Replace(minimalQwen2, `"eos_token_id":99`, `"eos_token_id":"x"`, 1), "token id", nil},
		{"not json", `{"architectures":`, "unexpected end", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseCase(t, tc.json, tc.wantErr)
			if !ok {
				return
			}
			if tc.check != nil && !tc.check(c) {
				t.Errorf("unexpected config %+v", c)
			}
		})
	}
}

func TestLoadConfigMergesGenerationEOS(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(minimalQwen2), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id":[99,97]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.EOSTokenID, []int{99, 97}) {
		t.Errorf("eos %v, want [99 97]", c.EOSTokenID)
	}
	if _, err := LoadConfig(t.TempDir()); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("missing config.json: %v", err)
	}
}

func TestNumParameters(t *testing.T) {
	c, err := ParseConfig([]byte(minimalQwen2))
	if err != nil {
		t.Fatal(err)
	}
	// untied: embed and lm_head 2·100·32, norm 32, per layer: 2 norms 64, q 32·32+32, k,v 2·(16·32+16), o 32·32, mlp 3·64·32.
	perLayer := 64 + 32*32 + 32 + 2*(16*32+16) + 32*32 + 3*64*32
	want := int64(2*100*32 + 32 + 2*perLayer)
	if got := c.NumParameters(); got != want {
		t.Errorf("NumParameters = %d, want %d", got, want)
	}
}

// FuzzParseConfig: arbitrary bytes never panic, and an accepted config
// satisfies Validate and the shape arithmetic the model relies on.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(minimalQwen2))
	f.Add([]byte(`{"architectures":["Qwen3ForCausalLM"],"vocab_size":1,"hidden_size":1,"intermediate_size":1,"num_hidden_layers":1,"num_attention_heads":1,"head_dim":2}`))
	f.Add([]byte(`{"eos_token_id":[1,2,"x"]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
		if c.NumAttentionHeads%c.NumKeyValueHeads != 0 || c.HeadDim%2 != 0 || c.HeadDim <= 0 {
			t.Fatalf("accepted inconsistent config %+v", c)
		}
	})
}

// TestQwen25_3BSize pins the figures the package documentation gives for
// loading Qwen2.5-3B-Instruct: 3.09 B parameters (2.77 B without the tied
// embedding), 12.3 GB in float32, largest tensor 1.2 GB.
func TestQwen25_3BSize(t *testing.T) {
	c, err := ParseConfig([]byte(`{"architectures":["Qwen2ForCausalLM"],"vocab_size":151936,"hidden_size":2048,
"intermediate_size":11008,"num_hidden_layers":36,"num_attention_heads":16,"num_key_value_heads":2,
"tie_word_embeddings":true,"rope_theta":1000000.0,"rms_norm_eps":1e-6,"eos_token_id":151645}`))
	if err != nil {
		t.Fatal(err)
	}
	n := c.NumParameters()
	embed := int64(151936 * 2048)
	if n < 3.08e9 || n > 3.10e9 || n-embed < 2.76e9 || n-embed > 2.78e9 {
		t.Errorf("NumParameters = %d (non-embedding %d), want ≈ 3.09e9 (2.77e9)", n, n-embed)
	}
	if gb := float64(4*n) / 1e9; gb < 12.3 || gb > 12.4 {
		t.Errorf("float32 size %.2f GB, documented 12.3 GB", gb)
	}
	largest := 0
	for _, s := range weightSpecs(c) {
		largest = max(largest, product(s.Shape))
	}
	if gb := float64(4*largest) / 1e9; gb < 1.2 || gb > 1.3 {
		t.Errorf("largest tensor %.2f GB, documented 1.2 GB", gb)
	}
}

// parseCase parses a config.json and checks its error against wantErr
// ("": none); ok is false when the case ends there (an expected error).
func parseCase(t *testing.T, js, wantErr string) (c *Config, ok bool) {
	t.Helper()
	c, err := ParseConfig([]byte(js))
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, true
}
