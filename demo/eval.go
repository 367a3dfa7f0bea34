package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/bench"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
	"github.com/cas-engine/cas/world"
)

// EvalResult is one policy evaluated on the test split (stage 5): greedy
// decoding, one trajectory per question.
type EvalResult struct {
	Name string `json:"name"`
	// Mode is "agent" (search agent) or "direct" (no retrieval);
	// Retrieval says how passages were kept ("APS α=0.2", "top-3", "none").
	Mode      string `json:"mode"`
	Retrieval string `json:"retrieval"`
	Model     string `json:"model"`

	Questions int `json:"questions"`
	Single    int `json:"single"`
	TwoHop    int `json:"two_hop"`
	// Exact match (paper Eq. 5's EM) overall and per question type.
	EM       float64 `json:"em"`
	EMSingle float64 `json:"em_single"`
	EMTwoHop float64 `json:"em_two_hop"`
	// SearchCalls is the mean number of searches per question;
	// DocsPerSearch the mean passages kept per search; Coverage the
	// fraction of searches whose kept passages hold a gold passage of the
	// question (any hop).
	SearchCalls   float64 `json:"search_calls"`
	DocsPerSearch float64 `json:"docs_per_search"`
	Coverage      float64 `json:"coverage"`
	// Redundant is the mean number of redundant searches per question
	// (agent.RedundantSearches: a repeated query, or only passages already
	// shown); TwoHopTwoSearches the share of two-hop questions answered
	// after at least two searches (one per hop, as the bridge needs).
	Redundant         float64 `json:"redundant_searches"`
	TwoHopTwoSearches float64 `json:"two_hop_two_searches"`
	// Searched is the share of questions answered after at least one
	// search (the rest answer from memory).
	Searched float64 `json:"searched"`
	// Reliability bins the answer-span NLL against EM (5 equal-count
	// bins) and ECE is its expected calibration error (Reliability);
	// Outcomes are the per-question records they come from.
	Reliability []ReliabilityBin  `json:"reliability,omitempty"`
	ECE         float64           `json:"ece"`
	Outcomes    []QuestionOutcome `json:"outcomes,omitempty"`
	// FormatValid is the rate of responses that follow the grammar;
	// Reward the mean reward of Eq. 5; Tokens the mean response length.
	FormatValid float64  `json:"format_valid"`
	Reward      float64  `json:"reward"`
	Tokens      float64  `json:"response_tokens"`
	Seconds     float64  `json:"seconds"`
	Samples     []Sample `json:"samples,omitempty"`
}

// Sample is one evaluated trajectory, kept for the report.
type Sample struct {
	Question string   `json:"question"`
	Golds    []string `json:"golds"`
	Response string   `json:"response"`
	EM       bool     `json:"em"`
}

// evalSpec names one evaluation.
type evalSpec struct {
	name  string
	model string     // model folder
	mode  agent.Mode // agent or direct
	aps   string     // calibration report ("": fixed top-k)
}

// evalQuestions are the test questions every evaluation uses.
func (r *runner) evalQuestions(d *worldData) []world.Question {
	qs := d.w.Splits[world.Test]
	if n := r.cfg.Eval.Questions; n > 0 && n < len(qs) {
		qs = qs[:n]
	}
	return qs
}

func (r *runner) evalPath(name string) string { return filepath.Join(r.out, "eval", name+".json") }

// evaluate runs one evaluation (a stage of its own) and returns its result.
func (r *runner) evaluate(ctx context.Context, d *worldData, s evalSpec) (EvalResult, error) {
	var res EvalResult
	err := r.stage(ctx, "eval-"+s.name, func() error {
		out, err := r.runEval(ctx, d, s)
		if err != nil {
			return err
		}
		return writeJSON(r.evalPath(s.name), out)
	})
	if err != nil {
		return res, err
	}
	return res, readJSON(r.evalPath(s.name), &res)
}

