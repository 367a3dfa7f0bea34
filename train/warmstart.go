package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"unicode"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/schollz/progressbar/v3"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/internal/jsonl"
	"github.com/cas-engine/cas/model/qwen"
)

// WarmStartConfig configures the supervised warm start.
type WarmStartConfig struct {
	// Optim is the optimiser (a tiny model wants a far larger learning rate
	// than the paper's 1e-6, e.g. 3e-3).
	Optim OptimConfig
	// Steps is the number of optimiser steps.
	Steps int
	// BatchSize is the number of examples per optimiser step; MicroBatch the
	// number per forward/backward pass (0: BatchSize).
	BatchSize, MicroBatch int
	// Seed drives the example order (a fresh permutation every epoch).
	Seed uint64
	// Progress, when set, shows a progress bar with the running loss.
	Progress io.Writer
	// OnStep, when set, is called after every step with its 0-based index
	// and cross-entropy.
	OnStep func(step int, loss float64)
}

// Validate checks the configuration.
func (c WarmStartConfig) Validate() error {
	switch {
	case c.Steps < 1:
		return fmt.Errorf("warm start: steps %d < 1", c.Steps)
	case c.BatchSize < 1:
		return fmt.Errorf("warm start: batch size %d < 1", c.BatchSize)
	case c.MicroBatch < 0:
		return fmt.Errorf("warm start: micro-batch %d < 0", c.MicroBatch)
	}
	return c.Optim.Validate()
}

// WarmStartResult reports a warm start.
type WarmStartResult struct {
	// Losses are the per-step cross-entropies (nats per token), each
	// measured on that step's batch before its update.
	Losses []float64
	// Tokens is the number of supervised tokens seen.
	Tokens int
}

