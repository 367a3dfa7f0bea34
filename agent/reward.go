package agent

import (
	"fmt"
	"strings"

	"github.com/cas-engine/cas/internal/textenum"
)

// The agent's tags. A tag is recognised only in exactly this spelling
// (lowercase, no spaces), as the reference regexes do.
const (
	ThinkOpen        = "<think>"
	ThinkClose       = "</think>"
	SearchOpen       = "<search>"
	SearchClose      = "</search>"
	InformationOpen  = "<information>"
	InformationClose = "</information>"
	AnswerOpen       = "<answer>"
	AnswerClose      = "</answer>"
)

var allTags = [...]string{
	ThinkOpen, ThinkClose, SearchOpen, SearchClose,
	InformationOpen, InformationClose, AnswerOpen, AnswerClose,
}

// ExtractAnswer returns the content of the LAST <answer>…</answer> of the
// response, stripped of surrounding whitespace, and whether there was one.
// Matches are found left to right, non-overlapping and lazy, exactly as
// re.finditer(r"<answer>(.*?)</answer>", response, re.DOTALL): an opening tag
// pairs with the first closing tag after it. This is the prediction that the
// reward (Eq. 5) and the evaluation's EM compare with the gold answers.
//
// response is the generated text only (Search-R1 ran this on prompt +
// response and therefore skipped the prompt's example answer).
func ExtractAnswer(response string) (string, bool) {
	var last string
	found := false
	pos := 0
	for {
		i := strings.Index(response[pos:], AnswerOpen)
		if i < 0 {
			break
		}
		start := pos + i + len(AnswerOpen)
		j := strings.Index(response[start:], AnswerClose)
		if j < 0 {
			break // no later opening tag can be closed either
		}
		last, found = response[start:start+j], true
		pos = start + j + len(AnswerClose)
	}
	return pyStrip(last), found
}

// AnswerSpan returns the byte offsets [start, end) of the raw content of the
// FIRST <answer>…</answer> in text (the first closing tag after the first
// opening tag), and whether there is one. The content is not trimmed: these
// are the characters whose tokens make up the answer span that ACI scores by
// their mean negative log-likelihood (paper Eq. 6); the rollout maps the byte
// span onto token positions.
func AnswerSpan(text string) (start, end int, ok bool) {
	i := strings.Index(text, AnswerOpen)
	if i < 0 {
		return 0, 0, false
	}
	start = i + len(AnswerOpen)
	j := strings.Index(text[start:], AnswerClose)
	if j < 0 {
		return 0, 0, false
	}
	return start, start + j, true
}

// SearchQuery returns the content of the first <search>…</search> in text,
// stripped of surrounding whitespace, and whether there is one
// (re.search(r"<search>(.*?)</search>", text, re.DOTALL)). It is the query a
// search turn sends to the retriever; later searches in the same turn are
// ignored.
func SearchQuery(text string) (string, bool) {
	i := strings.Index(text, SearchOpen)
	if i < 0 {
		return "", false
	}
	start := i + len(SearchOpen)
	j := strings.Index(text[start:], SearchClose)
	if j < 0 {
		return "", false
	}
	return pyStrip(text[start : start+j]), true
}

// Action is what one generated turn asks for.
type Action int

const (
	// ActionInvalid: the turn has neither a closed <search> nor a closed <answer>.
	ActionInvalid Action = iota
	// ActionSearch: the turn's first action is <search>query</search>.
	ActionSearch
	// ActionAnswer: the turn's first action is <answer>…</answer>.
	ActionAnswer
)

// String names the action.
func (a Action) String() string {
	switch a {
	case ActionSearch:
		return "search"
	case ActionAnswer:
		return "answer"
	default:
		return "invalid"
	}
}

// ParseAction classifies one generated turn as Search-R1's
// postprocess_predictions does, with re.search(r"<(search|answer)>(.*?)</\1>",
// turn, re.DOTALL): the leftmost opening tag, <search> or <answer>, that has a
// matching closing tag after it decides the action; its content, stripped,
// is returned (the query or the answer). Neither → ActionInvalid, and the
// rollout appends InvalidActionMessage.
func ParseAction(turn string) (Action, string) {
	searchClose := strings.LastIndex(turn, SearchClose)
	answerClose := strings.LastIndex(turn, AnswerClose)
	pos := 0
	for pos < len(turn) {
		k := strings.IndexByte(turn[pos:], '<')
		if k < 0 {
			break
		}
		p := pos + k
		rest := turn[p:]
		switch {
		case strings.HasPrefix(rest, SearchOpen) && searchClose >= p+len(SearchOpen):
			start := p + len(SearchOpen)
			j := strings.Index(turn[start:], SearchClose)
			return ActionSearch, pyStrip(turn[start : start+j])
		case strings.HasPrefix(rest, AnswerOpen) && answerClose >= p+len(AnswerOpen):
			start := p + len(AnswerOpen)
			j := strings.Index(turn[start:], AnswerClose)
			return ActionAnswer, pyStrip(turn[start : start+j])
		}
		pos = p + 1
	}
	return ActionInvalid, ""
}

