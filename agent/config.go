package agent

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/textenum"
)

// Mode is what a rollout does: the search agent, or one of the two
// baselines the paper's tables compare against.
type Mode int

const (
	// ModeAgent is the search agent: think, search, read, answer.
	ModeAgent Mode = iota
	// ModeDirect answers from the model's own knowledge, without retrieval.
	ModeDirect
	// ModeRAG retrieves once with the question and answers from the
	// documents placed in the prompt.
	ModeRAG
)

var modeNames = textenum.Names[Mode]{Type: "Mode", Kind: "mode", Names: []string{"agent", "direct", "rag"}, Aliases: map[string]Mode{"": ModeAgent}}

// String gives the flag spelling of the mode.
func (m Mode) String() string { return modeNames.String(m) }

// MarshalText encodes the value by its flag spelling.
func (m Mode) MarshalText() ([]byte, error) { return modeNames.Marshal(m) }

// UnmarshalText decodes a flag spelling (ParseMode).
func (m *Mode) UnmarshalText(b []byte) error { return modeNames.Unmarshal(b, m) }

// ParseMode reads a mode flag: agent, direct or rag.
func ParseMode(s string) (Mode, error) { return modeNames.Parse(s) }

// TurnRule says how the turn limit MaxTurns is counted (METHOD.md, "Turn
// limit"). The paper's "a maximum of 4 assistant turns" has two readings,
// and with MaxTurns = 4 they differ by one generation and one search:
//
//	rule    reading of "4 turns"                        generations  searches executed
//	paper   4 assistant–search rounds, then an answer   ≤ 5          ≤ 4
//	code    4 assistant generations in all              ≤ 4          ≤ 3
//
// The default (paper) is the paper's §3 wording "at most 4 assistant–search
// rounds" as Search-R1 implements it (max_turns searches, then one final
// generation without search); the official CAS code counts generations.
type TurnRule int

const (
	// TurnsPaper: at most MaxTurns assistant–search rounds, each a
	// generation whose search is executed, then one final generation whose
	// search is not executed (Search-R1's max_turns loop plus its final
	// rollout): up to MaxTurns+1 generations and MaxTurns searches. With
	// MaxTurns = 4, 5 generations and 4 searches can happen.
	TurnsPaper TurnRule = iota
	// TurnsCode: MaxTurns generations in all, and a search in the last one
	// is not executed (the official code): up to MaxTurns−1 searches. With
	// MaxTurns = 4, 4 generations and 3 searches.
	TurnsCode
)

var turnRuleNames = textenum.Names[TurnRule]{Type: "TurnRule", Kind: "turn rule", Names: []string{"paper", "code"},
	Aliases: map[string]TurnRule{"": TurnsPaper, "search-r1": TurnsPaper, "searchr1": TurnsPaper}}

// String gives the flag spelling of the rule.
func (r TurnRule) String() string { return turnRuleNames.String(r) }

// MarshalText encodes the value by its flag spelling.
func (r TurnRule) MarshalText() ([]byte, error) { return turnRuleNames.Marshal(r) }

// UnmarshalText decodes a flag spelling (ParseTurnRule).
func (r *TurnRule) UnmarshalText(b []byte) error { return turnRuleNames.Unmarshal(b, r) }

// ParseTurnRule reads a turn-rule flag: paper (or search-r1) or code.
func ParseTurnRule(s string) (TurnRule, error) { return turnRuleNames.Parse(s) }

// generations is the most generations a trajectory gets under the rule.
func (r TurnRule) generations(maxTurns int) int {
	if r == TurnsCode {
		return maxTurns
	}
	return maxTurns + 1
}

