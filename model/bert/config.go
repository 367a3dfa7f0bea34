package bert

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Config is a Hugging Face BertConfig (config.json). Fields absent from the
// file take BertConfig's defaults (DefaultConfig).
type Config struct {
	Architectures         []string `json:"architectures"`
	ModelType             string   `json:"model_type"`
	VocabSize             int      `json:"vocab_size"`
	HiddenSize            int      `json:"hidden_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	IntermediateSize      int      `json:"intermediate_size"`
	HiddenAct             string   `json:"hidden_act"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	TypeVocabSize         int      `json:"type_vocab_size"`
	LayerNormEps          float64  `json:"layer_norm_eps"`
	PadTokenID            int      `json:"pad_token_id"`
	PositionEmbeddingType string   `json:"position_embedding_type"`
}

// DefaultConfig returns BertConfig's defaults (bert-base-uncased sizes).
func DefaultConfig() Config {
	return Config{
		ModelType:             "bert",
		VocabSize:             30522,
		HiddenSize:            768,
		NumHiddenLayers:       12,
		NumAttentionHeads:     12,
		IntermediateSize:      3072,
		HiddenAct:             "gelu",
		MaxPositionEmbeddings: 512,
		TypeVocabSize:         2,
		LayerNormEps:          1e-12,
		PositionEmbeddingType: "absolute",
	}
}

// ParseConfig decodes config.json bytes over DefaultConfig and validates the
// result.
func ParseConfig(js []byte) (Config, error) {
	c := DefaultConfig()
	if err := json.Unmarshal(js, &c); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// LoadConfig reads and validates a config.json.
func LoadConfig(path string) (Config, error) {
	js, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(js)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// HeadDim is HiddenSize / NumAttentionHeads.
func (c Config) HeadDim() int { return c.HiddenSize / c.NumAttentionHeads }

// Validate checks that the configuration describes a BERT encoder this
// package implements, reporting every problem at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.ModelType != "bert" {
		bad("model_type %q is not \"bert\"", c.ModelType)
	}
	for _, a := range c.Architectures {
		if !strings.HasPrefix(a, "Bert") {
			bad("architecture %q is not a BERT model (want BertModel)", a)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"intermediate_size", c.IntermediateSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings}, {"type_vocab_size", c.TypeVocabSize},
	} {
		if f.v <= 0 {
			bad("%s must be positive, got %d", f.name, f.v)
		}
	}
	if c.NumAttentionHeads > 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		bad("hidden_size %d is not divisible by num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if c.HiddenAct != "gelu" {
		bad("hidden_act %q unsupported (only the exact erf \"gelu\")", c.HiddenAct)
	}
	if c.PositionEmbeddingType != "absolute" {
		bad("position_embedding_type %q unsupported (only \"absolute\")", c.PositionEmbeddingType)
	}
	if !(c.LayerNormEps > 0) {
		bad("layer_norm_eps must be positive, got %g", c.LayerNormEps)
	}
	if c.PadTokenID < 0 || (c.VocabSize > 0 && c.PadTokenID >= c.VocabSize) {
		bad("pad_token_id %d outside the vocabulary [0, %d)", c.PadTokenID, c.VocabSize)
	}
	return errors.Join(errs...)
}
