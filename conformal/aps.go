package conformal

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Paper and official-code settings for APS on retrieval (METHOD.md, "APS on
// retrieval"; paper Table 4).
const (
	// DefaultTemperature is the softmax temperature T applied to raw
	// retrieval scores (paper and code).
	DefaultTemperature = 0.01
	// PaperAlpha is the paper's miscoverage level α (3.4 docs on average).
	PaperAlpha = 0.2
	// PaperMinDocs and PaperMaxDocs clamp the kept count in the paper.
	PaperMinDocs, PaperMaxDocs = 1, 5
	// CodeAlpha is the official code's α.
	CodeAlpha = 0.1
	// CodeMinDocs and CodeMaxDocs clamp the kept count in the official code.
	CodeMinDocs, CodeMaxDocs = 2, 5
	// CodeQuantile is the official code's threshold rule
	// (numpy quantile, method="higher").
	CodeQuantile = RuleHigher
	// NoGold marks a calibration query whose gold document is not among the
	// candidates; its calibration score is 1.
	NoGold = -1
)

// APS applies Adaptive Prediction Sets (Romano, Sesia & Candès 2020) to the
// candidates of one retrieval call. With raw scores s₁…sₙ sorted descending
// (stable: ties keep their input order), probabilities and cumulative mass are
//
//	p_j = exp((s_(j) − s_(1))/T) / Σ_i exp((s_(i) − s_(1))/T),   c_k = Σ_{j≤k} p_j,
//
// (the max-shift keeps the softmax finite for any T > 0; c_n = 1 exactly).
// A query is answered by the top-k documents with
//
//	k = min{k : c_k ≥ q̂},   then k ← min(max(k, MinDocs), MaxDocs, n).
//
// The zero value is not usable; start from PaperAPS or CodeAPS.
type APS struct {
	// Temperature is T > 0 in softmax(s/T).
	Temperature float64
	// MinDocs is the lower clamp on the kept count (≥ 0).
	MinDocs int
	// MaxDocs is the upper clamp (0 = no cap beyond the candidates).
	MaxDocs int
}

// PaperAPS returns the paper's setting: T = 0.01, k clamped to [1, 5].
func PaperAPS() APS {
	return APS{Temperature: DefaultTemperature, MinDocs: PaperMinDocs, MaxDocs: PaperMaxDocs}
}

// CodeAPS returns the official code's setting: T = 0.01, k clamped to [2, 5].
func CodeAPS() APS {
	return APS{Temperature: DefaultTemperature, MinDocs: CodeMinDocs, MaxDocs: CodeMaxDocs}
}

// Validate reports a setting that cannot be used.
func (a APS) Validate() error {
	switch {
	case !(a.Temperature > 0) || math.IsInf(a.Temperature, 1):
		return fmt.Errorf("aps: temperature %v must be positive and finite", a.Temperature)
	case a.MinDocs < 0:
		return fmt.Errorf("aps: min docs %d must be ≥ 0", a.MinDocs)
	case a.MaxDocs < 0:
		return fmt.Errorf("aps: max docs %d must be ≥ 0 (0 = no cap)", a.MaxDocs)
	case a.MaxDocs > 0 && a.MinDocs > a.MaxDocs:
		return fmt.Errorf("aps: min docs %d exceeds max docs %d", a.MinDocs, a.MaxDocs)
	}
	return nil
}

// Probabilities returns the candidates' descending-score order (order[j] is
// the input index of rank j+1), their softmax probabilities p in that order,
// and the cumulative mass cum (cum[j] = c_{j+1}; cum[n−1] = 1).
func (a APS) Probabilities(scores []float64) (order []int, p, cum []float64) {
	n := len(scores)
	order = make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmpDesc(scores[i], scores[j]) })
	p = make([]float64, n)
	cum = make([]float64, n)
	if n == 0 {
		return order, p, cum
	}
	top := scores[order[0]]
	total := 0.0
	for j, i := range order {
		e := math.Exp((scores[i] - top) / a.Temperature)
		p[j] = e
		total += e
		cum[j] = total
	}
	for j := range p {
		p[j] /= total
		cum[j] /= total
	}
	return order, p, cum
}

