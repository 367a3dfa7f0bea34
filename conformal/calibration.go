package conformal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/internal/loadfile"
)

// Calibration is an APS calibration: the settings, the threshold on both
// scales, how it was computed and how it covers its calibration set. It is
// the one calibration file of the project (qhat.json), written by Save (or
// SaveReport, for a report that embeds it) and read by LoadCalibration, by
// `cas calibrate aps`, `cas conformal calibrate-aps`, the demo, the trainer
// and the evaluator alike.
//
// Decisions use the log-scale threshold QHatLog (S = −log(1 − c_r), see
// LogScore); QHat = 1 − e^{−QHatLog} is the familiar E-scale value, shown to
// people, and rounds to 1 where QHatLog still separates queries.
type Calibration struct {
	// APS holds the temperature and the clamps the threshold is for.
	APS
	// QHat is the threshold on the E scale, q̂_E = 1 − e^{−q̂_S} (display).
	QHat JSONFloat `json:"qhat"`
	// QHatLog is the threshold on the log scale, q̂_S: the conformal
	// order statistic of the calibration scores S_i (+Inf when n is too
	// small for α). It decides: k = min{k : −L_k ≥ q̂_S}.
	QHatLog JSONFloat `json:"qhat_log"`
	// Alpha is the miscoverage level α; the target coverage is 1 − α.
	Alpha          float64 `json:"alpha"`
	TargetCoverage float64 `json:"target_coverage"`
	// Rule is the quantile rule that produced the threshold.
	Rule QuantileRule `json:"quantile"`
	// Randomized tells whether the randomized score was used; Seed is the
	// seed of its U draws, when the writer records one.
	Randomized bool    `json:"randomized"`
	Seed       *uint64 `json:"seed,omitempty"`
	// N is the number of calibration queries, NoGold those without a gold
	// document among their candidates (score +∞).
	N      int `json:"n"`
	NoGold int `json:"no_gold"`
	// CalibCandidates is the number of candidates per calibration query (the
	// largest, when they differ); Candidates is the number retrieved per
	// search at use time that the threshold is meant for. They are equal by
	// default (exchangeable scores); the official code calibrates on 20 and
	// keeps from 5 (see UseCandidates). 0 = not recorded (older files).
	CalibCandidates int `json:"calib_candidates"`
	Candidates      int `json:"candidates"`
	// Coverage is the fraction of calibration queries with S_i ≤ q̂_S (the
	// quantity of the conformal guarantee, ≥ 1 − α in expectation).
	Coverage float64 `json:"calibration_coverage"`
	// KeptCoverage is the fraction of calibration queries whose gold is among
	// the documents kept from their top-Candidates (with the clamps); queries
	// without gold never count. MeanKept is the mean kept count.
	KeptCoverage float64 `json:"calibration_kept_coverage"`
	MeanKept     float64 `json:"calibration_mean_kept"`
	// Warnings name what makes the threshold suspect (see Warn).
	Warnings []string `json:"warnings,omitempty"`
	// Scores are the calibration scores S_i on the log scale, in input
	// order (not saved).
	Scores []float64 `json:"-"`
}

// Calibrate computes every query's log-scale calibration score S_i (LogScore,
// or RandomizedLogScore drawing one U per query in input order from rng when
// rng ≠ nil) and the threshold
//
//	q̂_S = Quantile({S_i}, 1−α, rule),   q̂_E = 1 − e^{−q̂_S}
//
// (paper: RuleConformal; code: RuleHigher). The order statistics commute with
// the monotone map E = 1 − e^{−S}, so q̂_S is the E-scale threshold in exact
// arithmetic; RuleLinear interpolates on the E scale, computed in log space.
// Candidates is set to CalibCandidates; UseCandidates changes it. Errors name
// the offending query (0-based).
func (a APS) Calibrate(queries []Query, alpha float64, rule QuantileRule, rng *rand.Rand) (Calibration, error) {
	if err := a.Validate(); err != nil {
		return Calibration{}, err
	}
	if !(alpha > 0 && alpha < 1) {
		return Calibration{}, fmt.Errorf("alpha %v outside (0, 1)", alpha)
	}
	if rule < RuleConformal || rule > RuleLinear {
		return Calibration{}, fmt.Errorf("invalid quantile rule %d", int(rule))
	}
	if len(queries) == 0 {
		return Calibration{}, errors.New("no calibration queries")
	}
	c := Calibration{APS: a, N: len(queries), Alpha: alpha, TargetCoverage: 1 - alpha, Rule: rule, Randomized: rng != nil}
	c.Scores = make([]float64, len(queries))
	for i, q := range queries {
		var err error
		if rng != nil {
			c.Scores[i], err = a.RandomizedLogScore(q.Scores, q.Gold, rng.Float64())
		} else {
			c.Scores[i], err = a.LogScore(q.Scores, q.Gold)
		}
		if err != nil {
			return Calibration{}, fmt.Errorf("query %d: %w", i, err)
		}
		c.CalibCandidates = max(c.CalibCandidates, len(q.Scores))
		if q.Gold == NoGold {
			c.NoGold++
		}
	}
	q := LogQuantile(c.Scores, 1-alpha, rule)
	c.QHatLog, c.QHat = JSONFloat(q), JSONFloat(EFromLogScore(q))
	covered := 0
	for _, s := range c.Scores {
		if s <= q {
			covered++
		}
	}
	c.Coverage = float64(covered) / float64(len(queries))
	c.UseCandidates(c.CalibCandidates, queries)
	return c, nil
}