// RolloutConfig holds every setting of a rollout. DefaultRolloutConfig gives
// the paper's. It is recorded as JSON in evaluation reports (without the
// retrieval plumbing); the YAML keys are those of a training run's "rollout:"
// section (train.Config embeds it); fields tagged "-" are set elsewhere: the
// chat family from model.chat_template, the passage selection from the
// "aps:" section and the calibration file, the rest in code.
type RolloutConfig struct {
	Mode Mode `json:"mode" yaml:"-"`
	// Placement splits the prompt into chat turns (default: the code's
	// system + user).
	Placement Placement `json:"placement" yaml:"placement"`
	// ChatFamily overrides the tokenizer's chat-template family ("qwen3",
	// "qwen2.5"); Qwen3 is always rendered with thinking disabled.
	ChatFamily string `json:"chat_family,omitempty" yaml:"-"`
	// Info is the information-block format (code's or Search-R1's).
	Info InfoFormat `json:"info_format" yaml:"info_format"`
	// TurnRule and MaxTurns bound the generations (paper: 4 rounds).
	TurnRule TurnRule `json:"turn_rule" yaml:"turn_rule"`
	MaxTurns int      `json:"max_turns" yaml:"max_turns"`

	// Candidates is the number N of passages retrieved per search when APS
	// is on (code: 5 at training time).
	Candidates int `json:"candidates,omitempty" yaml:"-"`
	// APS, when not nil, keeps the APS.Keep(scores) best candidates (APS
	// truncation by a calibration, decided on its log-scale threshold); nil
	// keeps the TopK best (the −APS ablation: 3).
	APS  *conformal.Calibration `json:"aps,omitempty" yaml:"-"`
	TopK int                    `json:"topk,omitempty" yaml:"-"`

	// MaxObsTokens cuts every appended observation (information block or
	// invalid-action message) to its first tokens (Search-R1: 500). A cut
	// information block keeps its closing </information> unless ObsCutBlind
	// (Search-R1's plain cut, which loses it and so makes the response
	// invalid under Eq. 5).
	MaxObsTokens int  `json:"max_obs_tokens" yaml:"max_obs_tokens"`
	ObsCutBlind  bool `json:"obs_cut_blind,omitempty" yaml:"-"`
	// MaxTurnTokens bounds the tokens of one generation.
	MaxTurnTokens int `json:"max_turn_tokens" yaml:"max_turn_tokens"`
	// MaxPromptTokens rejects longer prompts (code: 4096).
	MaxPromptTokens int `json:"max_prompt_tokens" yaml:"max_prompt_tokens"`
	// MaxResponseTokens bounds everything after the prompt, generated and
	// appended tokens together (code: 3000); the model's context bounds it
	// too.
	MaxResponseTokens int `json:"max_response_tokens" yaml:"max_response_tokens"`

	// Sampling: Temperature 0 is greedy (evaluation); training samples at 1.
	// The recorded log-probs are always at temperature 1, unfiltered.
	Temperature float64 `json:"temperature" yaml:"temperature"`
	TopP        float64 `json:"top_p" yaml:"top_p"`
	SampleTopK  int     `json:"sample_top_k" yaml:"top_k"`

	// RetrieveAttempts bounds the tries of one batched retrieval call, each
	// limited to RetrieveTimeout, with RetryBackoff doubling between them.
	RetrieveAttempts int           `json:"-" yaml:"retrieve_attempts"`
	RetrieveTimeout  time.Duration `json:"-" yaml:"retrieve_timeout"`
	RetryBackoff     time.Duration `json:"-" yaml:"-"`

	// CompactBelow: when the running rows fall to this fraction of the
	// session's batch or less, they move to a fresh session holding only
	// them (their sequences are prefilled again), so finished trajectories
	// stop costing compute. 0 never compacts.
	CompactBelow float64 `json:"-" yaml:"-"`

	// Reward is the reward table of Eq. 5.
	Reward RewardConfig `json:"reward" yaml:",inline"`
}