func (r *runner) runEval(ctx context.Context, d *worldData, s evalSpec) (EvalResult, error) {
	start := time.Now()
	m, err := LoadModelFolder(s.model, r.backend)
	if err != nil {
		return EvalResult{}, err
	}
	rc := r.rolloutConfig(s.mode, 0)
	res := EvalResult{Name: s.name, Mode: s.mode.String(), Model: s.model, Retrieval: "none"}
	var ret search.Retriever
	if s.mode != agent.ModeDirect {
		ret = d.retriever
		res.Retrieval = fmt.Sprintf("top-%d", rc.TopK)
		if s.aps != "" {
			cal, err := conformal.LoadCalibration(s.aps)
			if err != nil {
				return res, err
			}
			rc.SetCalibration(cal)
			res.Retrieval = fmt.Sprintf("APS α=%g", cal.Alpha)
		}
	}
	run, err := agent.NewRunner(agent.QwenPolicy{Model: m}, d.tok, ret, rc)
	if err != nil {
		return res, err
	}
	qs := r.evalQuestions(d)
	byID := make(map[string]*agent.Trajectory, len(qs))
	run.OnDone = func(t *agent.Trajectory) { byID[t.QuestionID] = t }
	set := bench.Dataset{Name: "test", Path: "test split", Questions: make([]qa.Record, len(qs))}
	for i, q := range qs {
		set.Questions[i] = qa.Record{ID: q.ID, Question: q.Question, Answers: q.GoldenAnswers}
	}
	if _, err := bench.Eval(ctx, run, []bench.Dataset{set}, bench.EvalOptions{Batch: r.cfg.Eval.Batch, Model: s.model, Retrieval: res.Retrieval, Progress: r.opts.Progress}, nil); err != nil {
		return res, fmt.Errorf("eval %s: %w", s.name, err)
	}
	trajs := make([]*agent.Trajectory, len(qs))
	for i, q := range qs {
		if trajs[i] = byID[q.ID]; trajs[i] == nil {
			return res, fmt.Errorf("eval %s: no trajectory for question %s", s.name, q.ID)
		}
	}
	summarize(&res, qs, trajs)
	res.Seconds = time.Since(start).Seconds()
	r.logf("  eval %s (%s): EM %.3f (single-hop %.3f, two-hop %.3f), %.2f searches (searched %.2f, %.2f redundant; two-hop with 2+ searches %.2f), %.2f docs/search, format-valid %.2f, ECE %.3f",
		s.name, res.Retrieval, res.EM, res.EMSingle, res.EMTwoHop, res.SearchCalls, res.Searched, res.Redundant, res.TwoHopTwoSearches, res.DocsPerSearch, res.FormatValid, res.ECE)
	return res, nil
}

// summarize fills the metrics of res from one trajectory per question.
func summarize(res *EvalResult, qs []world.Question, trajs []*agent.Trajectory) {
	var em, emS, emT, valid, searches, docs, covered, redundant, chained, searched int
	var reward, tokens float64
	for i, t := range trajs {
		q := qs[i]
		gold := map[string]bool{}
		for _, ids := range q.GoldIDs {
			for _, id := range ids {
				gold[id] = true
			}
		}
		if q.Hops > 1 {
			res.TwoHop++
		} else {
			res.Single++
		}
		if t.EM {
			em++
			if q.Hops > 1 {
				emT++
			} else {
				emS++
			}
		}
		if t.Outcome.Valid {
			valid++
		}
		o := outcomeOf(q, t)
		res.Outcomes = append(res.Outcomes, o)
		redundant += o.Redundant
		if o.Searches > 0 {
			searched++
		}
		if q.Hops > 1 && o.Searches >= 2 {
			chained++
		}
		reward += t.Outcome.Reward
		tokens += float64(len(t.IDs) - t.PromptLen)
		for _, sc := range t.Searches {
			searches++
			docs += len(sc.Kept)
			for _, id := range sc.Kept {
				if gold[id] {
					covered++
					break
				}
			}
		}
		if len(res.Samples) < 6 {
			res.Samples = append(res.Samples, Sample{Question: q.Question, Golds: q.GoldenAnswers, Response: t.Response, EM: t.EM})
		}
	}
	n := float64(max(1, len(trajs)))
	res.Questions = len(trajs)
	res.EM = float64(em) / n
	res.EMSingle = ratio(emS, res.Single)
	res.EMTwoHop = ratio(emT, res.TwoHop)
	res.FormatValid = float64(valid) / n
	res.Reward = reward / n
	res.Tokens = tokens / n
	res.SearchCalls = float64(searches) / n
	res.DocsPerSearch = ratio(docs, searches)
	res.Coverage = ratio(covered, searches)
	res.Redundant = float64(redundant) / n
	res.TwoHopTwoSearches = ratio(chained, res.TwoHop)
	res.Searched = float64(searched) / n
	res.Reliability, res.ECE = Reliability(res.Outcomes, reliabilityBins)
}

// reliabilityBins is the number of NLL bins of an evaluation's
// reliability table.
const reliabilityBins = 5

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
