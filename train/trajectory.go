package train

import (
	"fmt"
	"math"
)

// Trajectory is one sampled search-agent episode as the learner consumes it:
// the rendered prompt followed by everything the agent appended — its own
// generated turns and the retrieved <information> blocks.
type Trajectory struct {
	// Group identifies the prompt: the G trajectories of one prompt share it
	// (GRPO's group, verl's uid).
	Group int `json:"group"`
	// Tokens is the prompt followed by the response.
	Tokens []int `json:"tokens"`
	// PromptLen is the number of prompt tokens at the start of Tokens.
	PromptLen int `json:"prompt_len"`
	// LossMask has one entry per response token (Tokens[PromptLen:]): true on
	// tokens the policy generated, false on retrieved (information-block)
	// tokens. Prompt tokens are never in the loss.
	LossMask []bool `json:"loss_mask"`
	// OldLogProbs are log π_old of each response token under the rollout
	// policy, as sampled. They may be nil when the learner recomputes them
	// (LearnerConfig.RecomputeOldLogProbs); entries where LossMask is false
	// are ignored.
	OldLogProbs []float32 `json:"old_logprobs,omitempty"`
	// AnswerSpan is the response-token range [start, end) of the content of
	// the first <answer>…</answer>; start ≥ end means there is none.
	AnswerSpan [2]int `json:"answer_span"`

	// Reward is the rule reward of the response (paper Eq. 5).
	Reward float64 `json:"reward"`
	// EM and Valid are the reward's exact match and format validity.
	EM    bool `json:"em"`
	Valid bool `json:"valid"`
	// SearchCalls is the number of searches executed, DocsPerSearch the
	// number of passages kept by APS (or fixed k) for each.
	SearchCalls   int   `json:"search_calls"`
	DocsPerSearch []int `json:"docs_per_search,omitempty"`
	// RedundantSearches counts the searches that repeat an earlier query or
	// keep only passages already shown (agent.RedundantSearches).
	RedundantSearches int `json:"redundant_searches,omitempty"`
	// Turns is the number of assistant generations.
	Turns int `json:"turns"`
}

// ResponseLen is the number of response tokens.
func (t *Trajectory) ResponseLen() int { return len(t.Tokens) - t.PromptLen }

// PolicyTokens counts the response tokens inside the loss mask.
func (t *Trajectory) PolicyTokens() int {
	n := 0
	for _, m := range t.LossMask {
		if m {
			n++
		}
	}
	return n
}

// validate checks the trajectory's internal consistency against a
// vocabulary size; needOld says whether OldLogProbs must be present.
func (t *Trajectory) validate(vocab int, needOld bool) error {
	switch {
	case t.PromptLen < 1:
		return fmt.Errorf("prompt length %d < 1", t.PromptLen)
	case len(t.Tokens) < t.PromptLen:
		return fmt.Errorf("%d tokens, fewer than the prompt's %d", len(t.Tokens), t.PromptLen)
	case len(t.LossMask) != t.ResponseLen():
		return fmt.Errorf("loss mask has %d entries for %d response tokens", len(t.LossMask), t.ResponseLen())
	case needOld && len(t.OldLogProbs) != t.ResponseLen():
		return fmt.Errorf("%d old log-probs for %d response tokens", len(t.OldLogProbs), t.ResponseLen())
	case math.IsNaN(t.Reward) || math.IsInf(t.Reward, 0):
		return fmt.Errorf("reward is %v", t.Reward)
	}
	for i, id := range t.Tokens {
		if id < 0 || id >= vocab {
			return fmt.Errorf("token %d: id %d outside the vocabulary [0, %d)", i, id, vocab)
		}
	}
	return nil
}
