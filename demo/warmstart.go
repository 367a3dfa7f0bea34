package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/qa"
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
	// NoSearchExamples are the agent examples that answer without a
	// search, OneSearchExamples the two-hop ones that stop after the first
	// (WarmSettings.NoSearch, OneSearch).
	NoSearchExamples  int `json:"no_search_examples,omitempty"`
	OneSearchExamples int `json:"one_search_examples,omitempty"`
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
	Parameters     int64     `json:"parameters"`
	Vocab          int       `json:"vocab"`
	PromptTokens   float64   `json:"prompt_tokens"`
	APSMeanKept    float64   `json:"aps_mean_kept"`
	APSGoldCovered float64   `json:"aps_gold_covered"`
}

// promptIDs renders the rollout prompts of questions in mode
// (agent.PromptTokens: the ids a rollout of that mode starts from, which
// the warm start's examples must share with the later rollouts).
func (r *runner) promptIDs(ctx context.Context, d *worldData, qs []world.Question, mode agent.Mode) ([][]int, error) {
	rc := r.rolloutConfig(mode, 0)
	out := make([][]int, len(qs))
	for i, q := range qs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ids, err := agent.RolloutPromptTokens(d.tok, rc, q.Question)
		if err != nil {
			return nil, fmt.Errorf("render the prompt of question %s: %w", q.ID, err)
		}
		out[i] = ids
	}
	return out, nil
}

