package conformal

import (
	"errors"
	"fmt"
	"math"
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
	Temperature float64 `json:"temperature"`
	// MinDocs is the lower clamp on the kept count (≥ 0).
	MinDocs int `json:"min_docs"`
	// MaxDocs is the upper clamp (0 = no cap beyond the candidates).
	MaxDocs int `json:"max_docs"`
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

// The APS rule in log space. With z_j = s_(j)/T (descending order), the tail
// mass beyond rank k is 1 − c_k = exp(L_k),
//
//	L_k = logsumexp(z_{k+1..n}) − logsumexp(z_{1..n}),   L_0 = 0,   L_n = −∞,
//
// and the log-scale score of rank k is S_k = −L_k = −log(1 − c_k) ∈ [0, +∞],
// non-decreasing in k. E = c_k = 1 − e^{−S_k} is a monotone map of S, so the
// rule "E = c_r, q̂_E, k = min{k : c_k ≥ q̂_E}" and the rule "S = −L_r, q̂_S,
// k = min{k : −L_k ≥ q̂_S}" are the same rule in exact arithmetic. In float64
// only the second survives large score gaps: c_k rounds to exactly 1 once
// 1 − c_k < 2⁻⁵³ (a top-1/top-2 gap above ≈ 0.37 at T = 0.01, whole units on
// BM25 scores), while S_k stays exact to the last bits. Every decision here
// (scores, thresholds, kept counts) is made on S; E is for people.

// LogScoreFromE converts an E-scale score or threshold (cumulative mass) to
// the log scale, S = −log(1 − E): E ≥ 1 → +∞, E ≤ 0 → S ≤ 0 (E < 0 keeps
// nothing before the clamps, as on the E scale), NaN → NaN.
func LogScoreFromE(e float64) float64 {
	if e >= 1 {
		return math.Inf(1)
	}
	return -math.Log1p(-e)
}

// EFromLogScore converts a log-scale score or threshold back to the E scale,
// E = 1 − e^{−S} (S = +∞ → 1). It rounds to 1 for S ≳ 37: display only.
func EFromLogScore(s float64) float64 {
	return -math.Expm1(-s)
}

// logAddExp is log(e^a + e^b), exact for −∞ arguments.
func logAddExp(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(b, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// prefixLogSumExp turns asc, scores sorted ascending, into running
// log-sum-exps of z = (s − max)/T from the smallest up: asc[i] =
// logsumexp(z of asc[0..i]). Read from the top, asc[n−1−k] is
// logsumexp(z_{k+1..n}) of the descending order, so −L_k = asc[n−1] −
// asc[n−1−k]. LogScore and KeepLog both use it, so they agree bit for bit.
func prefixLogSumExp(asc []float64, temperature float64) {
	n := len(asc)
	if n == 0 {
		return
	}
	top := asc[n-1]
	run := math.Inf(-1)
	for i, s := range asc {
		run = logAddExp(run, (s-top)/temperature)
		asc[i] = run
	}
}

// LogScores returns the descending-score order (as Probabilities) and the
// log-scale scores of every rank, s[j] = S_{j+1} = −L_{j+1} (s[n−1] = +∞).
func (a APS) LogScores(scores []float64) (order []int, s []float64) {
	n := len(scores)
	order = make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmpDesc(scores[i], scores[j]) })
	asc := make([]float64, n)
	for i, o := range order {
		asc[n-1-i] = scores[o]
	}
	prefixLogSumExp(asc, a.Temperature)
	s = make([]float64, n)
	for k := range s {
		s[k] = tailLogScore(asc, k+1)
	}
	return order, s
}

// tailLogScore is −L_k from prefixLogSumExp's output (k = 0…n).
func tailLogScore(lse []float64, k int) float64 {
	n := len(lse)
	switch {
	case k <= 0:
		return 0
	case k >= n:
		return math.Inf(1)
	}
	return lse[n-1] - lse[n-1-k]
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

// LogScore is the APS calibration (non-conformity) score of one query whose
// gold document is scores[gold], on the log scale: with r the gold's rank,
//
//	S = −L_r = −log(1 − c_r),   S = +∞ when gold = NoGold (−1, not among the candidates).
func (a APS) LogScore(scores []float64, gold int) (float64, error) {
	return a.logScore(scores, gold, -1)
}

// Score is LogScore on the E scale, E = c_r = 1 − e^{−S} (1 without gold),
// for display: it rounds to 1 where S still separates queries.
func (a APS) Score(scores []float64, gold int) (float64, error) {
	s, err := a.LogScore(scores, gold)
	return EFromLogScore(s), err
}

// RandomizedLogScore is the randomized APS score (Romano et al. 2020, Eq. 5),
// E = c_{r−1} + u·p_r, with u ~ Uniform[0, 1] supplied by the caller, on the
// log scale: 1 − E = (1−u)·e^{L_{r−1}} + u·e^{L_r}, so
//
//	S = −logaddexp(log(1−u) + L_{r−1}, log u + L_r),   S = +∞ when gold = NoGold.
func (a APS) RandomizedLogScore(scores []float64, gold int, u float64) (float64, error) {
	if !(u >= 0 && u <= 1) {
		return 0, fmt.Errorf("aps: u = %v outside [0, 1]", u)
	}
	return a.logScore(scores, gold, u)
}

// RandomizedScore is RandomizedLogScore on the E scale (display only).
func (a APS) RandomizedScore(scores []float64, gold int, u float64) (float64, error) {
	s, err := a.RandomizedLogScore(scores, gold, u)
	return EFromLogScore(s), err
}

// logScore computes −L_r (u < 0) or the randomized log score.
func (a APS) logScore(scores []float64, gold int, u float64) (float64, error) {
	if err := a.Validate(); err != nil {
		return 0, err
	}
	if gold == NoGold && len(scores) == 0 {
		return math.Inf(1), nil // nothing retrieved: no gold among the candidates
	}
	if err := checkScores(scores); err != nil {
		return 0, err
	}
	if gold == NoGold {
		return math.Inf(1), nil
	}
	if gold < 0 || gold >= len(scores) {
		return 0, fmt.Errorf("gold index %d out of range [0, %d) (use -1 for no gold)", gold, len(scores))
	}
	order, s := a.LogScores(scores)
	r := slices.Index(order, gold) + 1
	if u < 0 {
		return s[r-1], nil
	}
	below := 0.0 // −L_{r−1}
	if r > 1 {
		below = s[r-2]
	}
	return -logAddExp(math.Log1p(-u)-below, math.Log(u)-s[r-1]), nil
}

// Keep returns the number of top-scored documents to keep for an E-scale
// threshold q̂_E: KeepLog(scores, LogScoreFromE(q̂_E)), which is
//
//	k = min{k ≥ 0 : c_k ≥ q̂_E} (c_0 = 0), clamped to [MinDocs, MaxDocs] and to n = len(scores)
//
// in exact arithmetic (q̂_E = 1 keeps all n, as exact arithmetic does, even
// where c_1 rounds to 1). A threshold read off E-scale scores may itself have
// rounded to 1; a Calibration carries the log-scale one, use it.
func (a APS) Keep(scores []float64, qhatE float64) int {
	return a.KeepLog(scores, LogScoreFromE(qhatE))
}

// KeepLog returns the number of top-scored documents to keep for a
// log-scale threshold q̂_S,
//
//	k = min{k ≥ 0 : −L_k ≥ q̂_S} (−L_0 = 0, −L_n = +∞), clamped to [MinDocs, MaxDocs] and to n
//
// (k = n for q̂_S = +∞ or NaN; k = 0 before the clamps when q̂_S ≤ 0). The
// caller keeps the k highest-scoring documents in descending score order;
// KeepLogIndices returns them. −L_k is computed exactly as LogScore computes
// it, so a query whose score equals q̂_S keeps its gold. Scores must be
// finite and the APS valid (check both once beforehand); KeepLog sits in the
// rollout hot path, never panics, and allocates nothing for n ≤ 64.
func (a APS) KeepLog(scores []float64, qhatS float64) int {
	n := len(scores)
	var buf [64]float64
	var s []float64
	if n <= len(buf) {
		s = buf[:n]
	} else {
		s = make([]float64, n)
	}
	copy(s, scores)
	sortAscending(s)
	k := n
	if qhatS <= 0 {
		k = 0
	} else if n > 0 {
		prefixLogSumExp(s, a.Temperature)
		for j := 1; j < n; j++ {
			if tailLogScore(s, j) >= qhatS {
				k = j
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

// KeepIndices returns the input indices of the kept documents for an
// E-scale threshold, in descending score order (ties keep their input
// order): order[:Keep(scores, q̂_E)].
func (a APS) KeepIndices(scores []float64, qhatE float64) []int {
	return a.KeepLogIndices(scores, LogScoreFromE(qhatE))
}

// KeepLogIndices is KeepIndices for a log-scale threshold:
// order[:KeepLog(scores, q̂_S)].
func (a APS) KeepLogIndices(scores []float64, qhatS float64) []int {
	order, _, _ := a.Probabilities(scores)
	return order[:a.KeepLog(scores, qhatS)]
}

// Query is one APS calibration query: the raw retrieval scores of its
// candidates (in retrieval order) and the index of the gold document among
// them (NoGold = −1 when absent).
type Query struct {
	Scores []float64 `json:"scores"`
	Gold   int       `json:"gold"`
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
