package demo

import (
	"context"
	"iter"
	"path/filepath"
	"slices"
	"time"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/train"
	"github.com/cas-engine/cas/world"
)

// Evaluation names of the demo's baselines.
const (
	EvalNoRetrieval = "no-retrieval"
	EvalWarmStart   = "warm-start"
)

// Result is everything a run measured; report.md is written from it and it
// is saved as result.json.
type Result struct {
	Config Config `json:"config"`
	// World sizes.
	Passages  int                     `json:"passages"`
	Questions map[string][2]int       `json:"questions"` // split → [single-hop, two-hop]
	APS       map[string]APSReport    `json:"aps"`       // by level ("0.2")
	Warm      *WarmReport             `json:"warm_start"`
	Bootstrap []float64               `json:"aci_bootstrap"`
	Evals     []EvalResult            `json:"evals"`
	Metrics   map[string][]StepSeries `json:"-"`
	// NoUpdate are the frozen warm start's rollout metrics on the prompts
	// every variant saw, step by step: what their reward is read against.
	NoUpdate []StepSeries `json:"-"`
	// Timings are this invocation's stage wall times; Wall the total.
	Timings []StageTime `json:"timings"`
	Wall    float64     `json:"wall_s"`
	Backend string      `json:"backend"`
}

// StepSeries is one variant's per-step training metrics.
type StepSeries = train.StepMetrics

// Trained yields, in the configuration's order, each variant that has
// training metrics, with them: what the report's tables and the plots
// show per variant.
func (r *Result) Trained() iter.Seq2[Variant, []StepSeries] {
	return func(yield func(Variant, []StepSeries) bool) {
		for _, v := range r.Config.Variants {
			if ms := r.Metrics[v.Name]; len(ms) > 0 && !yield(v, ms) {
				return
			}
		}
	}
}

// Eval returns the evaluation of the given name.
func (r *Result) Eval(name string) (EvalResult, bool) {
	for _, e := range r.Evals {
		if e.Name == name {
			return e, true
		}
	}
	return EvalResult{}, false
}

// Run executes the demo into out (created; an earlier interrupted run of
// the same config there is resumed): 1. the world and its BM25 index,
// 2. APS calibrated on the aps_calib split, 3. a tiny Qwen3 warm-started on
// scripted trajectories, 4. ACI bootstrapped and GRPO run for every
// variant, 5. the test split evaluated for the baselines and variants,
// 6. report.md and the plots. A cancelled ctx (Ctrl-C) stops at the next
// safe point with an error wrapping ErrInterrupted.
func Run(ctx context.Context, cfg Config, out string, opts Options) (*Result, error) {
	start := time.Now()
	r, err := newRunner(cfg, out, opts)
	if err != nil {
		return nil, err
	}
	res, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	res.Wall = time.Since(start).Seconds()
	res.Timings = r.timings
	if err := writeJSON(filepath.Join(out, ResultFile), res); err != nil {
		return nil, err
	}
	if err := WritePlots(filepath.Join(out, PlotsDir), res); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(out, ReportFile), []byte(Report(res))); err != nil {
		return nil, err
	}
	r.logf("stage 6: report %s, plots in %s (%.0f s in all)", filepath.Join(out, ReportFile), filepath.Join(out, PlotsDir), res.Wall)
	return res, nil
}

func (r *runner) run(ctx context.Context) (*Result, error) {
	d, err := r.buildWorld(ctx)
	if err != nil {
		return nil, err
	}
	defer d.close()
	res := &Result{Config: r.cfg, Passages: len(d.w.Passages), Questions: map[string][2]int{}, APS: map[string]APSReport{},
		Metrics: map[string][]StepSeries{}, Backend: r.backend.Name()}
	for s := range world.NumSplits {
		var n [2]int
		for _, q := range d.w.Splits[s] {
			n[min(q.Hops, 2)-1]++
		}
		res.Questions[s.String()] = n
	}
	aps, err := r.calibrateAPS(ctx, d)
	if err != nil {
		return nil, err
	}
	for a, rep := range aps {
		res.APS[fmtAlpha(a)] = rep
		r.logf("  APS α=%g: q̂ = %.4g, test coverage %.3f (bound %.3f), %.2f of %d candidates kept (gold kept %.3f; top-%d %.3f)",
			a, float64(rep.QHat), rep.TestCoverage, rep.CoverageBound, rep.MeanKept, rep.Candidates, rep.KeptCoverage, rep.FixedK, rep.FixedCoverage)
	}
	def := aps[r.cfg.APS.Alpha]
	if res.Warm, err = r.warmStart(ctx, d, def); err != nil {
		return nil, err
	}
	if r.cfg.GRPO.Steps > 0 {
		if res.Bootstrap, err = r.bootstrapACI(ctx, d); err != nil {
			return nil, err
		}
		for _, v := range append(slices.Clone(r.cfg.Variants), r.cfg.noUpdateVariant()) {
			if err := r.runVariant(ctx, d, v); err != nil {
				return nil, err
			}
		}
	}
	r.logf("stage 5: evaluation on %d test questions", len(r.evalQuestions(d)))
	specs := []evalSpec{
		{name: EvalNoRetrieval, model: r.warmDir(), mode: agent.ModeDirect},
		{name: EvalWarmStart, model: r.warmDir(), mode: agent.ModeAgent, aps: r.apsPath(r.cfg.APS.Alpha)},
	}
	for _, v := range r.cfg.Variants {
		dir, err := r.variantModel(v)
		if err != nil {
			return nil, err
		}
		s := evalSpec{name: v.Name, model: dir, mode: agent.ModeAgent}
		if v.APS {
			s.aps = r.apsPath(r.cfg.apsAlpha(v))
		}
		specs = append(specs, s)
	}
	for _, s := range specs {
		e, err := r.evaluate(ctx, d, s)
		if err != nil {
			return nil, err
		}
		res.Evals = append(res.Evals, e)
	}
	for _, v := range r.cfg.Variants {
		m, err := r.variantMetrics(v)
		if err != nil {
			return nil, err
		}
		res.Metrics[v.Name] = m
	}
	if res.NoUpdate, err = r.variantMetrics(r.cfg.noUpdateVariant()); err != nil {
		return nil, err
	}
	return res, nil
}
