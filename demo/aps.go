package demo

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/schollz/progressbar/v3"

	"github.com/cas-engine/cas/calibrate"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
	"github.com/cas-engine/cas/world"
)

// APSReport is the calibration of APS on the world (stage 2), written as
// aps/alpha-<α>.json: the calibration file (conformal.Calibration, which the
// agent and the trainer read with conformal.LoadCalibration) and its
// evaluation on the test split's hop queries.
type APSReport struct {
	// Calibration: the hop queries of the aps_calib split, each with
	// CalibCandidates retrieved passages and its exact gold passages,
	// meant for searches that keep from Candidates.
	conformal.Calibration
	// Test: the hop queries of the test split.
	Test int `json:"test"`
	// TestCoverage is the fraction of test queries whose gold passage is in
	// the APS prediction set over the CalibCandidates — the top k with
	// k = min{k : c_k ≥ q̂} clamped to [MinDocs, MaxDocs]. ScoreCoverage is
	// the fraction with E = c_r ≤ q̂, the quantity of the conformal
	// guarantee (≥ 1 − α in expectation over exchangeable queries); the set
	// holds the gold whenever E ≤ q̂ (and also when c_{r−1} < q̂ ≤ c_r, or the
	// clamp keeps it), so TestCoverage ≥ ScoreCoverage.
	TestCoverage  float64 `json:"test_coverage"`
	ScoreCoverage float64 `json:"score_coverage"`
	// CoverageBound is 1 − α − 2·sqrt(α(1−α)/n): two binomial standard
	// deviations below the target for n test queries.
	CoverageBound float64 `json:"coverage_bound"`
	// KeptCoverage is the fraction of test queries whose gold passage is
	// among the APS-kept ones of the Candidates retrieved per search (what
	// the agent reads), MeanKept their mean count and Histogram[k] the
	// number of queries keeping k.
	KeptCoverage float64 `json:"kept_coverage"`
	MeanKept     float64 `json:"mean_kept"`
	Histogram    []int   `json:"kept_histogram"`
	// Retrieved is the fraction of test queries with a gold passage among
	// the CalibCandidates at all; FixedCoverage among the fixed top-k.
	Retrieved     float64 `json:"gold_retrieved"`
	FixedK        int     `json:"fixed_k"`
	FixedCoverage float64 `json:"fixed_coverage"`
}

// hopQuery is one retrieval of a scripted trajectory: a question's hop.
type hopQuery struct {
	query string
	gold  map[string]bool
}

// hopQueries lists the hop queries of questions, in order.
func hopQueries(qs []world.Question) []hopQuery {
	var out []hopQuery
	for _, q := range qs {
		for h, hop := range q.HopInfo {
			g := map[string]bool{}
			for _, id := range q.GoldIDs[h] {
				g[id] = true
			}
			out = append(out, hopQuery{query: hop.Query, gold: g})
		}
	}
	return out
}

