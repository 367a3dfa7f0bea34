package demo

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/backends"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/safetensors"
)

// ModelConfig sizes the tiny Qwen3-architecture policy of the demo.
type ModelConfig struct {
	Hidden       int `json:"hidden"`
	Layers       int `json:"layers"`
	Heads        int `json:"heads"`
	KVHeads      int `json:"kv_heads"`
	HeadDim      int `json:"head_dim"`
	Intermediate int `json:"intermediate"`
	// MaxPositions is max_position_embeddings: the longest prompt plus
	// response the policy accepts.
	MaxPositions int `json:"max_positions"`
}

// Validate checks the sizes.
func (c ModelConfig) Validate() error {
	if c.Hidden < 1 || c.Layers < 1 || c.Heads < 1 || c.KVHeads < 1 || c.HeadDim < 2 || c.Intermediate < 1 || c.MaxPositions < 16 {
		return fmt.Errorf("model: every size must be positive (hidden %d, layers %d, heads %d, kv heads %d, head dim %d, intermediate %d, positions %d)",
			c.Hidden, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.Intermediate, c.MaxPositions)
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("model: heads %d not a multiple of kv heads %d", c.Heads, c.KVHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("model: head dim %d must be even (rotary embedding)", c.HeadDim)
	}
	return nil
}

// QwenConfig is the Hugging Face config.json of the policy for a vocabulary
// of vocab ids whose end-of-message token is eos: a Qwen3ForCausalLM (per-head
// q/k RMSNorm, no biases) with tied embeddings, as the small Qwen3 models
// have.
func (c ModelConfig) QwenConfig(vocab, eos int) (*qwen.Config, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(map[string]any{
		"architectures":           []string{"Qwen3ForCausalLM"},
		"model_type":              "qwen3",
		"vocab_size":              vocab,
		"hidden_size":             c.Hidden,
		"intermediate_size":       c.Intermediate,
		"num_hidden_layers":       c.Layers,
		"num_attention_heads":     c.Heads,
		"num_key_value_heads":     c.KVHeads,
		"head_dim":                c.HeadDim,
		"hidden_act":              "silu",
		"max_position_embeddings": c.MaxPositions,
		"rms_norm_eps":            1e-6,
		"rope_theta":              10000.0,
		"tie_word_embeddings":     true,
		"attention_bias":          false,
		"use_sliding_window":      false,
		"torch_dtype":             "float32",
		"bos_token_id":            nil,
		"eos_token_id":            eos,
	})
	if err != nil {
		return nil, err
	}
	return qwen.ParseConfig(raw)
}

// Files of a model folder written by SaveModelFolder.
const (
	configFile     = "config.json"
	genConfigFile  = "generation_config.json"
	weightsFile    = "model.safetensors"
	tokenizerFile  = "tokenizer.json"
	folderComplete = ".complete"
)

// SaveModelFolder writes m as a Hugging Face model folder that qwen.Load
// and the trainer read: config.json, generation_config.json (the EOS id),
// model.safetensors (F32) and a copy of the tokenizer. The folder is built
// under a temporary name and committed with atomicfile.Dir, so dir is
// either absent or complete (a kill during the replacement leaves the old
// or the new folder complete beside it).
func SaveModelFolder(dir string, m *qwen.Model, tokenizerPath string) error {
	d, err := atomicfile.CreateDir(dir)
	if err != nil {
		return err
	}
	if err := writeModelFolder(d.Path(), m, tokenizerPath); err != nil {
		d.Abort()
		return err
	}
	return d.Commit()
}

func writeModelFolder(tmp string, m *qwen.Model, tokenizerPath string) error {
	if err := m.Save(filepath.Join(tmp, weightsFile), safetensors.F32); err != nil {
		return err
	}
	cfg, err := json.MarshalIndent(m.Config, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(tmp, configFile), append(cfg, '\n')); err != nil {
		return err
	}
	gen, err := json.Marshal(map[string]any{"eos_token_id": []int(m.Config.EOSTokenID)})
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(tmp, genConfigFile), append(gen, '\n')); err != nil {
		return err
	}
	return atomicfile.Copy(tokenizerPath, filepath.Join(tmp, tokenizerFile))
}

// LoadModelFolder reads a folder written by SaveModelFolder (or a trainer
// checkpoint) onto backend b.
func LoadModelFolder(dir string, b backends.Backend) (*qwen.Model, error) {
	m, err := qwen.Load(dir, b, qwen.LoadOptions{})
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", dir, err)
	}
	return m, nil
}

// writeFile writes b to path atomically (temporary file, sync, rename).
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b)
}
