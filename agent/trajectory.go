package agent

import (
	"github.com/cas-engine/cas/conformal"
)

// Question is one prompt of a rollout batch.
type Question struct {
	ID    string
	Text  string
	Golds []string
}

// Finish says why a trajectory ended.
type Finish string

// Finish reasons.
const (
	// FinishAnswer: a generation closed an <answer>.
	FinishAnswer Finish = "answer"
	// FinishEOS: the model ended its message without an answer.
	FinishEOS Finish = "eos"
	// FinishTurns: the last allowed generation searched or had no action.
	FinishTurns Finish = "turns"
	// FinishLength: the response budget (MaxResponseTokens or the model's
	// context) ran out.
	FinishLength Finish = "length"
)

// Span is a range [Start, End) of token positions in Trajectory.IDs.
type Span struct {
	Start int    `json:"start"`
	End   int    `json:"end"`
	Kind  string `json:"kind"` // "information" or "invalid"
}

// Observation kinds.
const (
	ObsInformation = "information"
	ObsInvalid     = "invalid"
)

// Candidate is one retrieved passage of a search call.
type Candidate struct {
	DocID string  `json:"id"`
	Score float32 `json:"score"`
}

// SearchCall records one executed search.
type SearchCall struct {
	// Turn is the generation (1-based) that issued the search; 0 for the
	// RAG baseline's retrieval with the question.
	Turn  int    `json:"turn"`
	Query string `json:"query"`
	// Candidates are the retrieved passages, best first.
	Candidates []Candidate `json:"candidates"`
	// Kept lists the ids of the passages written into the information
	// block, in order (APS-truncated or top-k).
	Kept []string `json:"kept"`
	// ObsTokens is the information block's length as appended, and
	// Truncated tells whether it was cut (MaxObsTokens or the budget).
	ObsTokens int  `json:"obs_tokens"`
	Truncated bool `json:"truncated,omitempty"`
}

// Trajectory is one rollout, the one record from the rollout to the learner
// (train.Learner.Step reads it as it is; a supervised warm-start example is
// a scripted trajectory with IDs, PromptLen and Mask set). IDs, Mask and
// LogProbs are parallel arrays over the whole sequence, prompt then
// response.
type Trajectory struct {
	// Question indexes the questions given to Run (the learner's GRPO
	// group: the G samples of a question share it); Sample is 0..G−1.
	Question   int    `json:"question"`
	QuestionID string `json:"question_id"`
	Sample     int    `json:"sample"`

	// IDs are the prompt's tokens followed by the response's.
	IDs       []int `json:"ids"`
	PromptLen int   `json:"prompt_len"`
	// Mask is the loss mask: 1 on tokens the policy generated, 0 on the
	// prompt and on every appended observation (information blocks and
	// invalid-action messages), which are excluded from the policy loss and
	// the KL.
	Mask []uint8 `json:"mask"`
	// LogProbs[i] = log π(IDs[i] | IDs[<i]) of the generated tokens under the
	// sampling model at temperature 1 (the old policy of GRPO); 0 where
	// Mask is 0. It may be nil where no rollout sampled the trajectory (a
	// warm-start example, or a learner that recomputes them).
	LogProbs []float32 `json:"logprobs"`
	// Observations are the appended spans, in order.
	Observations []Span `json:"observations,omitempty"`
	// AnswerSpan is [start, end) in response positions (IDs[PromptLen:]):
	// the generated tokens overlapping the content of the first
	// <answer>…</answer> the policy wrote (within one generation). {0, 0}
	// when there is none or it is empty.
	AnswerSpan [2]int `json:"answer_span"`

	// Response is the decoded response (special tokens skipped).
	Response string       `json:"response"`
	Searches []SearchCall `json:"searches,omitempty"`
	// Turns is the number of generations.
	Turns  int    `json:"turns"`
	Finish Finish `json:"finish"`
	// Outcome holds the reward pieces of Eq. 5 (answer, EM, validity).
	Outcome Outcome `json:"outcome"`
	// Prediction is the text compared with the gold answers: the last
	// answer; for the baselines without an <answer> tag, the whole stripped
	// response.
	Prediction string `json:"prediction"`
	EM         bool   `json:"em"`
}

// ResponseIDs returns the response tokens, IDs[PromptLen:].
func (t *Trajectory) ResponseIDs() []int { return t.IDs[t.PromptLen:] }

// ResponseMask returns the loss mask of the response tokens.
func (t *Trajectory) ResponseMask() []uint8 { return t.Mask[t.PromptLen:] }

// ResponseLogProbs returns the log-probs of the response tokens (nil when
// LogProbs is).
func (t *Trajectory) ResponseLogProbs() []float32 {
	if t.LogProbs == nil {
		return nil
	}
	return t.LogProbs[t.PromptLen:]
}

// ResponseLen is the number of response tokens.
func (t *Trajectory) ResponseLen() int { return len(t.IDs) - t.PromptLen }

// PolicyTokens counts the tokens in the loss mask.
func (t *Trajectory) PolicyTokens() int {
	n := 0
	for _, m := range t.Mask {
		if m == 1 {
			n++
		}
	}
	return n
}

// AnswerNLL is the trajectory's ACI score under the rollout policy that
// sampled it: ConfidenceScore of its recorded response log-probs.
func (t *Trajectory) AnswerNLL() float64 {
	return ConfidenceScore(t.ResponseLogProbs(), t.ResponseMask(), t.AnswerSpan)
}

// ConfidenceScore is the ACI non-conformity score of a response (paper
// Eq. 6), the one definition the rollout, the learner and the ACI bootstrap
// use: the mean negative log-likelihood under the rollout policy of the
// generated tokens of the answer span,
//
//	s = −(1/|A|) Σ_{j∈A} log π_old(y_j | y_<j),
//
// where logps[j] is the log-prob of response token j, generated[j] says
// whether the policy wrote token j (the loss mask: 1; nil means every
// token) and span is the answer's [start, end) in response positions
// (Trajectory.AnswerSpan). Retrieved tokens never count: without an answer
// span the mean runs over the generated tokens (the official code's
// fallback), and a response without any scores conformal.EmptyNLL.
func ConfidenceScore(logps []float32, generated []uint8, span [2]int) float64 {
	if generated == nil {
		return conformal.AnswerNLL(logps, span)
	}
	gen := make([]float32, 0, len(generated))
	var a [2]int
	for j, m := range generated {
		if j == span[0] {
			a[0] = len(gen)
		}
		if j == span[1] {
			a[1] = len(gen)
		}
		if m == 1 {
			gen = append(gen, logps[j])
		}
	}
	if span[1] >= len(generated) {
		a[1] = len(gen)
	}
	if span[0] >= span[1] || span[0] >= len(generated) {
		a = [2]int{}
	}
	return conformal.AnswerNLL(gen, a)
}

// SearchCount is the number of executed searches.
func (t *Trajectory) SearchCount() int { return len(t.Searches) }