// FormatError says why a response breaks the agent's grammar.
type FormatError struct {
	Offset int    // byte offset of the offending tag or text
	Reason string // what was found, in which state
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("invalid format at byte %d: %s", e.Offset, e.Reason)
}

// grammar states, named as in Search-R1's is_valid_sequence.
const (
	stStart         = "start"
	stInThink       = "in_think"
	stAfterThink    = "after_think"
	stInSearch      = "in_search"
	stAfterSearch   = "after_search"
	stInInformation = "in_information"
	stInformation   = "information"
	stInAnswer      = "in_answer"
	stEnd           = "end"
)

// transitions of the grammar automaton: state → tag → next state.
var transitions = map[string]map[string]string{
	stStart:         {ThinkOpen: stInThink},
	stInThink:       {ThinkClose: stAfterThink},
	stAfterThink:    {SearchOpen: stInSearch, AnswerOpen: stInAnswer},
	stInSearch:      {SearchClose: stAfterSearch},
	stAfterSearch:   {InformationOpen: stInInformation},
	stInInformation: {InformationClose: stInformation},
	stInformation:   {ThinkOpen: stInThink},
	stInAnswer:      {AnswerClose: stEnd},
}

// CheckFormat validates the response against the agent's grammar (the
// "valid" of paper Eq. 5):
//
//	response := ws <think>…</think> ws ( <search>…</search> ws <information>…</information> ws <think>…</think> ws )* <answer>…</answer> ws
//
// where ws is whitespace only and the contents (…) may hold any text that is
// not one of the eight tags — so nested tags, a missing </think>, text between
// tags, a second answer or anything after </answer> are all invalid. This is
// Search-R1's is_valid_sequence state machine applied to the response text
// (decoded without chat special tokens). It returns nil when valid and a
// *FormatError otherwise.
func CheckFormat(response string) error {
	state := stStart
	pos := 0 // start of the current content part
	checkContent := func(from, to int) error {
		part := response[from:to]
		if pyStrip(part) == "" {
			return nil
		}
		switch state {
		case stInThink, stInSearch, stInInformation, stInAnswer:
			return nil
		case stEnd:
			return &FormatError{Offset: from, Reason: fmt.Sprintf("unexpected content %q after </answer>", clip(pyStrip(part)))}
		default:
			return &FormatError{Offset: from, Reason: fmt.Sprintf("unexpected content %q between tags (state: %s)", clip(pyStrip(part)), state)}
		}
	}
	for i := 0; i < len(response); {
		k := strings.IndexByte(response[i:], '<')
		if k < 0 {
			break
		}
		p := i + k
		tag := tagAt(response, p)
		if tag == "" {
			i = p + 1
			continue
		}
		if err := checkContent(pos, p); err != nil {
			return err
		}
		next, ok := transitions[state][tag]
		if !ok {
			return &FormatError{Offset: p, Reason: fmt.Sprintf("unexpected tag %s in state %s", tag, state)}
		}
		state = next
		pos = p + len(tag)
		i = pos
	}
	if err := checkContent(pos, len(response)); err != nil {
		return err
	}
	if state != stEnd {
		return &FormatError{Offset: len(response), Reason: fmt.Sprintf("incomplete sequence, ended in state %s", state)}
	}
	return nil
}

// ValidFormat reports whether CheckFormat accepts the response.
func ValidFormat(response string) bool { return CheckFormat(response) == nil }

// tagAt returns the tag starting at byte p, or "".
func tagAt(s string, p int) string {
	for _, t := range allTags {
		if strings.HasPrefix(s[p:], t) {
			return t
		}
	}
	return ""
}

