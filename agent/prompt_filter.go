package agent

import (
	"fmt"

	"github.com/cas-engine/cas/model/tokenizer"
)

// PromptTokens encodes a question's agent prompt (ChatPrompt; family ""
// means the tokenizer's): the one prompt encoder of the rollout (ModeAgent),
// the prompt filter, the ACI bootstrap and the warm start.
func PromptTokens(tok Tokenizer, family string, p Placement, question string) ([]int, error) {
	if family == "" {
		family = tok.Family()
	}
	msgs, err := PromptMessages(question, p)
	if err != nil {
		return nil, err
	}
	return encodePrompt(tok, family, msgs)
}

// ChatPrompt renders a question's agent prompt as the model reads it:
// PromptMessages with the placement, in the chat template of family with
// the generation prompt (Qwen3 with thinking disabled).
func ChatPrompt(family string, p Placement, question string) (string, error) {
	msgs, err := PromptMessages(question, p)
	if err != nil {
		return "", err
	}
	return renderPrompt(family, msgs)
}

// renderPrompt renders messages with the family's chat template and the
// generation prompt (Qwen3 with thinking disabled).
func renderPrompt(family string, msgs []tokenizer.Message) (string, error) {
	no := false
	return tokenizer.RenderChat(msgs, tokenizer.ChatOptions{Family: family, AddGenerationPrompt: true, EnableThinking: &no})
}

// encodePrompt renders messages (renderPrompt) and encodes them: the prompt
// of every rollout.
func encodePrompt(tok Tokenizer, family string, msgs []tokenizer.Message) ([]int, error) {
	text, err := renderPrompt(family, msgs)
	if err != nil {
		return nil, err
	}
	return tok.Encode(text), nil
}

// FilterLongPrompts returns the indices of the questions whose agent prompt
// fits cfg.MaxPromptTokens, and the number dropped: the paper's training
// data filter (verl's filter_overlong_prompts), applied before training so
// that one over-long prompt never fails a whole rollout (the rollout itself
// still refuses one).
func FilterLongPrompts(tok Tokenizer, cfg RolloutConfig, questions []string) (kept []int, dropped int, err error) {
	for i, q := range questions {
		ids, err := PromptTokens(tok, cfg.ChatFamily, cfg.Placement, q)
		if err != nil {
			return nil, 0, fmt.Errorf("prompt %d: %w", i, err)
		}
		if len(ids) > cfg.MaxPromptTokens {
			dropped++
			continue
		}
		kept = append(kept, i)
	}
	return kept, dropped, nil
}
