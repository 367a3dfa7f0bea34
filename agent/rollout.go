package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
)

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
func (r *Runner) Run(ctx context.Context, qs []qa.Record, group int, seed uint64) ([]*Trajectory, error) {
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
			rows = append(rows, &row{t: t, golds: qs[q].Answers, budget: budget})
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
func (r *Runner) prompts(ctx context.Context, qs []qa.Record) ([][]int, []SearchCall, error) {
	var infos []string
	var calls []SearchCall
	if r.cfg.Mode == ModeRAG {
		texts := make([]string, len(qs))
		for i, q := range qs {
			texts[i] = q.Question
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
		case ModeAgent: // PromptTokens' messages
			msgs, err = PromptMessages(q.Question, r.cfg.Placement)
		case ModeDirect:
			msgs, err = baselineMessages(q.Question, "", r.cfg.Placement)
		case ModeRAG:
			msgs, err = baselineMessages(q.Question, infos[i], r.cfg.Placement)
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