// clip shortens text quoted in error messages.
func clip(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// RewardConfig holds the constants of the reward table (paper Eq. 5).
type RewardConfig struct {
	// Correct is the reward of an exact match in a valid response (1.0).
	Correct float64 `json:"correct" yaml:"-"`
	// FormatScore is γ: a valid response with a wrong answer earns γ, and an
	// exact match in an invalid response earns Correct − γ (γ = 0.2).
	FormatScore float64 `json:"format_score" yaml:"-"`
	// FinalFormatScore is earned by an invalid response that still has an
	// answer, wrong (0.1).
	FinalFormatScore float64 `json:"final_format_score" yaml:"-"`
	// AnswerFrom says where the answer (and "has an answer") is read.
	AnswerFrom AnswerSource `json:"answer_from" yaml:"answer_from"`
}

// AnswerSource says where the reward reads the answer.
type AnswerSource int

const (
	// AnswerFromPolicy (the default) reads it only from the text the policy
	// generated (ScoreGenerated), so a passage quoting
	// "<answer>Paris</answer>" or the invalid-action message's "<answer> and
	// </answer>" earns nothing.
	AnswerFromPolicy AnswerSource = iota
	// AnswerFromText reads it from the whole decoded response, retrieved
	// passages and the invalid-action message included: the official
	// code's extract_solution.
	AnswerFromText
)

var answerSourceNames = textenum.Names[AnswerSource]{Type: "AnswerSource", Kind: "answer source", Names: []string{"policy", "text"}, Aliases: map[string]AnswerSource{"": AnswerFromPolicy}}

// String gives the flag spelling of the source.
func (a AnswerSource) String() string { return answerSourceNames.String(a) }

// MarshalText encodes the value by its flag spelling.
func (a AnswerSource) MarshalText() ([]byte, error) { return answerSourceNames.Marshal(a) }

// UnmarshalText decodes a flag spelling (ParseAnswerSource).
func (a *AnswerSource) UnmarshalText(b []byte) error { return answerSourceNames.Unmarshal(b, a) }

// ParseAnswerSource reads "policy" (or "") or "text".
func ParseAnswerSource(s string) (AnswerSource, error) { return answerSourceNames.Parse(s) }

// DefaultRewardConfig is the paper's and the code's table: 1.0 / 0.8 / 0.2 / 0.1 / 0.
func DefaultRewardConfig() RewardConfig {
	return RewardConfig{Correct: 1.0, FormatScore: 0.2, FinalFormatScore: 0.1}
}

// Outcome is the scored response.
type Outcome struct {
	Reward    float64
	EM        bool   // the extracted answer matches a gold answer
	Valid     bool   // the response follows the grammar (CheckFormat)
	HasAnswer bool   // the response has a closed <answer>…</answer>
	Answer    string // the last answer's content, stripped ("" if none)
}

// Score rewards a response against the gold answers (paper Eq. 5, γ =
// FormatScore; Search-R1's compute_score_em with structure_format_score = γ
// and final_format_score = FinalFormatScore):
//
//	r = Correct       if EM ∧ valid        (1.0)
//	    Correct − γ   if EM ∧ ¬valid       (0.8)
//	    γ             if ¬EM ∧ valid       (0.2)
//	    FinalFormat   if ¬EM ∧ ¬valid ∧ an <answer> is present (0.1)
//	    0             if there is no answer
//
// EM compares the last answer (ExtractAnswer) with every gold answer after
// NormalizeAnswer. A valid response always has an answer.
func (c RewardConfig) Score(response string, golds []string) Outcome {
	ans, has := ExtractAnswer(response)
	return c.score(response, ans, has, golds)
}

// ScoreGenerated is Score with the answer taken from the policy's own text:
// generated holds the response's runs of policy-generated tokens (loss mask
// 1), decoded, in order, and the answer is PolicyAnswer(generated). The
// format check still reads the whole response. With AnswerFromText it is Score.
func (c RewardConfig) ScoreGenerated(response string, generated []string, golds []string) Outcome {
	if c.AnswerFrom == AnswerFromText {
		return c.Score(response, golds)
	}
	ans, has := PolicyAnswer(generated)
	return c.score(response, ans, has, golds)
}

// PolicyAnswer returns the content of the last <answer>…</answer> that lies
// within one run of policy-generated text (ExtractAnswer on each run; the
// last run with an answer wins), stripped, and whether there is one. Tags
// inside observations never reach it, and an <answer> is never paired with
// a </answer> across an observation.
func PolicyAnswer(generated []string) (string, bool) {
	for i := len(generated) - 1; i >= 0; i-- {
		if ans, ok := ExtractAnswer(generated[i]); ok {
			return ans, true
		}
	}
	return "", false
}

// score fills the reward table for an extracted answer.
func (c RewardConfig) score(response, ans string, has bool, golds []string) Outcome {
	o := Outcome{Valid: ValidFormat(response), HasAnswer: has, Answer: ans}
	if !has {
		return o
	}
	o.EM = ExactMatch(ans, golds)
	switch {
	case o.EM && o.Valid:
		o.Reward = c.Correct
	case o.EM:
		o.Reward = c.Correct - c.FormatScore
	case o.Valid:
		o.Reward = c.FormatScore
	default:
		o.Reward = c.FinalFormatScore
	}
	return o
}
