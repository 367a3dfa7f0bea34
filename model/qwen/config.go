package qwen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cas-engine/cas/internal/loadfile"
)

// Config is a Hugging Face config.json of a Qwen2/Qwen2.5/Qwen3 causal LM.
// The JSON tags are Hugging Face's; defaults are filled in one place
// (applyDefaults) and the invariants checked in Validate.
type Config struct {
	Architectures         []string `json:"architectures"`
	ModelType             string   `json:"model_type"`
	VocabSize             int      `json:"vocab_size"`
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim"`
	HiddenAct             string   `json:"hidden_act"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	RopeTheta             float64  `json:"rope_theta"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	AttentionBias         bool     `json:"attention_bias"`
	UseSlidingWindow      bool     `json:"use_sliding_window"`
	TorchDType            string   `json:"torch_dtype"`
	// RopeScaling must be null: YaRN / dynamic scaling are not implemented.
	RopeScaling json.RawMessage `json:"rope_scaling,omitempty"`
	// RopeParameters is how transformers ≥ 5 saves the rotary settings
	// ({"rope_theta": …, "rope_type": "default"}) instead of rope_theta and
	// rope_scaling; only the default type is implemented.
	RopeParameters json.RawMessage `json:"rope_parameters,omitempty"`
	// BOSTokenID and EOSTokenID accept null, an integer or a list of
	// integers, as Hugging Face writes them.
	BOSTokenID TokenIDs `json:"bos_token_id"`
	EOSTokenID TokenIDs `json:"eos_token_id"`
}

// TokenIDs is a config field that Hugging Face writes as null, one integer or
// a list of integers.
type TokenIDs []int

// UnmarshalJSON accepts null, an integer or a list of integers.
func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*t = nil
		return nil
	}
	var one int
	if err := json.Unmarshal(b, &one); err == nil {
		*t = TokenIDs{one}
		return nil
	}
	var many []int
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("token id: want null, an integer or a list of integers, got %s", truncate(string(b), 40))
	}
	*t = many
	return nil
}

// ParseConfig decodes a config.json, fills the defaults and validates it.
func ParseConfig(data []byte) (*Config, error) {
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// LoadConfig reads dir/config.json and, when present, merges the EOS ids of
// dir/generation_config.json (Qwen2.5-Instruct stops on both <|im_end|> and
// <|endoftext|>; config.json lists only one of them).
func LoadConfig(dir string) (*Config, error) {
	cfg, err := loadfile.Parse(filepath.Join(dir, "config.json"), ParseConfig)
	if err != nil {
		return nil, err
	}
	genPath := filepath.Join(dir, "generation_config.json")
	if gen, err := os.ReadFile(genPath); err == nil {
		var g struct {
			EOSTokenID TokenIDs `json:"eos_token_id"`
		}
		if err := json.Unmarshal(gen, &g); err != nil {
			return nil, fmt.Errorf("load %s: %w", genPath, err)
		}
		for _, id := range g.EOSTokenID {
			if id < 0 || id >= cfg.VocabSize {
				return nil, fmt.Errorf("load %s: eos_token_id %d outside the vocabulary [0, %d)", genPath, id, cfg.VocabSize)
			}
			if !containsInt(cfg.EOSTokenID, id) {
				cfg.EOSTokenID = append(cfg.EOSTokenID, id)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("load %s: %w", genPath, err)
	}
	return cfg, nil
}

// applyDefaults fills the fields Hugging Face lets a config.json omit, with
// the defaults of Qwen2Config / Qwen3Config.
func (c *Config) applyDefaults() {
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if c.HiddenAct == "" {
		c.HiddenAct = "silu"
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = c.ropeParameters().RopeTheta
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.MaxPositionEmbeddings == 0 {
		c.MaxPositionEmbeddings = 32768
	}
	if c.ModelType == "" {
		if a, ok := lookupArchitecture(c.Architectures); ok {
			c.ModelType = a.modelType
		}
	}
}

// maxDim bounds every size in a config, so that a corrupt or hostile
// config.json cannot make the loader allocate absurd amounts of memory
// before the weights contradict it.
const maxDim = 1 << 24

// Validate checks the invariants the forward pass relies on.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, ok := lookupArchitecture(c.Architectures); !ok {
		bad("unknown architecture %q (supported: %s)", c.Architectures, strings.Join(architectureNames(), ", "))
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"head_dim", c.HeadDim},
	} {
		if f.v <= 0 {
			bad("%s = %d must be positive", f.name, f.v)
		} else if f.v > maxDim {
			bad("%s = %d is implausibly large (limit %d)", f.name, f.v, maxDim)
		}
	}
	if c.NumAttentionHeads > 0 && c.NumKeyValueHeads > 0 && c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		bad("num_key_value_heads = %d must divide num_attention_heads = %d", c.NumKeyValueHeads, c.NumAttentionHeads)
	}
	if c.HeadDim%2 != 0 {
		bad("head_dim = %d must be even for rotary embeddings", c.HeadDim)
	}
	if c.HiddenAct != "silu" {
		bad("hidden_act %q is not supported (want silu)", c.HiddenAct)
	}
	if !(c.RMSNormEps > 0) {
		bad("rms_norm_eps = %g must be positive", c.RMSNormEps)
	}
	if !(c.RopeTheta > 0) {
		bad("rope_theta = %g must be positive", c.RopeTheta)
	}
	if rp := c.ropeParameters(); rp.err != nil {
		bad("rope_parameters: %v", rp.err)
	} else if rp.RopeType != "" && rp.RopeType != "default" {
		bad("rope_parameters.rope_type %q is not supported (only default)", rp.RopeType)
	} else if rp.RopeTheta != 0 && c.RopeTheta != rp.RopeTheta {
		bad("rope_theta %g disagrees with rope_parameters.rope_theta %g", c.RopeTheta, rp.RopeTheta)
	}
	if s := bytes.TrimSpace(c.RopeScaling); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		bad("rope_scaling %s is not supported (only null)", truncate(string(s), 60))
	}
	if c.UseSlidingWindow {
		bad("use_sliding_window = true is not supported")
	}
	for _, id := range append(append([]int(nil), c.EOSTokenID...), c.BOSTokenID...) {
		if id < 0 || id >= c.VocabSize {
			bad("token id %d outside the vocabulary [0, %d)", id, c.VocabSize)
		}
	}
	return errors.Join(errs...)
}

// KVGroups returns how many query heads share one key/value head.
func (c *Config) KVGroups() int { return c.NumAttentionHeads / c.NumKeyValueHeads }

// NumParameters returns the number of weights the model holds.
func (c *Config) NumParameters() int64 {
	n := int64(0)
	for _, s := range weightSpecs(c) {
		if s.Needed {
			n += int64(product(s.Shape))
		}
	}
	return n
}

func (c *Config) arch() architecture {
	a, _ := lookupArchitecture(c.Architectures)
	return a
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func product(dims []int) int {
	p := 1
	for _, d := range dims {
		p *= d
	}
	return p
}

// ropeParams is transformers ≥ 5's rope_parameters object.
type ropeParams struct {
	RopeTheta float64 `json:"rope_theta"`
	RopeType  string  `json:"rope_type"`
	err       error
}

// ropeParameters parses c.RopeParameters (absent or null: zero values).
func (c *Config) ropeParameters() ropeParams {
	var rp ropeParams
	if s := bytes.TrimSpace(c.RopeParameters); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		rp.err = json.Unmarshal(s, &rp)
	}
	return rp
}