// WarmStart trains the policy in place by supervised cross-entropy on given
// trajectories under their loss masks (the tokens the policy would have
// generated; never the prompt nor retrieved <information> tokens):
//
//	L = −(1/N) Σ_{b,t} m_{b,t} · log π_θ(y_{b,t} | y_{b,<t}),   N = Σ m,
//
// a token-mean over each batch, with gradients accumulated over
// micro-batches and one AdamW step per batch. The demo uses it to teach a
// tiny model the tag grammar before GRPO. Only IDs, PromptLen and
// Mask of the examples are read. The optimiser state is deleted at the
// end, so that a GRPO Learner built afterwards starts its own.
func WarmStart(policy *qwen.Model, examples []*agent.Trajectory, cfg WarmStartConfig) (*WarmStartResult, error) {
	if cfg.MicroBatch == 0 {
		cfg.MicroBatch = cfg.BatchSize
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(examples) == 0 {
		return nil, errors.New("warm start: no examples")
	}
	for i := range examples {
		if err := checkTrajectory(examples[i], policy.Config.VocabSize, false); err != nil {
			return nil, fmt.Errorf("warm start: example %d: %w", i, err)
		}
		if examples[i].PolicyTokens() == 0 {
			return nil, fmt.Errorf("warm start: example %d has no token in its loss mask", i)
		}
	}
	acc, err := newGradAccumulator(policy, cfg.Optim)
	if err != nil {
		return nil, fmt.Errorf("warm start: %w", err)
	}
	c := policy.Config
	micro, err := context.NewExec(policy.Backend(), policy.Context(), func(ctx *context.Context, ids, attn, mask, count *graph.Node) *graph.Node {
		a := acc.begin(ids.Graph())
		logp, _ := qwen.TokenLogProbs(ctx, c, ids, attn, mask, qwen.ScoreOptions{})
		loss := graph.Div(graph.Neg(graph.ReduceAllSum(graph.Mul(logp, mask))), count)
		acc.add(ctx, a, loss)
		return loss
	})
	if err != nil {
		return nil, err
	}
	var bar *progressbar.ProgressBar
	if cfg.Progress != nil {
		bar = progressbar.NewOptions(cfg.Steps, progressbar.OptionSetWriter(cfg.Progress),
			progressbar.OptionSetDescription("warm start"), progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionClearOnFinish())
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	order := rng.Perm(len(examples))
	pos := 0
	res := &WarmStartResult{}
	for step := range cfg.Steps {
		batch := make([]int, 0, cfg.BatchSize)
		for len(batch) < cfg.BatchSize {
			if pos == len(order) {
				order, pos = rng.Perm(len(examples)), 0
			}
			batch = append(batch, order[pos])
			pos++
		}
		count := 0
		for _, i := range batch {
			count += examples[i].PolicyTokens()
		}
		loss := 0.0
		for off := 0; off < len(batch); off += cfg.MicroBatch {
			p := packRows(examples, batch[off:min(off+cfg.MicroBatch, len(batch))], cfg.MicroBatch)
			out, err := micro.Exec(
				tensors.FromFlatDataAndDimensions(p.ids, p.rows, p.seqLen),
				tensors.FromFlatDataAndDimensions(p.attn, p.rows, p.seqLen),
				tensors.FromFlatDataAndDimensions(p.lossMask, p.rows, p.seqLen),
				tensors.FromScalar(float32(count)))
			if err != nil {
				return nil, fmt.Errorf("warm start: step %d: %w", step+1, err)
			}
			v, err := scalars(out)
			if err != nil {
				return nil, err
			}
			loss += v[0]
		}
		if !isFinite(loss) {
			return nil, errors.Join(acc.zero(), fmt.Errorf("warm start: step %d: cross-entropy is %v: %w", step+1, loss, ErrNonFinite))
		}
		if _, _, err := acc.apply(); err != nil {
			return nil, fmt.Errorf("warm start: step %d: %w", step+1, err)
		}
		res.Losses = append(res.Losses, loss)
		res.Tokens += count
		if cfg.OnStep != nil {
			cfg.OnStep(step, loss)
		}
		if bar != nil {
			bar.Describe(fmt.Sprintf("warm start (CE %.3f)", loss))
			_ = bar.Add(1)
		}
	}
	if err := acc.clear(); err != nil {
		return nil, fmt.Errorf("warm start: clear optimiser state: %w", err)
	}
	return res, nil
}

// InformationSpans returns the byte ranges [start, end) of text that an
// agent appended rather than generated: every <information>…</information>
// block, extended over the whitespace touching it (both the official code's
// and Search-R1's block formats). An unclosed block runs to the end.
func InformationSpans(text string) [][2]int {
	const open, closeTag = "<information>", "</information>"
	var spans [][2]int
	for off := 0; off < len(text); {
		i := strings.Index(text[off:], open)
		if i < 0 {
			break
		}
		start := off + i
		end := len(text)
		if j := strings.Index(text[start+len(open):], closeTag); j >= 0 {
			end = start + len(open) + j + len(closeTag)
		}
		for start > off && unicode.IsSpace(rune(text[start-1])) {
			start--
		}
		for end < len(text) && unicode.IsSpace(rune(text[end])) {
			end++
		}
		spans = append(spans, [2]int{start, end})
		off = end
	}
	return spans
}

// SupervisedExample builds a warm-start example from a rendered prompt's ids
// and a response text: the response is encoded piece by piece — generated
// text and the appended information blocks (InformationSpans) separately,
// the way a rollout appends them — and only the generated pieces are in the
// loss mask. eos, when ≥ 0, is appended as a generated token (so the model
// learns to stop).
func SupervisedExample(encode func(string) []int, promptIDs []int, response string, eos int) (*agent.Trajectory, error) {
	if len(promptIDs) == 0 {
		return nil, errors.New("supervised example: empty prompt")
	}
	tr := &agent.Trajectory{IDs: append([]int(nil), promptIDs...), PromptLen: len(promptIDs), Mask: make([]uint8, len(promptIDs))}
	add := func(s string, inLoss uint8) {
		if s == "" {
			return
		}
		for _, id := range encode(s) {
			tr.IDs = append(tr.IDs, id)
			tr.Mask = append(tr.Mask, inLoss)
		}
	}
	prev := 0
	for _, sp := range InformationSpans(response) {
		add(response[prev:sp[0]], 1)
		add(response[sp[0]:sp[1]], 0)
		prev = sp[1]
	}
	add(response[prev:], 1)
	if eos >= 0 {
		tr.IDs = append(tr.IDs, eos)
		tr.Mask = append(tr.Mask, 1)
	}
	if tr.PolicyTokens() == 0 {
		return nil, errors.New("supervised example: nothing to learn in the response")
	}
	return tr, nil
}

// SupervisedLine is one line of a warm-start file: a question and the full
// response the agent should have written for it, information blocks
// included (they are appended, not learned).
type SupervisedLine struct {
	Question string `json:"question"`
	Response string `json:"response"`
}

// LoadSupervised reads a warm-start JSONL file ({"question", "response"} per
// line) and builds examples: the question rendered as the agent's prompt
// (placement, chat family; Qwen3 without thinking), the response encoded by
// SupervisedExample with eos appended (eos < 0: none). Every token id must
// be below vocab.
func LoadSupervised(path string, tok agent.Tokenizer, placement agent.Placement, family string, eos, vocab int) ([]*agent.Trajectory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	var out []*agent.Trajectory
	err = jsonl.Lines(f, path, func(_ int, b []byte, _ bool) error {
		var l SupervisedLine
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("malformed JSON: %w", err)
		}
		prompt, err := agent.PromptTokens(tok, family, placement, l.Question)
		if err != nil {
			return err
		}
		ex, err := SupervisedExample(tok.Encode, prompt, l.Response, eos)
		if err != nil {
			return err
		}
		if err := checkTrajectory(ex, vocab, false); err != nil {
			return fmt.Errorf("%w (tokenizer and model do not match?)", err)
		}
		out = append(out, ex)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no examples", path)
	}
	return out, nil
}