// ErrEmptyScores is returned for a query without candidates.
var ErrEmptyScores = errors.New("empty score list")

// checkScores rejects empty lists and non-finite scores.
func checkScores(scores []float64) error {
	if len(scores) == 0 {
		return ErrEmptyScores
	}
	for i, s := range scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return fmt.Errorf("score %d is %v (scores must be finite)", i, s)
		}
	}
	return nil
}

// Score is the APS calibration (non-conformity) score of one query whose gold
// document is scores[gold]: the cumulative mass up to and including the gold
// document's rank r,
//
//	E = c_r,   E = 1 when gold = NoGold (−1, not among the candidates).
func (a APS) Score(scores []float64, gold int) (float64, error) {
	return a.score(scores, gold, -1)
}

// RandomizedScore is the randomized APS score (Romano et al. 2020, Eq. 5)
// with u ~ Uniform[0, 1] supplied by the caller:
//
//	E = c_{r−1} + u·p_r,   E = 1 when gold = NoGold.
func (a APS) RandomizedScore(scores []float64, gold int, u float64) (float64, error) {
	if !(u >= 0 && u <= 1) {
		return 0, fmt.Errorf("aps: u = %v outside [0, 1]", u)
	}
	return a.score(scores, gold, u)
}

// score computes c_r (u < 0) or c_{r−1} + u·p_r.
func (a APS) score(scores []float64, gold int, u float64) (float64, error) {
	if err := a.Validate(); err != nil {
		return 0, err
	}
	if err := checkScores(scores); err != nil {
		return 0, err
	}
	if gold == NoGold {
		return 1, nil
	}
	if gold < 0 || gold >= len(scores) {
		return 0, fmt.Errorf("gold index %d out of range [0, %d) (use -1 for no gold)", gold, len(scores))
	}
	order, p, cum := a.Probabilities(scores)
	r := slices.Index(order, gold)
	if u < 0 {
		return cum[r], nil
	}
	below := 0.0
	if r > 0 {
		below = cum[r-1]
	}
	return below + u*p[r], nil
}

// Keep returns the number of top-scored documents to keep,
//
//	k = min{k ≥ 0 : c_k ≥ q̂} (c_0 = 0), clamped to [MinDocs, MaxDocs] and to n = len(scores)
//
// (k = n when no prefix reaches q̂, e.g. q̂ = +∞ or NaN; k = 0 before the
// clamps when q̂ ≤ 0). The caller keeps the k highest-scoring documents in
// descending score order; KeepIndices returns them. The prefix sums are the
// ones Probabilities computes, so Keep agrees with its cum exactly. Scores
// must be finite and the APS valid (check both once beforehand); Keep sits in
// the rollout hot path, never panics, and allocates nothing for n ≤ 64.
func (a APS) Keep(scores []float64, qhat float64) int {
	n := len(scores)
	var buf [64]float64
	var s []float64
	if n <= len(buf) {
		s = buf[:n]
	} else {
		s = make([]float64, n)
	}
	copy(s, scores)
	sortAscending(s) // walked from the top: descending order, NaNs last
	k := n
	if qhat <= 0 {
		k = 0
	} else if n > 0 {
		top := s[n-1]
		total := 0.0
		for i := n - 1; i >= 0; i-- {
			s[i] = math.Exp((s[i] - top) / a.Temperature)
			total += s[i]
		}
		run := 0.0
		for j := range n {
			run += s[n-1-j]
			if run/total >= qhat {
				k = j + 1
				break
			}
		}
	}
	return a.clamp(k, n)
}

// sortAscending sorts s ascending with NaNs first (slices.Sort's order), by
// insertion for the handful of candidates a rollout retrieves.
func sortAscending(s []float64) {
	if len(s) > 12 {
		slices.Sort(s)
		return
	}
	for i := 1; i < len(s); i++ {
		x := s[i]
		j := i
		for ; j > 0 && lessNaNFirst(x, s[j-1]); j-- {
			s[j] = s[j-1]
		}
		s[j] = x
	}
}

