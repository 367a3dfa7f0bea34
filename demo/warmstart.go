package demo

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/search"
	"github.com/cas-engine/cas/train"
	"github.com/cas-engine/cas/world"
)

// WarmReport summarises the supervised warm start (stage 3).
type WarmReport struct {
	// Examples: scripted agent trajectories (with APS-truncated BM25
	// results) and direct-answer examples; Dropped are the scripted
	// trajectories left out because a hop's retrieval missed every gold
	// passage (they would teach answering from nothing).
	AgentExamples  int `json:"agent_examples"`
	DirectExamples int `json:"direct_examples"`
	Dropped        int `json:"dropped"`
	// Mean tokens per agent example: all, and those in the loss.
	MeanTokens       float64 `json:"mean_tokens"`
	MeanPolicyTokens float64 `json:"mean_policy_tokens"`
	// Steps, the per-step cross-entropies, and the tokens processed (all,
	// prompt and retrieved included) and supervised.
	Steps          int       `json:"steps"`
	Losses         []float64 `json:"losses"`
	Tokens         int       `json:"tokens"`
	PolicyTokens   int       `json:"policy_tokens"`
	Seconds        float64   `json:"seconds"`
	TokensPerSec   float64   `json:"tokens_per_s"`
	ChunksDone     int       `json:"chunks_done"`
	Parameters     int64     `json:"parameters"`
	Vocab          int       `json:"vocab"`
	PromptTokens   float64   `json:"prompt_tokens"`
	APSMeanKept    float64   `json:"aps_mean_kept"`
	APSGoldCovered float64   `json:"aps_gold_covered"`
}

// recordPolicy is an agent.Policy that ends every row at once: running a
// rollout with it yields the exact prompt ids the rollout renders, which
// the warm start's examples must share with the later rollouts.
type recordPolicy struct{ vocab, maxCtx, eos int }

func (p recordPolicy) NewSession(batch, capacity int, seed uint64) (agent.Session, error) {
	return recordSession{eos: p.eos}, nil
}
func (p recordPolicy) MaxContext() int { return p.maxCtx }
func (p recordPolicy) VocabSize() int  { return p.vocab }

type recordSession struct{ eos int }

func (recordSession) Append([][]int) error { return nil }
func (s recordSession) Generate(_ qwen.GenerateOptions, active []bool) ([]qwen.Result, error) {
	out := make([]qwen.Result, len(active))
	for i, a := range active {
		if a {
			out[i] = qwen.Result{IDs: []int{s.eos}, LogProbs: []float32{0}, Finish: qwen.FinishEOS}
		}
	}
	return out, nil
}
func (recordSession) Close() {}

// promptIDs renders the rollout prompts of questions in mode.
func (r *runner) promptIDs(ctx context.Context, d *worldData, qs []world.Question, mode agent.Mode) ([][]int, error) {
	rc := r.rolloutConfig(mode, 0)
	rc.CompactBelow = 0
	ret := search.Retriever(d.retriever)
	if mode == agent.ModeDirect {
		ret = nil
	}
	run, err := agent.NewRunner(recordPolicy{vocab: d.tok.VocabSize(), maxCtx: r.cfg.Model.MaxPositions, eos: d.eos}, d.tok, ret, rc)
	if err != nil {
		return nil, err
	}
	aqs := agentQuestions(qs)
	ts, err := run.Run(ctx, aqs, 1, 0)
	if err != nil {
		return nil, fmt.Errorf("render prompts: %w", err)
	}
	out := make([][]int, len(ts))
	for i, t := range ts {
		out[i] = t.IDs[:t.PromptLen]
	}
	return out, nil
}

// agentQuestions converts world questions for the rollout.
func agentQuestions(qs []world.Question) []agent.Question {
	out := make([]agent.Question, len(qs))
	for i, q := range qs {
		out[i] = agent.Question{ID: q.ID, Text: q.Question, Golds: q.GoldenAnswers}
	}
	return out
}