// retrieveAll retrieves k passages for every query, in batches, with a
// progress bar.
func (r *runner) retrieveAll(ctx context.Context, ret search.Retriever, queries []string, k int, what string) ([][]search.Hit, error) {
	const batch = 256
	var bar *progressbar.ProgressBar
	if r.opts.Progress != nil {
		bar = newBar(r.opts.Progress, len(queries), what)
	}
	out := make([][]search.Hit, 0, len(queries))
	for off := 0; off < len(queries); off += batch {
		hits, err := ret.Retrieve(ctx, queries[off:min(off+batch, len(queries))], k)
		if err != nil {
			return nil, fmt.Errorf("retrieve: %w", err)
		}
		out = append(out, hits...)
		if bar != nil {
			_ = bar.Add(len(hits))
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return out, nil
}

// goldRank is the index of the first hit that is a gold passage, or
// conformal.NoGold.
func goldRank(hits []search.Hit, gold map[string]bool) int {
	for i, h := range hits {
		if gold[h.Doc.ID] {
			return i
		}
	}
	return conformal.NoGold
}

func scoresOf(hits []search.Hit) []float64 {
	s := make([]float64, len(hits))
	for i, h := range hits {
		s[i] = float64(h.Score)
	}
	return s
}

// apsFor returns the APS of the settings.
func (c Config) apsFor() conformal.APS {
	return conformal.APS{Temperature: c.APS.Temperature, MinDocs: c.APS.MinDocs, MaxDocs: c.APS.MaxDocs}
}

// apsPath is the calibration report of level alpha.
func (r *runner) apsPath(alpha float64) string {
	return filepath.Join(r.out, "aps", "alpha-"+fmtAlpha(alpha)+".json")
}

// apsAlphas lists the levels the run calibrates: the default and every
// variant's.
func (c Config) apsAlphas() []float64 {
	out := []float64{c.APS.Alpha}
	for _, v := range c.Variants {
		if a := c.apsAlpha(v); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// calibrateAPS is stage 2: APS calibrated on the hop queries of the
// aps_calib split with their exact gold passages (calibrate.RunSplit with a
// calibrate.GoldIDJudge: no LLM judge needed), at every level the run
// uses, and evaluated on the test split's hop queries.
func (r *runner) calibrateAPS(ctx context.Context, d *worldData) (map[float64]APSReport, error) {
	reports := map[float64]APSReport{}
	err := r.stage(ctx, "aps", func() error {
		judge := calibrate.GoldIDJudge{}
		cal := hopQA(d.w.Splits[world.APSCalib], judge)
		test := hopQA(d.w.Splits[world.Test], judge)
		r.logf("stage 2: APS calibration on %d aps_calib hop queries, evaluation on %d test hop queries", len(cal), len(test))
		for _, alpha := range r.cfg.apsAlphas() {
			rep, err := calibrate.RunSplit(ctx, d.retriever, cal, test, judge, r.cfg.calibrateConfig(alpha), r.opts.Progress)
			if err != nil {
				return fmt.Errorf("APS calibration at alpha %g: %w", alpha, err)
			}
			if err := os.MkdirAll(filepath.Dir(r.apsPath(alpha)), 0o755); err != nil {
				return err
			}
			if err := conformal.SaveReport(r.apsPath(alpha), apsReportOf(rep, alpha)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, alpha := range r.cfg.apsAlphas() {
		var rep APSReport
		if err := readJSON(r.apsPath(alpha), &rep); err != nil {
			return nil, err
		}
		reports[alpha] = rep
	}
	return reports, nil
}

func queriesOf(hq []hopQuery) []string {
	out := make([]string, len(hq))
	for i, h := range hq {
		out[i] = h.query
	}
	return out
}

// hopQA lists the hop queries of questions as calibration questions (id
// "<question id>#<hop>") and records their gold passages in judge.
func hopQA(qs []world.Question, judge calibrate.GoldIDJudge) []qa.Record {
	var out []qa.Record
	for _, q := range qs {
		for h, hop := range q.HopInfo {
			id := fmt.Sprintf("%s#%d", q.ID, h)
			g := map[string]bool{}
			for _, pid := range q.GoldIDs[h] {
				g[pid] = true
			}
			judge[id] = g
			out = append(out, qa.Record{ID: id, Question: hop.Query, Answers: q.GoldenAnswers})
		}
	}
	return out
}

// calibrateConfig is the calibration of level alpha: CalibCandidates BM25
// candidates per query, searches keeping from Candidates, the paper's
// finite-sample quantile, the fixed top-k baseline.
func (c Config) calibrateConfig(alpha float64) calibrate.Config {
	cc := calibrate.DefaultConfig()
	cc.TopK, cc.Candidates, cc.Alpha, cc.APS, cc.FixedK = c.APS.CalibCandidates, c.APS.Candidates, alpha, c.apsFor(), c.APS.TopK
	cc.Rule = conformal.RuleConformal
	return cc
}

// apsReportOf is the demo's view of a calibration report: test coverage is
// the gold passage inside the APS set of the calibration candidates, kept
// coverage inside what a search keeps from its candidates.
func apsReportOf(rep calibrate.Report, alpha float64) APSReport {
	return APSReport{Calibration: rep.Calibration, Test: rep.Test, TestCoverage: rep.SetCoverage, ScoreCoverage: rep.SetStats.Coverage,
		CoverageBound: CoverageBound(alpha, rep.Test), KeptCoverage: rep.GoldKept, MeanKept: rep.SetStats.MeanKept, Histogram: rep.Histogram,
		Retrieved: float64(rep.TestGold) / float64(max(1, rep.Test)), FixedK: rep.Fixed.K, FixedCoverage: rep.Fixed.GoldKept}
}

// CoverageBound is the lowest test coverage consistent with the conformal
// guarantee up to sampling noise: 1 − α − 2·sqrt(α(1−α)/n), two standard
// deviations of a binomial proportion with success rate 1 − α over n
// queries.
func CoverageBound(alpha float64, n int) float64 {
	if n < 1 {
		return 0
	}
	return 1 - alpha - 2*math.Sqrt(alpha*(1-alpha)/float64(n))
}

// fmtAlpha is the key of a level in Result.APS ("0.2").
func fmtAlpha(a float64) string { return strconv.FormatFloat(a, 'g', -1, 64) }
