package calibrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
	"github.com/schollz/progressbar/v3"
)

// Config is one calibration run.
type Config struct {
	TopK       int                    // candidates retrieved per question (code: 20 at calibration)
	Candidates int                    // candidates per search at use time (0: TopK, exchangeable; code: 5)
	Alpha      float64                // miscoverage level α; target coverage 1 − α
	N          int                    // calibration questions, drawn at random
	Test       int                    // held-out questions (0: all the others)
	Seed       uint64                 // question draw (and U with Randomized)
	APS        conformal.APS          // temperature and clamps
	Rule       conformal.QuantileRule // paper: conformal; code: higher
	Randomized bool                   // E = c_{r−1} + U·p_r instead of c_r
	FixedK     int                    // the fixed top-k baseline (Search-R1: 3)
	Batch      int                    // questions per Retrieve call
	// GoldOnly keeps only questions whose gold passage is among the TopK
	// candidates, for calibration and evaluation alike: coverage then is
	// conditional on retrieval success, as on the paper's judge-labelled
	// calibration set where every query has a gold document. Without it a
	// question with no retrieved gold scores E = 1 (the official code).
	GoldOnly bool
}

// DefaultConfig returns the paper's setting: α = 0.2, T = 0.01, k ∈ [1, 5],
// the finite-sample conformal quantile, 150 calibration questions, fixed
// top-3 baseline, and 5 candidates per question, as many as a training
// search retrieves (so calibration and use scores are exchangeable; the
// official code calibrates on 20 and keeps from 5: TopK 20, Candidates 5).
func DefaultConfig() Config {
	return Config{
		TopK: 5, Alpha: conformal.PaperAlpha, N: 150, APS: conformal.PaperAPS(),
		Rule: conformal.RuleConformal, FixedK: 3, Batch: 256,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.TopK < 1:
		return fmt.Errorf("topk %d < 1", c.TopK)
	case c.Candidates < 0 || c.Candidates > c.TopK:
		return fmt.Errorf("candidates %d outside [0, topk %d]", c.Candidates, c.TopK)
	case !(c.Alpha > 0 && c.Alpha < 1):
		return fmt.Errorf("alpha %v outside (0, 1)", c.Alpha)
	case c.N < 1:
		return fmt.Errorf("n %d < 1", c.N)
	case c.Test < 0:
		return fmt.Errorf("test %d < 0", c.Test)
	case c.FixedK < 1:
		return fmt.Errorf("fixed k %d < 1", c.FixedK)
	}
	return c.APS.Validate()
}

// SetStats describe one way of choosing passages on the held-out questions.
type SetStats struct {
	// Coverage: for APS, the fraction of held-out questions whose score
	// E ≤ q̂ (the quantity the conformal guarantee is about; a question
	// without a retrieved gold passage has E = 1); for the fixed baseline,
	// the fraction whose gold passage is among the kept ones.
	Coverage float64 `json:"coverage"`
	// CoverageKept: among held-out questions whose gold passage was
	// retrieved, the fraction with the gold inside the kept (clamped) set.
	CoverageKept float64 `json:"coverage_kept"`
	// GoldKept: the fraction of all held-out questions with the gold passage
	// inside the kept set.
	GoldKept float64 `json:"gold_kept"`
	// MeanKept is the mean number of passages kept.
	MeanKept float64 `json:"mean_kept"`
	// Histogram[k] counts held-out questions that kept k passages.
	Histogram []int `json:"kept_histogram"`
}

// Report is the result of Run, written as qhat.json: the calibration file
// (conformal.Calibration, what the trainer and the evaluator read) with the
// held-out evaluation and the run's settings next to it.
type Report struct {
	conformal.Calibration
	SetStats     // APS on the held-out questions
	Test     int `json:"test"`
	TestGold int `json:"test_gold_retrieved"`
	CalGold  int `json:"calibration_gold_retrieved"`
	// SetCoverage is the fraction of held-out questions whose gold passage
	// is inside the APS prediction set over all TopK candidates (the set
	// q̂ was calibrated for; GoldKept is the set a search keeps from its
	// Candidates).
	SetCoverage   float64    `json:"set_coverage"`
	Fixed         FixedStats `json:"fixed"`
	TopK          int        `json:"topk"`
	Seed          uint64     `json:"seed"`
	Judge         string     `json:"judge"`
	GoldOnly      bool       `json:"gold_only"`
	SkippedNoGold int        `json:"skipped_no_gold,omitempty"` // questions dropped by GoldOnly
	QA            string     `json:"qa,omitempty"`
	Index         string     `json:"index,omitempty"`
	Seconds       float64    `json:"seconds"`
}

// FixedStats are SetStats of the fixed top-k baseline.
type FixedStats struct {
	K int `json:"k"`
	SetStats
}

// labelled is one question with its candidates' scores and gold index.
type labelled struct {
	scores []float64 // retrieval order (descending)
	gold   int       // index into scores, or conformal.NoGold
}

