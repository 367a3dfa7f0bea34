package agent

import (
	"fmt"

	"github.com/cas-engine/cas/internal/textenum"
	"github.com/cas-engine/cas/model/tokenizer"
)

// QwenSystemPrompt is Qwen2.5's default system prompt and the first two
// sentences of the paper's prompt (Table 5).
const QwenSystemPrompt = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// Instruction is the task part of the paper's prompt (Table 5), verbatim; the
// question follows it after "\nQuestion: ".
const Instruction = "Answer the given question. " +
	"You must conduct reasoning inside <think> and </think> first every time you get new information. " +
	"After reasoning, if you find you lack some knowledge, you can call a search engine by <search>query</search> " +
	"and it will return the top searched results between <information> and </information>. " +
	"You can search as many times as you want. " +
	"If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, " +
	"without detailed illustrations. For example, <answer> Beijing </answer>."

// PromptText is the paper's whole prompt (Table 5) for one question:
//
//	QwenSystemPrompt + " " + Instruction + "\nQuestion: " + question
func PromptText(question string) string {
	return QwenSystemPrompt + " " + userPrompt(question)
}

func userPrompt(question string) string {
	return Instruction + "\nQuestion: " + question
}

// Placement says how the prompt is split into chat turns.
type Placement int

const (
	// PlacementSystemUser is the official code's split (the default): the
	// first two sentences are the system turn, the rest the user turn. The
	// model sees the whole Table 5 text with every chat template.
	PlacementSystemUser Placement = iota
	// PlacementUserOnly is Search-R1's: only a user turn; Qwen2.5's template
	// then adds its default system prompt (the same two sentences), while
	// Qwen3's adds none.
	PlacementUserOnly
)

var placementNames = textenum.Names[Placement]{Type: "Placement", Kind: "prompt placement", Names: []string{"system-user", "user"},
	Aliases: map[string]Placement{"": PlacementSystemUser, "code": PlacementSystemUser, "user-only": PlacementUserOnly, "search-r1": PlacementUserOnly, "searchr1": PlacementUserOnly}}

// String gives the flag spelling of the placement.
func (p Placement) String() string { return placementNames.String(p) }

// MarshalText encodes the value by its flag spelling.
func (p Placement) MarshalText() ([]byte, error) { return placementNames.Marshal(p) }

// UnmarshalText decodes a flag spelling (ParsePlacement).
func (p *Placement) UnmarshalText(b []byte) error { return placementNames.Unmarshal(b, p) }

// ParsePlacement reads a placement flag: "system-user" (or "code") or "user" (or
// "search-r1").
func ParsePlacement(s string) (Placement, error) { return placementNames.Parse(s) }

// PromptMessages builds the chat turns of the paper's prompt (Table 5) for a
// question, placed as p says, to be rendered with the model's chat template
// and the generation prompt (Qwen3 with thinking disabled). The question is
// used verbatim; a blank one is an error.
func PromptMessages(question string, p Placement) ([]tokenizer.Message, error) {
	if pyStrip(question) == "" {
		return nil, fmt.Errorf("prompt: empty question")
	}
	switch p {
	case PlacementSystemUser:
		return []tokenizer.Message{
			{Role: "system", Content: QwenSystemPrompt},
			{Role: "user", Content: userPrompt(question)},
		}, nil
	case PlacementUserOnly:
		return []tokenizer.Message{{Role: "user", Content: userPrompt(question)}}, nil
	}
	return nil, fmt.Errorf("prompt: unknown placement %d", int(p))
}