// rolloutConfig is the rollout of the demo in mode: the paper's grammar
// and turn rule, the demo's short turns, greedy unless temperature > 0,
// fixed top-k until the caller sets APS.
func (r *runner) rolloutConfig(mode agent.Mode, temperature float64) agent.RolloutConfig {
	rc := agent.DefaultRolloutConfig()
	rc.Mode = mode
	rc.MaxTurns = maxTurns
	rc.MaxTurnTokens = maxTurnTokens
	rc.MaxResponseTokens = maxResponseTokens
	rc.Candidates = r.cfg.APS.Candidates
	rc.TopK = r.cfg.APS.TopK
	rc.Temperature = temperature
	return rc
}

// spaceAfterTags puts a space after every opening tag of a generated
// segment ("<search> Dago Faro born</search>"): byte-level BPE encodes a
// word differently with and without its leading space, and with the space
// a name copied from the question or a passage (" Dago") is the same token
// sequence there as in the search or the answer — the copy a tiny model
// can learn. The paper's prompt writes answers this way ("<answer> Beijing
// </answer>"); queries and answers are stripped before use.
func spaceAfterTags(s string) string {
	for _, tag := range []string{agent.ThinkOpen, agent.SearchOpen, agent.AnswerOpen} {
		s = strings.ReplaceAll(s, tag, tag+" ")
	}
	return s
}

// example builds a supervised example from prompt ids and segments, each
// encoded on its own as the rollout appends it: generated text in the loss,
// appended information blocks out of it, then EOS.
func example(d *worldData, prompt []int, segs []world.Segment) train.Trajectory {
	tr := train.Trajectory{Tokens: append([]int(nil), prompt...), PromptLen: len(prompt)}
	for _, s := range segs {
		text := s.Text
		if !s.Retrieved {
			text = spaceAfterTags(text)
		}
		for _, id := range d.tok.Encode(text) {
			tr.Tokens = append(tr.Tokens, id)
			tr.LossMask = append(tr.LossMask, !s.Retrieved)
		}
	}
	tr.Tokens = append(tr.Tokens, d.eos)
	tr.LossMask = append(tr.LossMask, true)
	return tr
}

// passageOf converts a retrieved document.
func passageOf(doc search.Doc) world.Passage {
	title, text := agent.SplitContents(doc.Contents)
	return world.Passage{ID: doc.ID, Title: title, Text: text, Entity: -1}
}

// warmExamples builds the warm start's examples: every training question's
// scripted trajectory, its searches answered by BM25 with APS truncation
// at level alpha (qhat), plus direct-answer examples.
func (r *runner) warmExamples(ctx context.Context, d *worldData, qhat float64, rep *WarmReport) ([]train.Trajectory, error) {
	qs := d.w.Splits[world.Train]
	hq := hopQueries(qs)
	hits, err := r.retrieveAll(ctx, d.retriever, queriesOf(hq), r.cfg.APS.Candidates, "warm-start retrieval")
	if err != nil {
		return nil, err
	}
	aps := r.cfg.apsFor()
	kept := map[string][]world.Passage{}
	var keptSum, covered int
	for i, h := range hits {
		n := aps.Keep(scoresOf(h), qhat)
		keptSum += n
		if g := goldRank(h, hq[i].gold); g != conformal.NoGold && g < n {
			covered++
		}
		docs := make([]world.Passage, n)
		for j := range n {
			docs[j] = passageOf(h[j].Doc)
		}
		kept[hq[i].query] = docs
	}
	rep.APSMeanKept = float64(keptSum) / float64(max(1, len(hits)))
	rep.APSGoldCovered = float64(covered) / float64(max(1, len(hits)))
	agentPrompts, err := r.promptIDs(ctx, d, qs, agent.ModeAgent)
	if err != nil {
		return nil, err
	}
	directPrompts, err := r.promptIDs(ctx, d, qs, agent.ModeDirect)
	if err != nil {
		return nil, err
	}
	var out []train.Trajectory
	var tokens, policy, promptTok int
	for i, q := range qs {
		tr, err := world.Script(q, func(query string) []world.Passage { return kept[query] }, world.DefaultInformation)
		if err != nil {
			return nil, err
		}
		if !tr.AllFound() {
			rep.Dropped++
			continue
		}
		e := example(d, agentPrompts[i], tr.Segments)
		tokens += len(e.Tokens)
		policy += e.PolicyTokens()
		promptTok += e.PromptLen
		out = append(out, e)
	}
	rep.AgentExamples = len(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("warm start: every scripted trajectory missed a gold passage")
	}
	rep.MeanTokens = float64(tokens) / float64(len(out))
	rep.MeanPolicyTokens = float64(policy) / float64(len(out))
	rep.PromptTokens = float64(promptTok) / float64(len(out))
	nDirect := int(math.Round(r.cfg.Warm.DirectPerAgent * float64(len(out))))
	for i := range nDirect {
		j := i % len(qs)
		out = append(out, example(d, directPrompts[j], []world.Segment{{Text: "<answer>" + qs[j].GoldenAnswers[0] + "</answer>"}}))
	}
	rep.DirectExamples = nDirect
	return out, nil
}