// Run draws cfg.N calibration questions and cfg.Test held-out ones (all the
// others when 0) with cfg.Seed, retrieves cfg.TopK candidates for each,
// labels gold passages with judge, calibrates q̂ as the (1 − α) quantile of
// the calibration scores under cfg.Rule, and evaluates APS and the fixed
// top-k baseline on the held-out questions. progress, when non-nil, shows a
// progress bar.
func Run(ctx context.Context, r search.Retriever, qs []qa.Record, judge Judge, cfg Config, progress io.Writer) (Report, error) {
	start := time.Now()
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	if cfg.N >= len(qs) {
		return Report{}, fmt.Errorf("n = %d calibration questions leaves none of the %d to evaluate on", cfg.N, len(qs))
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5851f42d4c957f2d))
	chosen := rng.Perm(len(qs))
	if !cfg.GoldOnly {
		test := len(qs) - cfg.N
		if cfg.Test > 0 {
			test = min(cfg.Test, test)
		}
		chosen = chosen[:cfg.N+test]
	}
	lab, err := retrieveAndLabel(ctx, r, qs, chosen, judge, cfg, progress)
	if err != nil {
		return Report{}, err
	}
	skipped := 0
	if cfg.GoldOnly {
		// Keep the questions with a retrieved gold, in draw order.
		keptLab, keptIdx := lab[:0], chosen[:0:0]
		for i, l := range lab {
			if l.gold != conformal.NoGold {
				keptLab = append(keptLab, l)
				keptIdx = append(keptIdx, chosen[i])
			}
		}
		skipped = len(lab) - len(keptLab)
		if len(keptLab) <= cfg.N {
			return Report{}, fmt.Errorf("only %d of %d questions have a retrieved gold passage: too few for n = %d plus held-out questions", len(keptLab), len(lab), cfg.N)
		}
		test := len(keptLab) - cfg.N
		if cfg.Test > 0 {
			test = min(cfg.Test, test)
		}
		lab, chosen = keptLab[:cfg.N+test], keptIdx[:cfg.N+test]
	}
	rep, err := evaluate(lab[:cfg.N], lab[cfg.N:], func(i int) string { return qs[chosen[cfg.N+i]].ID }, judge, cfg)
	if err != nil {
		return Report{}, err
	}
	rep.SkippedNoGold = skipped
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// RunSplit is Run on a given split instead of a random draw: it calibrates
// on every question of cal and evaluates on every question of held (in
// order; cfg.N, cfg.Test and cfg.Seed's draw are not used; cfg.GoldOnly
// is refused: a question without a retrieved gold scores E = 1).
// A world that knows its gold passages calibrates with GoldIDJudge.
func RunSplit(ctx context.Context, r search.Retriever, cal, held []qa.Record, judge Judge, cfg Config, progress io.Writer) (Report, error) {
	start := time.Now()
	cfg.N, cfg.Test = max(1, len(cal)), 0
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	if len(cal) == 0 || len(held) == 0 {
		return Report{}, fmt.Errorf("split: %d calibration and %d held-out questions (need both)", len(cal), len(held))
	}
	if cfg.GoldOnly {
		return Report{}, errors.New("split: gold_only applies to a random draw only")
	}
	all := append(append([]qa.Record(nil), cal...), held...)
	chosen := make([]int, len(all))
	for i := range chosen {
		chosen[i] = i
	}
	lab, err := retrieveAndLabel(ctx, r, all, chosen, judge, cfg, progress)
	if err != nil {
		return Report{}, err
	}
	rep, err := evaluate(lab[:len(cal)], lab[len(cal):], func(i int) string { return held[i].ID }, judge, cfg)
	if err != nil {
		return Report{}, err
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// evaluate calibrates q̂ on the labelled calibration questions and
// evaluates APS and the fixed top-k on the held-out ones (heldID names
// held[i] in errors).
func evaluate(cal, held []labelled, heldID func(int) string, judge Judge, cfg Config) (Report, error) {
	// Calibration scores S_i and the threshold (log scale).
	var urng *rand.Rand
	if cfg.Randomized {
		urng = rand.New(rand.NewPCG(cfg.Seed^0x9e3779b97f4a7c15, cfg.Seed))
	}
	calQ := make([]conformal.Query, len(cal))
	rep := Report{TopK: cfg.TopK, Seed: cfg.Seed, Judge: judgeName(judge), GoldOnly: cfg.GoldOnly}
	for i, q := range cal {
		calQ[i] = conformal.Query{Scores: q.scores, Gold: q.gold}
		if q.gold != conformal.NoGold {
			rep.CalGold++
		}
	}
	c, err := cfg.APS.Calibrate(calQ, cfg.Alpha, cfg.Rule, urng)
	if err != nil {
		return Report{}, fmt.Errorf("calibration: %w", err)
	}
	c.CalibCandidates = cfg.TopK
	m := cfg.Candidates
	if m == 0 {
		m = cfg.TopK
	}
	c.UseCandidates(m, calQ)
	rep.Calibration = c

	// Held-out evaluation: APS (keeping from the top m) and fixed top-k.
	aps := SetStats{Histogram: make([]int, cfg.TopK+1)}
	fixed := SetStats{Histogram: make([]int, cfg.TopK+1)}
	var apsCovered, inSet, apsKeptGold, fixedKeptGold, apsKeptSum, fixedKeptSum int
	for i, q := range held {
		s, err := apsLogScore(cfg.APS, q, urng)
		if err != nil {
			return Report{}, fmt.Errorf("held-out question %q: %w", heldID(i), err)
		}
		if s <= float64(c.QHatLog) {
			apsCovered++
		}
		if q.gold != conformal.NoGold && len(q.scores) > 0 && slices.Contains(c.KeepIndices(q.scores), q.gold) {
			inSet++
		}
		var kept []int
		if len(q.scores) > 0 {
			kept = c.KeepIndices(q.scores[:min(m, len(q.scores))])
		}
		fk := min(cfg.FixedK, len(q.scores))
		aps.Histogram[len(kept)]++
		fixed.Histogram[fk]++
		apsKeptSum += len(kept)
		fixedKeptSum += fk
		if q.gold == conformal.NoGold {
			continue
		}
		rep.TestGold++
		if slices.Contains(kept, q.gold) {
			apsKeptGold++
		}
		if q.gold < fk {
			fixedKeptGold++
		}
	}
	n := float64(len(held))
	aps.Coverage = float64(apsCovered) / n
	aps.GoldKept = float64(apsKeptGold) / n
	aps.MeanKept = float64(apsKeptSum) / n
	fixed.Coverage = float64(fixedKeptGold) / n
	fixed.GoldKept = fixed.Coverage
	fixed.MeanKept = float64(fixedKeptSum) / n
	if rep.TestGold > 0 {
		aps.CoverageKept = float64(apsKeptGold) / float64(rep.TestGold)
		fixed.CoverageKept = float64(fixedKeptGold) / float64(rep.TestGold)
	}
	aps.Histogram = trimHistogram(aps.Histogram)
	fixed.Histogram = trimHistogram(fixed.Histogram)
	rep.Test = len(held)
	rep.SetCoverage = float64(inSet) / n
	rep.SetStats = aps
	rep.Fixed = FixedStats{K: cfg.FixedK, SetStats: fixed}
	return rep, nil
}

// apsLogScore is the log-scale score S = −log(1 − c_r) (or its randomized
// version), +Inf for a question without candidates or without a gold
// passage among them; it draws one U per question with urng.
func apsLogScore(a conformal.APS, q labelled, urng *rand.Rand) (float64, error) {
	if urng != nil {
		return a.RandomizedLogScore(q.scores, q.gold, urng.Float64())
	}
	return a.LogScore(q.scores, q.gold)
}

// retrieveAndLabel retrieves the chosen questions in batches and labels
// their gold passages, in the order of chosen.
func retrieveAndLabel(ctx context.Context, r search.Retriever, qs []qa.Record, chosen []int, judge Judge, cfg Config, progress io.Writer) ([]labelled, error) {
	var bar *progressbar.ProgressBar
	if progress != nil {
		bar = progressbar.NewOptions(len(chosen), progressbar.OptionSetWriter(progress),
			progressbar.OptionSetDescription("retrieve"), progressbar.OptionShowCount(),
			progressbar.OptionShowIts(), progressbar.OptionSetItsString("q"),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionOnCompletion(func() { io.WriteString(progress, "\n") }))
		defer bar.Finish()
	}
	batch := cfg.Batch
	if batch <= 0 {
		batch = 256
	}
	out := make([]labelled, len(chosen))
	for lo := 0; lo < len(chosen); lo += batch {
		hi := min(lo+batch, len(chosen))
		queries := make([]string, hi-lo)
		for i := range queries {
			queries[i] = qs[chosen[lo+i]].Question
		}
		hits, err := r.Retrieve(ctx, queries, cfg.TopK)
		if err != nil {
			return nil, fmt.Errorf("retrieve: %w", err)
		}
		if len(hits) != len(queries) {
			return nil, fmt.Errorf("retriever returned %d lists for %d questions", len(hits), len(queries))
		}
		for i, hs := range hits {
			q := qs[chosen[lo+i]]
			gold, err := judge.Gold(ctx, q, hs)
			if err != nil {
				return nil, fmt.Errorf("judge question %q: %w", q.ID, err)
			}
			if gold < -1 || gold >= len(hs) {
				return nil, fmt.Errorf("judge returned gold %d for %d hits (question %q)", gold, len(hs), q.ID)
			}
			l := labelled{scores: make([]float64, len(hs)), gold: gold}
			for j, h := range hs {
				l.scores[j] = float64(h.Score)
			}
			out[lo+i] = l
		}
		if bar != nil {
			bar.Add(hi - lo)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no questions")
	}
	return out, nil
}

func trimHistogram(h []int) []int {
	n := len(h)
	for n > 1 && h[n-1] == 0 {
		n--
	}
	return h[:n]
}

func judgeName(j Judge) string {
	if _, ok := j.(ContainsJudge); ok {
		return "contains"
	}
	if s, ok := j.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", j)
}
