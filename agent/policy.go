package agent

import (
	"github.com/cas-engine/cas/model/qwen"
)

// Tokenizer is what a rollout needs from a tokenizer: *tokenizer.Tokenizer
// implements it. Decode must be prefix-consistent (the decoding of ids[:i]
// is a prefix of the decoding of ids, up to a trailing incomplete UTF-8
// character), as byte-level BPE decoding is; the answer span relies on it.
type Tokenizer interface {
	Encode(text string) []int
	Decode(ids []int, skipSpecial bool) string
	// Family is the chat-template family ("qwen3" or "qwen2.5"; "" unknown).
	Family() string
}

// Session is a batch of token sequences sharing a KV cache: Append prefills
// only the new tokens of each row, Generate continues the rows marked
// active. *qwen.Session implements it.
type Session interface {
	Append(tokens [][]int) error
	Generate(opts qwen.GenerateOptions, active []bool) ([]qwen.Result, error)
	Close()
}

// Policy is the language model that writes the trajectories.
type Policy interface {
	// NewSession starts an empty batch of the given size with room for
	// capacity tokens per row (it may grow); seed drives sampling.
	NewSession(batch, capacity int, seed uint64) (Session, error)
	// MaxContext is the longest sequence, prompt plus response, the model
	// accepts (max_position_embeddings).
	MaxContext() int
	// VocabSize bounds the token ids the model accepts.
	VocabSize() int
}

// QwenPolicy runs rollouts on a Qwen2/Qwen3 model with its KV-cache
// generator.
type QwenPolicy struct{ Model *qwen.Model }

// NewSession implements Policy.
func (p QwenPolicy) NewSession(batch, capacity int, seed uint64) (Session, error) {
	s, err := p.Model.NewSession(batch, capacity, seed)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// MaxContext implements Policy.
func (p QwenPolicy) MaxContext() int { return p.Model.Config.MaxPositionEmbeddings }

// VocabSize implements Policy.
func (p QwenPolicy) VocabSize() int { return p.Model.Config.VocabSize }