// agentQuestions converts world questions for the rollout.
func agentQuestions(qs []world.Question) []qa.Record {
	out := make([]qa.Record, len(qs))
	for i, q := range qs {
		out[i] = qa.Record{ID: q.ID, Question: q.Question, Answers: q.GoldenAnswers}
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
func example(d *worldData, prompt []int, segs []world.Segment) *agent.Trajectory {
	tr := &agent.Trajectory{IDs: append([]int(nil), prompt...), PromptLen: len(prompt), Mask: make([]uint8, len(prompt))}
	for _, s := range segs {
		text, inLoss := s.Text, uint8(0)
		if !s.Retrieved {
			text, inLoss = spaceAfterTags(text), 1
		}
		for _, id := range d.tok.Encode(text) {
			tr.IDs = append(tr.IDs, id)
			tr.Mask = append(tr.Mask, inLoss)
		}
	}
	tr.IDs = append(tr.IDs, d.eos)
	tr.Mask = append(tr.Mask, 1)
	return tr
}

// passageOf converts a retrieved document.
func passageOf(doc search.Doc) world.Passage {
	title, text := search.SplitContents(doc.Contents)
	return world.Passage{ID: doc.ID, Title: title, Text: text, Entity: -1}
}

// warmExamples builds the warm start's examples: every training question's
// scripted trajectory, its searches answered by BM25 with APS truncation
// by the calibration cal, plus direct-answer examples.
func (r *runner) warmExamples(ctx context.Context, d *worldData, cal conformal.Calibration, rep *WarmReport) ([]*agent.Trajectory, error) {
	qs := d.w.Splits[world.Train]
	hq := hopQueries(qs)
	hits, err := r.retrieveAll(ctx, d.retriever, queriesOf(hq), r.cfg.APS.Candidates, "warm-start retrieval")
	if err != nil {
		return nil, err
	}
	kept := map[string][]world.Passage{}
	var keptSum, covered int
	for i, h := range hits {
		n := cal.Keep(scoresOf(h))
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
	var out []*agent.Trajectory
	var tokens, policy, promptTok int
	pick := rand.New(rand.NewPCG(r.cfg.Seed, 0x5ea7c4))
	for i, q := range qs {
		searches := q.Hops
		if u, v := pick.Float64(), pick.Float64(); u < r.cfg.Warm.NoSearch {
			searches = 0
		} else if q.Hops > 1 && v < r.cfg.Warm.OneSearch {
			searches = 1
		}
		tr, err := world.ScriptSearches(q, searches, func(query string) []world.Passage { return kept[query] }, agent.InfoCode)
		if err != nil {
			return nil, err
		}
		if !tr.AllFound() {
			rep.Dropped++
			continue
		}
		switch {
		case searches == 0:
			rep.NoSearchExamples++
		case searches < q.Hops:
			rep.OneSearchExamples++
		}
		e := example(d, agentPrompts[i], tr.Segments)
		tokens += len(e.IDs)
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
// cross-entropy on the scripted trajectories (sft). Every Steps/Chunks
// steps, and when the context is cancelled, the policy, its AdamW moments
// and the batch sampler's state are saved together and committed
// atomically (see warmSaver), so a warm start stopped at any point, even by
// SIGKILL, resumes from its last save exactly as if it had not stopped.
func (r *runner) warmStart(ctx context.Context, d *worldData, aps APSReport) (*WarmReport, error) {
	reportPath := filepath.Join(r.out, "warm_start.json")
	saver := &warmSaver{root: filepath.Join(r.out, warmSavesDir), tokPath: d.tokPath}
	var rep WarmReport
	err := r.stage(ctx, "warm", func() error {
		w := r.cfg.Warm
		if err := readJSON(reportPath, &rep); err == nil && rep.Steps >= w.Steps {
			if _, err := os.Stat(filepath.Join(r.warmDir(), configFile)); err == nil {
				return os.RemoveAll(saver.root) // finished; only the marker was missing
			}
		}
		rep = WarmReport{}
		os.RemoveAll(filepath.Join(r.out, "warm-partial")) // saves of earlier versions: not resumable exactly
		examples, err := r.warmExamples(ctx, d, aps.Calibration, &rep)
		if err != nil {
			return err
		}
		wr := &warmRun{w: w, seed: r.cfg.Seed, saver: saver, logf: r.logf, progress: r.opts.Progress,
			load: func(dir string) (*qwen.Model, error) { return saver.load(dir, r.backend) },
			fresh: func() (*qwen.Model, error) {
				qc, err := r.cfg.Model.QwenConfig(d.tok.VocabSize(), d.eos)
				if err != nil {
					return nil, err
				}
				return qwen.NewRandom(qc, r.backend, r.cfg.Seed)
			}}
		policy, s, err := wr.train(ctx, examples, &rep)
		if err != nil {
			return err
		}
		// The final save is committed: export the policy, then the report
		// (its presence with every step marks the stage done), then drop
		// the saves.
		if err := SaveModelFolder(r.warmDir(), policy, d.tokPath); err != nil {
			return err
		}
		if err := writeJSON(reportPath, rep); err != nil {
			return err
		}
		if err := s.Clear(); err != nil {
			return err
		}
		return os.RemoveAll(saver.root)
	})
	if err != nil {
		return nil, err
	}
	if err := readJSON(reportPath, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// warmRun is the warm start's training loop with its saves, apart from the
// world it learns (tests drive it with a tiny model).
type warmRun struct {
	w        WarmSettings
	seed     uint64
	saver    *warmSaver
	fresh    func() (*qwen.Model, error)           // the initial policy
	load     func(dir string) (*qwen.Model, error) // a save's policy with its optimiser state
	logf     func(format string, args ...any)
	progress io.Writer
	// afterStep, when set (tests), is called after every step.
	afterStep func(step int)
}

// train runs the warm start on examples, or resumes it from the last
// committed save; rep carries the examples' statistics in and the report
// out. It returns the trained policy (its final save committed) and the
// trainer holding its optimiser.
func (wr *warmRun) train(ctx context.Context, examples []*agent.Trajectory, rep *WarmReport) (*qwen.Model, *train.SFT, error) {
	w := wr.w
	dir, st, resumed, err := wr.saver.latest()
	if err != nil {
		return nil, nil, err
	}
	var policy *qwen.Model
	if resumed {
		if policy, err = wr.load(dir); err != nil {
			return nil, nil, err
		}
		*rep = st.Report
		wr.logf("stage 3: warm start resumed at step %d of %d", rep.Steps, w.Steps)
	} else if policy, err = wr.fresh(); err != nil {
		return nil, nil, err
	}
	rep.Parameters = policy.Config.NumParameters()
	rep.Vocab = policy.Config.VocabSize
	wr.logf("stage 3: warm start of a %d-parameter Qwen3 (vocabulary %d) on %d scripted + %d direct examples (%.0f tokens each: %.0f prompt, %.0f in the loss; %.2f docs per search, gold kept %.0f%%, %d dropped): %d steps of %d",
		rep.Parameters, rep.Vocab, rep.AgentExamples, rep.DirectExamples, rep.MeanTokens, rep.PromptTokens, rep.MeanPolicyTokens,
		rep.APSMeanKept, 100*rep.APSGoldCovered, rep.Dropped, w.Steps, w.Batch)
	oc := train.OptimConfig{LR: w.LR, WarmupSteps: w.Warmup, TotalSteps: w.Steps, WeightDecay: 0.01,
		Beta1: 0.9, Beta2: 0.98, Epsilon: 1e-8, MaxGradNorm: 1, SkipNonFinite: true}
	s, err := train.NewSFT(policy, oc, w.Batch, wr.seed, w.EnvWeight)
	if err != nil {
		return nil, nil, err
	}
	if resumed {
		if err := s.Restore(st.SFT, len(examples)); err != nil {
			return nil, nil, fmt.Errorf("warm save %s: %w", dir, err)
		}
	}
	every := max(1, w.Steps/w.Chunks)
	saved := rep.Steps
	save := func() error {
		sst, err := s.State()
		if err != nil {
			return err
		}
		if err := wr.saver.save(policy, warmState{Report: *rep, SFT: sst}); err != nil {
			return err
		}
		saved = rep.Steps
		return nil
	}
	var bar *progressbar.ProgressBar
	if wr.progress != nil {
		bar = newBar(wr.progress, w.Steps, "warm start")
		_ = bar.Set(rep.Steps)
	}
	start, startTokens, baseSec := time.Now(), rep.Tokens, rep.Seconds
	for rep.Steps < w.Steps {
		if err := ctx.Err(); err != nil {
			if rep.Steps > saved {
				return nil, nil, errors.Join(err, save())
			}
			return nil, nil, err
		}
		lr := w.LR
		if float64(rep.Steps) >= w.AnnealFrom*float64(w.Steps) {
			lr *= w.AnnealFactor
		}
		loss, tokens, pol, err := s.Step(examples, lr)
		if err != nil {
			return nil, nil, fmt.Errorf("warm start step %d: %w", rep.Steps+1, err)
		}
		rep.Steps++
		rep.Losses = append(rep.Losses, loss)
		rep.Tokens += tokens
		rep.PolicyTokens += pol
		if wr.afterStep != nil {
			wr.afterStep(rep.Steps)
		}
		sec := time.Since(start).Seconds()
		rep.Seconds = baseSec + sec
		if bar != nil {
			bar.Describe(fmt.Sprintf("warm start (CE %.3f, %.0f tok/s)", tail(rep.Losses, 10), float64(rep.Tokens-startTokens)/sec))
			_ = bar.Add(1)
		}
		if rep.Steps%every == 0 || rep.Steps == w.Steps {
			rep.TokensPerSec = float64(rep.Tokens) / max(rep.Seconds, 1e-9)
			if err := save(); err != nil {
				return nil, nil, err
			}
			wr.logf("  step %d/%d: cross-entropy %.3f (mean of the last 10), lr %.2g, %.0f tokens/s", rep.Steps, w.Steps, tail(rep.Losses, 10), lr,
				float64(rep.Tokens-startTokens)/max(sec, 1e-9))
		}
	}
	if rep.Steps > saved { // resumed past the last step's save: cannot happen, kept for safety
		if err := save(); err != nil {
			return nil, nil, err
		}
	}
	return policy, s, nil
}
