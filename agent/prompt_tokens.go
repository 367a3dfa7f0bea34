package agent

import "fmt"

// RolloutPromptTokens renders and encodes the prompt that a rollout of cfg.Mode
// gives question — the agent prompt (paper Table 5) or the direct-answer
// baseline's — with the chat template of cfg.ChatFamily (else the
// tokenizer's family): exactly the ids a Runner feeds the policy before
// its first generation, without running a rollout. The RAG baseline's
// prompt depends on a retrieval and is refused.
func RolloutPromptTokens(tok Tokenizer, cfg RolloutConfig, question string) ([]int, error) {
	switch cfg.Mode {
	case ModeAgent:
		return PromptTokens(tok, cfg.ChatFamily, cfg.Placement, question)
	case ModeDirect:
		family := cfg.ChatFamily
		if family == "" {
			family = tok.Family()
		}
		msgs, err := baselineMessages(question, "", cfg.Placement)
		if err != nil {
			return nil, err
		}
		return encodePrompt(tok, family, msgs)
	}
	return nil, fmt.Errorf("prompt tokens: mode %v renders its prompt from a retrieval", cfg.Mode)
}