// UseCandidates sets the number of candidates per search the threshold is
// meant for (the official code: calibrate on 20, keep from 5) and recomputes
// the kept-set figures on the calibration queries as they would be at use
// time: each keeps from its m highest-scoring candidates. m ≤ 0 keeps all.
// It refreshes the warnings.
func (c *Calibration) UseCandidates(m int, queries []Query) {
	if m <= 0 {
		m = c.CalibCandidates
	}
	c.Candidates = m
	kept, keptSum := 0, 0
	for _, q := range queries {
		top := topScores(q.Scores, m)
		k := c.KeepLog(top, float64(c.QHatLog))
		keptSum += k
		if q.Gold != NoGold && rankOf(q.Scores, q.Gold) < k {
			kept++
		}
	}
	n := float64(max(1, len(queries)))
	c.KeptCoverage = float64(kept) / n
	c.MeanKept = float64(keptSum) / n
	c.Warnings = c.Warn()
}

// topScores is the m highest scores in descending order (all when m ≥ n).
func topScores(scores []float64, m int) []float64 {
	s := slices.Clone(scores)
	slices.SortStableFunc(s, cmpDesc)
	return s[:min(m, len(s))]
}

// KeptCoverageSlack is how far the kept-set coverage on the calibration set
// may fall below the score coverage before Warn flags it.
const KeptCoverageSlack = 0.05

// Warn lists what makes the threshold suspect: a threshold that keeps every
// candidate (q̂ = +∞, n too small for α), an E-scale threshold that rounds to
// 1 (only qhat_log keeps the right sets: pass the file, not --qhat), and a
// kept-set coverage far below the score coverage (the clamps or fewer
// candidates at use time cut the sets the guarantee is about).
func (c Calibration) Warn() []string {
	var w []string
	q := float64(c.QHatLog)
	switch {
	case math.IsInf(q, 1) && ceilIndex(float64(c.N+1)*(1-c.Alpha)) > float64(c.N):
		w = append(w, fmt.Sprintf("q̂ = +Inf: n = %d is too small for α = %g, so APS keeps every candidate (up to max_docs %d)", c.N, c.Alpha, c.MaxDocs))
	case math.IsInf(q, 1):
		w = append(w, fmt.Sprintf("q̂ = +Inf: more than α = %g of the %d calibration queries score +Inf (%d have no gold among their candidates), so APS keeps every candidate (up to max_docs %d)",
			c.Alpha, c.N, c.NoGold, c.MaxDocs))
	case float64(c.QHat) == 1:
		w = append(w, fmt.Sprintf("q̂_E rounds to 1 in float64 (q̂_S = %.6g): an E-scale --qhat would keep every candidate; keep by the calibration file (qhat_log)", q))
	}
	if c.KeptCoverage < c.Coverage-KeptCoverageSlack {
		w = append(w, fmt.Sprintf("kept-set coverage %.3f on the calibration set is far below the score coverage %.3f (min_docs %d, max_docs %d, %d of %d candidates kept from)",
			c.KeptCoverage, c.Coverage, c.MinDocs, c.MaxDocs, c.Candidates, c.CalibCandidates))
	}
	return w
}

// Keep is the number of top-scored documents to keep under this calibration
// (APS.KeepLog with q̂_S).
func (c Calibration) Keep(scores []float64) int {
	return c.KeepLog(scores, float64(c.QHatLog))
}

// KeepIndices is the input indices of the kept documents in descending score
// order (APS.KeepLogIndices with q̂_S).
func (c Calibration) KeepIndices(scores []float64) []int {
	return c.KeepLogIndices(scores, float64(c.QHatLog))
}

