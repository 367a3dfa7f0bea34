package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/search"
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

// String gives the flag spelling of the mode.
func (m Mode) String() string {
	switch m {
	case ModeDirect:
		return "direct"
	case ModeRAG:
		return "rag"
	}
	return "agent"
}

// ParseMode reads a mode flag: agent, direct or rag.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "agent", "":
		return ModeAgent, nil
	case "direct":
		return ModeDirect, nil
	case "rag":
		return ModeRAG, nil
	}
	return 0, fmt.Errorf("unknown mode %q (want agent, direct or rag)", s)
}

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

// String gives the flag spelling of the rule.
func (r TurnRule) String() string {
	if r == TurnsCode {
		return "code"
	}
	return "paper"
}

// ParseTurnRule reads a turn-rule flag: paper (or search-r1) or code.
func ParseTurnRule(s string) (TurnRule, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "paper", "search-r1", "searchr1", "":
		return TurnsPaper, nil
	case "code":
		return TurnsCode, nil
	}
	return 0, fmt.Errorf("unknown turn rule %q (want paper or code)", s)
}

// generations is the most generations a trajectory gets under the rule.
func (r TurnRule) generations(maxTurns int) int {
	if r == TurnsCode {
		return maxTurns
	}
	return maxTurns + 1
}

// RolloutConfig holds every setting of a rollout. DefaultRolloutConfig gives
// the paper's.
type RolloutConfig struct {
	Mode Mode
	// Placement splits the prompt into chat turns (default: the code's
	// system + user).
	Placement Placement
	// ChatFamily overrides the tokenizer's chat-template family ("qwen3",
	// "qwen2.5"); Qwen3 is always rendered with thinking disabled.
	ChatFamily string
	// Info is the information-block format (code's or Search-R1's).
	Info InfoFormat
	// TurnRule and MaxTurns bound the generations (paper: 4 rounds).
	TurnRule TurnRule
	MaxTurns int

	// Candidates is the number N of passages retrieved per search when APS
	// is on (code: 5 at training time).
	Candidates int
	// APS, when not nil, keeps the APS.Keep(scores) best candidates (APS
	// truncation by a calibration, decided on its log-scale threshold); nil
	// keeps the TopK best (the −APS ablation: 3).
	APS  *conformal.Calibration
	TopK int

	// MaxObsTokens cuts every appended observation (information block or
	// invalid-action message) to its first tokens (Search-R1: 500). A cut
	// information block keeps its closing </information> unless ObsCutBlind
	// (Search-R1's plain cut, which loses it and so makes the response
	// invalid under Eq. 5).
	MaxObsTokens int
	ObsCutBlind  bool
	// MaxTurnTokens bounds the tokens of one generation.
	MaxTurnTokens int
	// MaxPromptTokens rejects longer prompts (code: 4096).
	MaxPromptTokens int
	// MaxResponseTokens bounds everything after the prompt, generated and
	// appended tokens together (code: 3000); the model's context bounds it
	// too.
	MaxResponseTokens int

	// Sampling: Temperature 0 is greedy (evaluation); training samples at 1.
	// The recorded log-probs are always at temperature 1, unfiltered.
	Temperature float64
	TopP        float64
	SampleTopK  int

	// RetrieveAttempts bounds the tries of one batched retrieval call, each
	// limited to RetrieveTimeout, with RetryBackoff doubling between them.
	RetrieveAttempts int
	RetrieveTimeout  time.Duration
	RetryBackoff     time.Duration

	// CompactBelow: when the running rows fall to this fraction of the
	// session's batch or less, they move to a fresh session holding only
	// them (their sequences are prefilled again), so finished trajectories
	// stop costing compute. 0 never compacts.
	CompactBelow float64

	// Reward is the reward table of Eq. 5.
	Reward RewardConfig
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
func (c RolloutConfig) Validate() error {
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
	if c.APS != nil {
		if err := c.APS.Validate(); err != nil {
			bad("%v", err)
		}
		if c.Candidates < 1 {
			bad("candidates %d < 1", c.Candidates)
		}
		if math.IsNaN(float64(c.APS.QHatLog)) {
			bad("aps: q̂ is NaN")
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

// Trajectory is one rollout. IDs, Mask and LogProbs are parallel arrays over
// the whole sequence, prompt then response.
type Trajectory struct {
	// Question indexes the questions given to Run; Sample is 0..G−1.
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
	// Mask is 0.
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

// Response returns the response tokens, IDs[PromptLen:].
func (t *Trajectory) ResponseIDs() []int { return t.IDs[t.PromptLen:] }

// ResponseMask returns the loss mask of the response tokens.
func (t *Trajectory) ResponseMask() []uint8 { return t.Mask[t.PromptLen:] }

// ResponseLogProbs returns the log-probs of the response tokens.
func (t *Trajectory) ResponseLogProbs() []float32 { return t.LogProbs[t.PromptLen:] }

// AnswerNLL is the trajectory's ACI score (paper Eq. 6): the mean negative
// log-likelihood of the answer-span tokens under the rollout policy,
//
//	s = −(1/|A|) Σ_{j∈A} log π_old(y_j | y_<j),
//
// and, without an answer span, the mean over the generated response tokens
// (the official code's fallback); 20 when nothing was generated.
func (t *Trajectory) AnswerNLL() float64 {
	if t.AnswerSpan[1] > t.AnswerSpan[0] {
		return conformal.AnswerNLL(t.ResponseLogProbs(), t.AnswerSpan)
	}
	var gen []float32
	lps := t.ResponseLogProbs()
	for i, m := range t.ResponseMask() {
		if m == 1 {
			gen = append(gen, lps[i])
		}
	}
	return conformal.AnswerNLL(gen, [2]int{})
}

// SearchCount is the number of executed searches.
func (t *Trajectory) SearchCount() int { return len(t.Searches) }

// Runner runs batched rollouts of a policy with a retriever.
type Runner struct {
	policy    Policy
	tok       Tokenizer
	retriever search.Retriever
	cfg       RolloutConfig
	family    string
	// OnDone, when set, is called once per finished trajectory (for a
	// progress bar), in the order they finish.
	OnDone func(*Trajectory)
}

// NewRunner checks the configuration and pairs a policy with its tokenizer
// and retriever (nil only in ModeDirect).
func NewRunner(p Policy, tok Tokenizer, r search.Retriever, cfg RolloutConfig) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if p == nil || tok == nil {
		return nil, errors.New("rollout: a policy and a tokenizer are required")
	}
	if r == nil && cfg.Mode != ModeDirect {
		return nil, fmt.Errorf("rollout: mode %s needs a retriever", cfg.Mode)
	}
	family := cfg.ChatFamily
	if family == "" {
		family = tok.Family()
	}
	if family != tokenizer.FamilyQwen3 && family != tokenizer.FamilyQwen25 {
		return nil, fmt.Errorf("rollout: unknown chat template family %q (set it to %q or %q)", family, tokenizer.FamilyQwen3, tokenizer.FamilyQwen25)
	}
	return &Runner{policy: p, tok: tok, retriever: r, cfg: cfg, family: family}, nil
}

// Config returns the runner's configuration.
func (r *Runner) Config() RolloutConfig { return r.cfg }

// row is one trajectory in flight.
type row struct {
	t      *Trajectory
	golds  []string
	slot   int // index in the current session
	budget int // most response tokens
	done   bool
}

func (w *row) respLen() int { return len(w.t.IDs) - w.t.PromptLen }

// append adds tokens to the trajectory: generated ones with their log-probs
// and mask 1, observations with mask 0.
func (w *row) append(ids []int, logps []float32) {
	w.t.IDs = append(w.t.IDs, ids...)
	for i := range ids {
		if logps != nil {
			w.t.Mask = append(w.t.Mask, 1)
			w.t.LogProbs = append(w.t.LogProbs, logps[i])
		} else {
			w.t.Mask = append(w.t.Mask, 0)
			w.t.LogProbs = append(w.t.LogProbs, 0)
		}
	}
}

// Run rolls out group trajectories for each question, all advancing together
// in one batch: every step generates for all running trajectories (until
// </search>, </answer> or EOS), sends the steps' searches to the retriever in
// one call, appends the information blocks and continues from the KV cache.
// Trajectories come back question-major: question q's samples are
// [q·group, (q+1)·group). seed drives sampling.
//
// Per generation: a closed <answer> ends the trajectory; the first
// <search>…</search> is executed while the turn rule allows (later text of
// the turn is never generated: </search> stops it); a turn with neither
// gets InvalidActionMessage and another generation — unless it ended with
// EOS, which ends the trajectory (the model closed its message; Search-R1
// instead re-tokenizes without the EOS, which a KV cache cannot do).
//
// A prompt longer than MaxPromptTokens or the model's context, a token id
// outside the model's vocabulary and a retrieval that still fails after
// RetrieveAttempts tries are errors: no trajectory is returned half-made.
func (r *Runner) Run(ctx context.Context, qs []Question, group int, seed uint64) ([]*Trajectory, error) {
	if len(qs) == 0 {
		return nil, errors.New("rollout: no questions")
	}
	if group < 1 {
		return nil, fmt.Errorf("rollout: group size %d < 1", group)
	}
	prompts, ragCalls, err := r.prompts(ctx, qs)
	if err != nil {
		return nil, err
	}
	rows := make([]*row, 0, len(qs)*group)
	for q, p := range prompts {
		budget := min(r.cfg.MaxResponseTokens, r.policy.MaxContext()-len(p))
		for g := range group {
			t := &Trajectory{
				Question: q, QuestionID: qs[q].ID, Sample: g,
				IDs: slices.Clone(p), PromptLen: len(p),
				Mask: make([]uint8, len(p)), LogProbs: make([]float32, len(p)),
			}
			if ragCalls != nil {
				t.Searches = []SearchCall{ragCalls[q]}
			}
			rows = append(rows, &row{t: t, golds: qs[q].Golds, budget: budget})
		}
	}
	if err := r.loop(ctx, rows, seed); err != nil {
		return nil, err
	}
	out := make([]*Trajectory, len(rows))
	for i, w := range rows {
		out[i] = w.t
	}
	return out, nil
}

// prompts renders and encodes every question's prompt (for RAG, after one
// batched retrieval with the questions) and checks it against the limits.
func (r *Runner) prompts(ctx context.Context, qs []Question) ([][]int, []SearchCall, error) {
	var infos []string
	var calls []SearchCall
	if r.cfg.Mode == ModeRAG {
		texts := make([]string, len(qs))
		for i, q := range qs {
			texts[i] = q.Text
		}
		var err error
		if infos, calls, err = r.search(ctx, texts, 0); err != nil {
			return nil, nil, err
		}
	}
	limit := min(r.cfg.MaxPromptTokens, r.policy.MaxContext()-1)
	vocab := r.policy.VocabSize()
	out := make([][]int, len(qs))
	for i, q := range qs {
		var msgs []tokenizer.Message
		var err error
		switch r.cfg.Mode {
		case ModeAgent:
			msgs, err = PromptMessages(q.Text, r.cfg.Placement)
		case ModeDirect:
			msgs, err = baselineMessages(q.Text, "", r.cfg.Placement)
		case ModeRAG:
			msgs, err = baselineMessages(q.Text, infos[i], r.cfg.Placement)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("question %d (id %q): %w", i, q.ID, err)
		}
		ids, err := encodePrompt(r.tok, r.family, msgs)
		if err != nil {
			return nil, nil, fmt.Errorf("question %d (id %q): %w", i, q.ID, err)
		}
		if len(ids) > limit {
			return nil, nil, fmt.Errorf("question %d (id %q): prompt has %d tokens, more than the limit of %d (max prompt tokens %d, model context %d)",
				i, q.ID, len(ids), limit, r.cfg.MaxPromptTokens, r.policy.MaxContext())
		}
		for _, id := range ids {
			if id < 0 || id >= vocab {
				return nil, nil, fmt.Errorf("question %d (id %q): prompt token id %d outside the model's vocabulary [0, %d) (tokenizer and model do not match)",
					i, q.ID, id, vocab)
			}
		}
		out[i] = ids
	}
	return out, calls, nil
}

// loop advances all rows until every one has finished.
func (r *Runner) loop(ctx context.Context, rows []*row, seed uint64) error {
	sess, err := r.newSession(rows, seed)
	if err != nil {
		return err
	}
	defer func() { sess.close() }()
	maxGens := r.cfg.Mode.generations(r.cfg)
	for turn := 1; ; turn++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("rollout: %w", err)
		}
		running := make([]*row, 0, len(rows))
		for _, w := range rows {
			if !w.done && w.respLen() >= w.budget {
				r.finish(w, FinishLength)
			}
			if !w.done {
				running = append(running, w)
			}
		}
		if len(running) == 0 {
			return nil
		}
		if r.cfg.CompactBelow > 0 && len(running) < sess.batch && float64(len(running)) <= r.cfg.CompactBelow*float64(sess.batch) {
			sess.close()
			if sess, err = r.newSession(running, seed+uint64(turn)*0x9e3779b97f4a7c15); err != nil {
				return err
			}
		}
		results, err := r.generate(sess, running)
		if err != nil {
			return fmt.Errorf("rollout turn %d: %w", turn, err)
		}
		var searchers []*row
		var queries []string
		obs := make([][]int, sess.batch)
		for i, w := range running {
			res := results[i]
			w.append(res.IDs, res.LogProbs)
			w.t.Turns = turn
			if r.cfg.Mode != ModeAgent {
				r.finishBaseline(w, res)
				continue
			}
			turnText := r.tok.Decode(res.IDs, true)
			action, query := ParseAction(turnText)
			switch {
			case action == ActionAnswer:
				r.finish(w, FinishAnswer)
			case w.respLen() >= w.budget:
				r.finish(w, FinishLength)
			case action == ActionSearch && turn < maxGens:
				searchers = append(searchers, w)
				queries = append(queries, query)
			case action == ActionSearch:
				r.finish(w, FinishTurns)
			case res.Finish == qwen.FinishEOS:
				r.finish(w, FinishEOS)
			case turn >= maxGens:
				r.finish(w, FinishTurns)
			default:
				obs[w.slot], _ = r.observe(w, InvalidActionMessage, ObsInvalid)
			}
		}
		if len(searchers) > 0 {
			infos, calls, err := r.search(ctx, queries, turn)
			if err != nil {
				return err
			}
			for i, w := range searchers {
				obs[w.slot], calls[i].Truncated = r.observe(w, infos[i], ObsInformation)
				calls[i].ObsTokens = len(obs[w.slot])
				w.t.Searches = append(w.t.Searches, calls[i])
			}
		}
		hasObs := false
		for _, o := range obs {
			hasObs = hasObs || len(o) > 0
		}
		if hasObs {
			if err := sess.s.Append(obs); err != nil {
				return fmt.Errorf("rollout turn %d: append observations: %w", turn, err)
			}
		}
	}
}

// generations is the most generations of a trajectory in this mode.
func (m Mode) generations(c RolloutConfig) int {
	if m != ModeAgent {
		return 1
	}
	return c.TurnRule.generations(c.MaxTurns)
}

// observe appends an observation to a row and returns the appended tokens
// and whether they were cut. An observation longer than MaxObsTokens keeps
// its first tokens; an information block keeps its closing tail
// ("</information>", plus "\n\n" in Search-R1's format) after the cut, so
// that truncation alone never breaks the grammar of Eq. 5 — unless
// ObsCutBlind asks for Search-R1's plain cut. What exceeds the row's
// remaining budget is dropped (the trajectory then ends).
func (r *Runner) observe(w *row, text, kind string) ([]int, bool) {
	ids, cut := cutObservation(r.tok, r.cfg, text, kind)
	if room := max(w.budget-w.respLen(), 0); len(ids) > room {
		ids, cut = ids[:room], true
	}
	start := len(w.t.IDs)
	w.append(ids, nil)
	if len(ids) > 0 {
		w.t.Observations = append(w.t.Observations, Span{Start: start, End: start + len(ids), Kind: kind})
	}
	return ids, cut
}

// cutObservation encodes an observation and cuts it to MaxObsTokens: the
// first tokens of the text (ObsCutBlind, or any observation but an
// information block ending in its tail), or the first tokens of the block's
// body followed by the encoded tail. It never returns a token that is not
// part of the encoded text (a block 1–3 tokens over the limit used to be
// padded past the body's end), and reports whether anything was dropped.
func cutObservation(tok Tokenizer, cfg RolloutConfig, text, kind string) ([]int, bool) {
	ids := tok.Encode(text)
	limit := cfg.MaxObsTokens
	if len(ids) <= limit {
		return ids, false
	}
	tail := infoTail(cfg.Info)
	if kind != ObsInformation || cfg.ObsCutBlind || !strings.HasSuffix(text, tail) {
		return ids[:limit], true
	}
	tailIDs := tok.Encode(tail)
	if len(tailIDs) >= limit {
		return ids[:limit], true
	}
	body := tok.Encode(strings.TrimSuffix(text, tail))
	keep := min(len(body), limit-len(tailIDs))
	out := make([]int, 0, keep+len(tailIDs))
	return append(append(out, body[:keep]...), tailIDs...), keep < len(body)
}

// infoTail is what follows the last passage of an information block.
func infoTail(f InfoFormat) string {
	if f == InfoSearchR1 {
		return InformationClose + "\n\n"
	}
	return InformationClose
}

// generate runs one generation for every running row. Rows whose remaining
// budget is below MaxTurnTokens get a call of their own with that smaller
// limit, so no row ever exceeds its budget.
func (r *Runner) generate(sess *session, running []*row) ([]qwen.Result, error) {
	caps := map[int][]int{} // token limit → indices into running
	for i, w := range running {
		c := min(r.cfg.MaxTurnTokens, w.budget-w.respLen())
		caps[c] = append(caps[c], i)
	}
	keys := make([]int, 0, len(caps))
	for c := range caps {
		keys = append(keys, c)
	}
	slices.Sort(keys)
	stop := []string{SearchClose, AnswerClose}
	if r.cfg.Mode != ModeAgent {
		stop = []string{AnswerClose}
	}
	out := make([]qwen.Result, len(running))
	for _, c := range keys {
		active := make([]bool, sess.batch)
		for _, i := range caps[c] {
			active[running[i].slot] = true
		}
		res, err := sess.s.Generate(qwen.GenerateOptions{
			MaxNewTokens: c,
			Temperature:  r.cfg.Temperature,
			TopK:         r.cfg.SampleTopK,
			TopP:         r.cfg.TopP,
			Stop:         stop,
			Decode:       func(ids []int) string { return r.tok.Decode(ids, false) },
		}, active)
		if err != nil {
			return nil, err
		}
		if len(res) != sess.batch {
			return nil, fmt.Errorf("generate returned %d rows for a batch of %d", len(res), sess.batch)
		}
		for _, i := range caps[c] {
			got := res[running[i].slot]
			if len(got.IDs) == 0 || len(got.IDs) > c || len(got.LogProbs) != len(got.IDs) {
				return nil, fmt.Errorf("generate returned %d tokens and %d log-probs for a limit of %d", len(got.IDs), len(got.LogProbs), c)
			}
			out[i] = got
		}
	}
	return out, nil
}

// finishBaseline ends a direct or RAG trajectory after its one generation.
func (r *Runner) finishBaseline(w *row, res qwen.Result) {
	switch {
	case strings.Contains(r.tok.Decode(res.IDs, true), AnswerClose):
		r.finish(w, FinishAnswer)
	case res.Finish == qwen.FinishLength:
		r.finish(w, FinishLength)
	default:
		r.finish(w, FinishEOS)
	}
}

// finish closes a trajectory: decodes the response, scores it, finds the
// answer span.
func (r *Runner) finish(w *row, f Finish) {
	if w.done {
		return
	}
	w.done = true
	t := w.t
	t.Finish = f
	resp := t.ResponseIDs()
	t.Response = r.tok.Decode(resp, true)
	runs := generatedRuns(t.ResponseMask())
	texts := make([]string, len(runs))
	for i, g := range runs {
		texts[i] = r.tok.Decode(resp[g[0]:g[1]], true)
	}
	t.Outcome = r.cfg.Reward.ScoreGenerated(t.Response, texts, w.golds)
	t.Prediction, t.EM = t.Outcome.Answer, t.Outcome.EM
	if r.cfg.Mode != ModeAgent && !t.Outcome.HasAnswer {
		t.Prediction = pyStrip(t.Response)
		t.EM = ExactMatch(t.Prediction, w.golds)
	}
	t.AnswerSpan = r.answerSpan(resp, runs, texts)
	if r.OnDone != nil {
		r.OnDone(t)
	}
}

// generatedRuns lists the runs [i, j) of policy-generated tokens (mask 1)
// of a response, in order: the text between observations.
func generatedRuns(mask []uint8) [][2]int {
	var out [][2]int
	for i := 0; i < len(mask); {
		if mask[i] == 0 {
			i++
			continue
		}
		j := i
		for j < len(mask) && mask[j] == 1 {
			j++
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// answerSpan finds the tokens of the first <answer>…</answer> the policy
// generated: it looks in each run of generated tokens (between
// observations; texts are the runs decoded) in turn, so an answer quoted by
// an observation — the invalid-action message holds "<answer> and
// </answer>" — never counts. The span is AnswerTokenSpan's: the tokens
// strictly inside the tags.
func (r *Runner) answerSpan(resp []int, runs [][2]int, texts []string) [2]int {
	for k, g := range runs {
		if _, _, ok := AnswerSpan(texts[k]); ok {
			if lo, hi := AnswerTokens(r.tok, resp[g[0]:g[1]], texts[k]); hi > lo {
				return [2]int{g[0] + lo, g[0] + hi}
			}
			return [2]int{}
		}
	}
	return [2]int{}
}

// session is the current generation session and its batch size.
type session struct {
	s     Session
	batch int
}

func (s *session) close() {
	if s != nil && s.s != nil {
		s.s.Close()
		s.s = nil
	}
}

// newSession starts a session holding the given rows (slot = position in
// rows) and prefills their sequences so far.
func (r *Runner) newSession(rows []*row, seed uint64) (*session, error) {
	longest := 0
	seqs := make([][]int, len(rows))
	for i, w := range rows {
		w.slot = i
		seqs[i] = w.t.IDs
		longest = max(longest, len(w.t.IDs))
	}
	s, err := r.policy.NewSession(len(rows), longest+r.cfg.MaxTurnTokens+r.cfg.MaxObsTokens, seed)
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	if err := s.Append(seqs); err != nil {
		s.Close()
		return nil, fmt.Errorf("rollout: prefill: %w", err)
	}
	return &session{s: s, batch: len(rows)}, nil
}