// warmDir is the warm-started policy's model folder.
func (r *runner) warmDir() string { return filepath.Join(r.out, "warm") }

// warmStart is stage 3: a random tiny Qwen3 trained by supervised
// cross-entropy on the scripted trajectories, in resumable chunks.
func (r *runner) warmStart(ctx context.Context, d *worldData, aps APSReport) (*WarmReport, error) {
	reportPath := filepath.Join(r.out, "warm_start.json")
	partial := filepath.Join(r.out, "warm-partial")
	var rep WarmReport
	err := r.stage(ctx, "warm", func() error {
		if err := readJSON(reportPath, &rep); err != nil || rep.ChunksDone == 0 {
			rep = WarmReport{}
		}
		examples, err := r.warmExamples(ctx, d, float64(aps.QHat), &rep)
		if err != nil {
			return err
		}
		if rep.ChunksDone >= r.cfg.Warm.Chunks {
			if _, err := os.Stat(filepath.Join(r.warmDir(), configFile)); err == nil {
				return os.RemoveAll(partial) // finished; only the marker was missing
			}
			rep = WarmReport{}
		}
		var policy *qwen.Model
		if rep.ChunksDone > 0 {
			if policy, err = LoadModelFolder(partial, r.backend); err != nil {
				return err
			}
			r.logf("stage 3: warm start resumed after chunk %d of %d", rep.ChunksDone, r.cfg.Warm.Chunks)
		} else {
			qc, err := r.cfg.Model.QwenConfig(d.tok.VocabSize(), d.eos)
			if err != nil {
				return err
			}
			if policy, err = qwen.NewRandom(qc, r.backend, r.cfg.Seed); err != nil {
				return err
			}
		}
		rep.Parameters = policy.Config.NumParameters()
		rep.Vocab = policy.Config.VocabSize
		w := r.cfg.Warm
		sets := splitByLength(examples, shortLen)
		plan := chunkPlan(w.Steps, w.Chunks, len(sets[0]), len(sets[1]))
		r.logf("stage 3: warm start of a %d-parameter Qwen3 on %d scripted + %d direct examples (%.0f tokens each, %.0f in the loss; %.2f docs per search, gold kept %.0f%%, %d dropped): %d steps of %d in %d chunks (%d examples ≤ %d tokens, %d longer)",
			rep.Parameters, rep.AgentExamples, rep.DirectExamples, rep.MeanTokens, rep.MeanPolicyTokens,
			rep.APSMeanKept, 100*rep.APSGoldCovered, rep.Dropped, w.Steps, w.Batch, len(plan), len(sets[0]), shortLen, len(sets[1]))
		for c := rep.ChunksDone; c < len(plan); c++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			ch := plan[c]
			set := sets[ch.set]
			warm := w.Warmup
			if c > 0 {
				warm = min(max(1, w.Warmup/4), ch.steps/4)
			}
			oc := train.OptimConfig{LR: w.LR * chunkLRFactor(c, len(plan)), WarmupSteps: warm, TotalSteps: ch.steps, WeightDecay: 0.01,
				Beta1: 0.9, Beta2: 0.98, Epsilon: 1e-8, MaxGradNorm: 1, SkipNonFinite: true}
			count := 0
			for _, e := range set {
				count += len(e.Tokens)
			}
			start := time.Now()
			res, err := train.WarmStart(policy, set, train.WarmStartConfig{Optim: oc, Steps: ch.steps, BatchSize: w.Batch,
				MicroBatch: w.MicroBatch, Seed: r.cfg.Seed + uint64(c)*7919, Progress: r.opts.Progress})
			if err != nil {
				return err
			}
			sec := time.Since(start).Seconds()
			tokens := float64(ch.steps*w.Batch) * float64(count) / float64(len(set))
			rep.Seconds += sec
			rep.Steps += ch.steps
			rep.Losses = append(rep.Losses, res.Losses...)
			rep.PolicyTokens += res.Tokens
			rep.Tokens += int(tokens)
			rep.ChunksDone = c + 1
			rep.TokensPerSec = float64(rep.Tokens) / rep.Seconds
			r.logf("  chunk %d/%d (%s): %d steps, lr %.2g, cross-entropy %.3f → %.3f, %.0f tokens/s", c+1, len(plan),
				[]string{"short", "long"}[ch.set], ch.steps, oc.LR, res.Losses[0], res.Losses[len(res.Losses)-1], tokens/sec)
			if c+1 < len(plan) {
				if err := SaveModelFolder(partial, policy, d.tokPath); err != nil {
					return err
				}
			} else if err := SaveModelFolder(r.warmDir(), policy, d.tokPath); err != nil {
				return err
			}
			if err := writeJSON(reportPath, rep); err != nil {
				return err
			}
		}
		return os.RemoveAll(partial)
	})
	if err != nil {
		return nil, err
	}
	if err := readJSON(reportPath, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// shortLen splits the examples into two length classes: the trainer pads
// every micro-batch to a power-of-two length, so mixing a 300-token
// example into a batch of 150-token ones doubles its cost.
const shortLen = 256

// splitByLength returns the examples of at most n tokens and the others.
func splitByLength(ex []train.Trajectory, n int) [2][]train.Trajectory {
	var out [2][]train.Trajectory
	for _, e := range ex {
		if len(e.Tokens) <= n {
			out[0] = append(out[0], e)
		} else {
			out[1] = append(out[1], e)
		}
	}
	return out
}

// chunk is one WarmStart call: steps on one length class.
type chunk struct{ set, steps int }

// chunkPlan spreads steps over chunks, each on one length class, the long
// class getting a share of chunks and steps proportional to its examples
// (so every example is seen about equally often). Long chunks are spaced
// evenly between short ones; the first chunk is short (single-hop
// questions teach the grammar and the copying first).
func chunkPlan(steps, chunks, nShort, nLong int) []chunk {
	if nShort == 0 || nLong == 0 || chunks < 2 {
		set := 0
		if nShort == 0 {
			set = 1
		}
		out := make([]chunk, chunks)
		for c := range out {
			out[c] = chunk{set, steps*(c+1)/chunks - steps*c/chunks}
		}
		return out
	}
	frac := float64(nLong) / float64(nShort+nLong)
	cl := min(chunks-1, max(1, int(math.Round(frac*float64(chunks)))))
	sl := min(steps-(chunks-cl), max(cl, int(math.Round(frac*float64(steps)))))
	isLong := make([]bool, chunks)
	for i := range cl {
		isLong[min(chunks-1, int(math.Round(float64(i+1)*float64(chunks)/float64(cl+1))))] = true
	}
	isLong[0] = false
	// Rounding may have merged positions or hit chunk 0: fill from the end.
	for n, c := countTrue(isLong), chunks-1; n < cl && c > 0; c-- {
		if !isLong[c] {
			isLong[c] = true
			n++
		}
	}
	out := make([]chunk, chunks)
	var li, si int
	for c := range chunks {
		if isLong[c] {
			out[c] = chunk{1, sl*(li+1)/cl - sl*li/cl}
			li++
		} else {
			cs := chunks - cl
			out[c] = chunk{0, (steps-sl)*(si+1)/cs - (steps-sl)*si/cs}
			si++
		}
	}
	return out
}

func countTrue(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

// chunkLRFactor decays the learning rate over the chunks along a cosine
// evaluated at each chunk's middle, never below 0.1: piecewise-constant
// annealing, which the chunked warm start gets for free.
func chunkLRFactor(c, chunks int) float64 {
	if chunks <= 1 {
		return 1
	}
	f := 0.5 * (1 + math.Cos(math.Pi*(float64(c)+0.5)/float64(chunks)))
	return max(0.1, f)
}