// LogQuantile is the level-quantile of log-scale scores under rule. The
// conformal and higher rules pick an order statistic, which commutes with
// E = 1 − e^{−S}: Quantile(S). The linear rule interpolates on the E scale,
// 1 − q̂_E = (1−f)·e^{−S_j} + f·e^{−S_{j+1}}, computed in log space:
//
//	q̂_S = −logaddexp(log(1−f) − S_j, log f − S_{j+1}).
func LogQuantile(s []float64, level float64, rule QuantileRule) float64 {
	if rule != RuleLinear || len(s) == 0 || math.IsNaN(level) {
		return Quantile(s, level, rule)
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	n := len(sorted)
	h := float64(n-1) * clamp01(level)
	j := min(max(int(math.Floor(h)), 0), n-1)
	f := h - float64(j)
	if j == n-1 || f == 0 {
		return sorted[j]
	}
	lo, hi := sorted[j], sorted[j+1]
	q := -logAddExp(math.Log1p(-f)-lo, math.Log(f)-hi)
	return math.Min(hi, math.Max(lo, q))
}

// ValidateCalibration checks a calibration as read from a file.
func (c Calibration) Validate() error {
	if err := c.APS.Validate(); err != nil {
		return err
	}
	switch q := float64(c.QHatLog); {
	case math.IsNaN(q):
		return errors.New(`"qhat_log" is NaN`)
	case math.IsNaN(float64(c.QHat)):
		return errors.New(`"qhat" is NaN`)
	case c.Alpha != 0 && !(c.Alpha > 0 && c.Alpha < 1):
		return fmt.Errorf(`"alpha" %v outside (0, 1)`, c.Alpha)
	case c.N < 0 || c.NoGold < 0 || c.Candidates < 0 || c.CalibCandidates < 0:
		return errors.New(`"n", "no_gold", "candidates" and "calib_candidates" must be ≥ 0`)
	}
	return nil
}

// ParseCalibration reads a calibration file. "qhat_log" decides when present;
// a file with only "qhat" (E scale, older files and hand-written ones) gets
// q̂_S = −log(1 − q̂_E). "temperature", "min_docs" and "max_docs" default to
// the paper's T = 0.01 and [1, 5]; other fields (a report's held-out
// figures) are ignored.
func ParseCalibration(data []byte) (Calibration, error) {
	var probe struct {
		QHat    *JSONFloat `json:"qhat"`
		QHatLog *JSONFloat `json:"qhat_log"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return Calibration{}, fmt.Errorf("parse APS calibration: %w", err)
	}
	c := Calibration{APS: PaperAPS()}
	if err := json.Unmarshal(data, &c); err != nil {
		return Calibration{}, fmt.Errorf("parse APS calibration: %w", err)
	}
	switch {
	case probe.QHatLog != nil:
		if probe.QHat == nil {
			c.QHat = JSONFloat(EFromLogScore(float64(c.QHatLog)))
		} else if e := EFromLogScore(float64(c.QHatLog)); math.Abs(e-float64(c.QHat)) > 1e-9 {
			return Calibration{}, fmt.Errorf(`APS calibration: "qhat" %v disagrees with "qhat_log" %v (1 − e^−qhat_log = %v)`, float64(c.QHat), float64(c.QHatLog), e)
		}
	case probe.QHat != nil:
		c.QHatLog = JSONFloat(LogScoreFromE(float64(c.QHat)))
	default:
		return Calibration{}, errors.New(`APS calibration has no "qhat_log" or "qhat"`)
	}
	if err := c.Validate(); err != nil {
		return Calibration{}, fmt.Errorf("APS calibration: %w", err)
	}
	return c, nil
}

// LoadCalibration reads a calibration file (see ParseCalibration); errors
// name the file.
func LoadCalibration(path string) (Calibration, error) {
	return loadfile.Parse(path, ParseCalibration)
}

// Marshal encodes the calibration as indented JSON with a final newline.
func (c Calibration) Marshal() ([]byte, error) {
	return marshalReport(c)
}

// Save writes the calibration to path atomically.
func (c Calibration) Save(path string) error {
	return SaveReport(path, c)
}

// SaveReport writes a report that embeds a Calibration (a calibration run's
// held-out figures next to it) to path atomically, after checking that
// LoadCalibration will read it back.
func SaveReport(path string, report any) error {
	b, err := marshalReport(report)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, b)
}

// marshalReport is MarshalIndent of a report, checked to parse as a
// Calibration.
func marshalReport(report any) ([]byte, error) {
	b, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return nil, err
	}
	if _, err := ParseCalibration(b); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Write(b)
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}