// DefaultRolloutConfig is the paper's setting: the agent with the code's
// prompt placement and information format, 4 rounds counted as the paper
// does, fixed top-3 retrieval until an APS threshold is set (SetAPS), 5
// candidates under APS, observations cut to 500 tokens, prompts ≤ 4096 and
// responses ≤ 3000 tokens, sampling at temperature 1.
func DefaultRolloutConfig() RolloutConfig {
	return RolloutConfig{
		Mode:              ModeAgent,
		Placement:         PlacementSystemUser,
		Info:              InfoCode,
		TurnRule:          TurnsPaper,
		MaxTurns:          4,
		Candidates:        5,
		TopK:              3,
		MaxObsTokens:      500,
		MaxTurnTokens:     500,
		MaxPromptTokens:   4096,
		MaxResponseTokens: 3000,
		Temperature:       1,
		RetrieveAttempts:  3,
		RetrieveTimeout:   120 * time.Second,
		RetryBackoff:      200 * time.Millisecond,
		CompactBelow:      0.5,
		Reward:            DefaultRewardConfig(),
	}
}

// Validate reports a setting that cannot be used.
func (c RolloutConfig) Validate() error { return c.validate(c.APS != nil) }

// ValidateForAPS is Validate for a configuration whose APS calibration is
// set later (SetCalibration, once the calibration file is read): with aps
// it checks Candidates instead of TopK, and not the calibration itself.
func (c RolloutConfig) ValidateForAPS(aps bool) error { return c.validate(aps) }

func (c RolloutConfig) validate(aps bool) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Mode < ModeAgent || c.Mode > ModeRAG {
		bad("unknown mode %d", int(c.Mode))
	}
	if c.MaxTurns < 1 {
		bad("max turns %d < 1", c.MaxTurns)
	}
	if c.TurnRule == TurnsCode && c.MaxTurns < 2 && c.Mode == ModeAgent {
		bad("max turns %d with the code's counting leaves no search (want ≥ 2)", c.MaxTurns)
	}
	if aps {
		if c.APS != nil {
			if err := c.APS.Validate(); err != nil {
				bad("%v", err)
			}
			if math.IsNaN(float64(c.APS.QHatLog)) {
				bad("aps: q̂ is NaN")
			}
		}
		if c.Candidates < 1 {
			bad("candidates %d < 1", c.Candidates)
		}
	} else if c.TopK < 1 {
		bad("top-k %d < 1", c.TopK)
	}
	if c.MaxObsTokens < 1 {
		bad("max observation tokens %d < 1", c.MaxObsTokens)
	}
	if c.MaxTurnTokens < 1 {
		bad("max turn tokens %d < 1", c.MaxTurnTokens)
	}
	if c.MaxPromptTokens < 1 {
		bad("max prompt tokens %d < 1", c.MaxPromptTokens)
	}
	if c.MaxResponseTokens < 1 {
		bad("max response tokens %d < 1", c.MaxResponseTokens)
	}
	if c.Temperature < 0 || math.IsNaN(c.Temperature) {
		bad("temperature %v < 0", c.Temperature)
	}
	if c.TopP < 0 || c.TopP > 1 || math.IsNaN(c.TopP) {
		bad("top-p %v outside [0, 1]", c.TopP)
	}
	if c.SampleTopK < 0 {
		bad("sampling top-k %d < 0", c.SampleTopK)
	}
	if c.RetrieveAttempts < 1 {
		bad("retrieve attempts %d < 1", c.RetrieveAttempts)
	}
	if c.RetrieveTimeout < 0 || c.RetryBackoff < 0 {
		bad("negative retrieve timeout or backoff")
	}
	if c.CompactBelow < 0 || c.CompactBelow > 1 {
		bad("compact-below %v outside [0, 1]", c.CompactBelow)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rollout config: %w", err)
	}
	return nil
}

// retrieveK is the number of passages a retrieval call asks for.
func (c RolloutConfig) retrieveK() int {
	if c.APS != nil {
		return c.Candidates
	}
	return c.TopK
}