// lessNaNFirst is x < y with NaN below every number (slices.Sort's order).
func lessNaNFirst(x, y float64) bool {
	return x < y || (math.IsNaN(x) && !math.IsNaN(y))
}

// cmpDesc orders floats descending (NaNs last).
func cmpDesc(x, y float64) int {
	switch {
	case x > y:
		return -1
	case x < y:
		return 1
	case x == y:
		return 0
	case math.IsNaN(x) && !math.IsNaN(y):
		return 1
	case !math.IsNaN(x) && math.IsNaN(y):
		return -1
	}
	return 0
}

// clamp applies [MinDocs, MaxDocs] and the number of candidates.
func (a APS) clamp(k, n int) int {
	k = max(k, a.MinDocs)
	if a.MaxDocs > 0 {
		k = min(k, a.MaxDocs)
	}
	return min(max(k, 0), n)
}

// KeepIndices returns the input indices of the kept documents, in descending
// score order (ties keep their input order): order[:Keep(scores, qhat)].
func (a APS) KeepIndices(scores []float64, qhat float64) []int {
	order, _, _ := a.Probabilities(scores)
	return order[:a.Keep(scores, qhat)]
}

// Query is one APS calibration query: the raw retrieval scores of its
// candidates (in retrieval order) and the index of the gold document among
// them (NoGold = −1 when absent).
type Query struct {
	Scores []float64 `json:"scores"`
	Gold   int       `json:"gold"`
}

// Calibration is the result of calibrating APS on a set of queries.
type Calibration struct {
	// QHat is the threshold q̂ (may be +Inf when n is too small for α).
	QHat float64
	// N is the number of calibration queries.
	N int
	// Alpha is the miscoverage level α; the target coverage is 1−α.
	Alpha float64
	// Rule is the quantile rule that produced QHat.
	Rule QuantileRule
	// Randomized tells whether the randomized score was used.
	Randomized bool
	// Coverage is the fraction of calibration queries with E_i ≤ q̂ (the
	// conformal set's coverage, ≥ 1−α in expectation over exchangeable data).
	Coverage float64
	// KeptCoverage is the fraction of calibration queries whose gold document
	// is among the Keep(scores, q̂) documents (with the APS clamps); queries
	// without gold never count as covered.
	KeptCoverage float64
	// MeanKept is the mean kept count over the calibration queries.
	MeanKept float64
	// NoGold is the number of queries without a gold document.
	NoGold int
	// Scores are the calibration scores E_i, in input order.
	Scores []float64
}

// Calibrate computes every query's calibration score and the threshold
//
//	q̂ = Quantile({E_i}, 1−α, rule)
//
// (paper: RuleConformal; code: RuleHigher). With rng ≠ nil the randomized
// score is used, drawing one U per query in input order from rng. Errors name
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
	c := Calibration{N: len(queries), Alpha: alpha, Rule: rule, Randomized: rng != nil}
	c.Scores = make([]float64, len(queries))
	for i, q := range queries {
		var err error
		if rng != nil {
			c.Scores[i], err = a.RandomizedScore(q.Scores, q.Gold, rng.Float64())
		} else {
			c.Scores[i], err = a.Score(q.Scores, q.Gold)
		}
		if err != nil {
			return Calibration{}, fmt.Errorf("query %d: %w", i, err)
		}
	}
	c.QHat = Quantile(c.Scores, 1-alpha, rule)
	covered, kept, keptSum := 0, 0, 0
	for i, q := range queries {
		if c.Scores[i] <= c.QHat {
			covered++
		}
		k := a.Keep(q.Scores, c.QHat)
		keptSum += k
		if q.Gold == NoGold {
			c.NoGold++
			continue
		}
		if rankOf(q.Scores, q.Gold) < k {
			kept++
		}
	}
	n := float64(len(queries))
	c.Coverage = float64(covered) / n
	c.KeptCoverage = float64(kept) / n
	c.MeanKept = float64(keptSum) / n
	return c, nil
}

// rankOf is the 0-based position of scores[i] in the stable descending order.
func rankOf(scores []float64, i int) int {
	r := 0
	for j, s := range scores {
		if s > scores[i] || (s == scores[i] && j < i) {
			r++
		}
	}
	return r
}
