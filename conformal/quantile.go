package conformal

import (
	"math"
	"math/bits"
	"slices"

	"github.com/cas-engine/cas/internal/textenum"
)

// QuantileRule selects how an empirical quantile of calibration scores is
// read off the sorted scores. The three rules are the ones the CAS paper, the
// official CAS code and the ACI reference code use.
type QuantileRule int

const (
	// RuleConformal is the finite-sample split-conformal quantile (the
	// paper's rule; Vovk et al., Lei et al. 2018): with n scores sorted
	// ascending, s₍₁₎ ≤ … ≤ s₍ₙ₎, and level ℓ = 1−α,
	//
	//	k = ⌈(n+1)·ℓ⌉,   q̂ = s₍ₖ₎,   q̂ = +∞ if k > n,   q̂ = −∞ if k < 1.
	//
	// For exchangeable continuous scores P(s_test ≤ q̂) = k/(n+1) ∈
	// [ℓ, ℓ + 1/(n+1)).
	RuleConformal QuantileRule = iota
	// RuleHigher is numpy's quantile(method="higher"), as the official CAS
	// code calls it (no (n+1) correction): with 0-based sorted scores,
	//
	//	q̂ = sorted[⌈(n−1)·ℓ⌉].
	//
	// It can under-cover for small n (e.g. n = 15, α = 0.1 gives coverage
	// 14/16 = 0.875 < 0.9).
	RuleHigher
	// RuleLinear is linear interpolation between order statistics
	// (torch.quantile's default, numpy "linear", R type 7), as the official
	// code's ACI uses it: with h = (n−1)·ℓ and j = ⌊h⌋,
	//
	//	q̂ = sorted[j] + (h − j)·(sorted[j+1] − sorted[j]).
	RuleLinear
)

var quantileRuleNames = textenum.Names[QuantileRule]{Type: "QuantileRule", Kind: "quantile rule",
	Names: []string{"conformal", "higher", "linear"}}

// String returns the rule's name: "conformal", "higher" or "linear".
func (r QuantileRule) String() string { return quantileRuleNames.String(r) }

// ParseQuantileRule maps a name ("conformal", "higher", "linear";
// case-insensitive) to its rule.
func ParseQuantileRule(name string) (QuantileRule, error) { return quantileRuleNames.Parse(name) }

// MarshalText encodes the rule by name (used in JSON state).
func (r QuantileRule) MarshalText() ([]byte, error) { return quantileRuleNames.Marshal(r) }

// UnmarshalText decodes a rule name.
func (r *QuantileRule) UnmarshalText(b []byte) error { return quantileRuleNames.Unmarshal(b, r) }

// Quantile returns the level-quantile (level = 1−α) of scores under rule. The
// input is not modified (a sorted copy is made); use QuantileSorted when the
// scores are already sorted ascending.
//
// Conventions: no scores → +∞ for every rule (no evidence, keep everything);
// a NaN level → NaN. For RuleHigher and RuleLinear the level is clamped to
// [0, 1] (numpy/torch semantics); RuleConformal follows its formula, which
// gives +∞ above the largest representable level and −∞ for level ≤ 0.
//
// It runs in O(n) expected time (selection, not a full sort), so the ACI
// controller can take it every training step.
func Quantile(scores []float64, level float64, rule QuantileRule) float64 {
	return quantileInPlace(slices.Clone(scores), level, rule)
}

// quantileInPlace is Quantile on a scratch slice it may reorder.
func quantileInPlace(s []float64, level float64, rule QuantileRule) float64 {
	n := len(s)
	if n == 0 || math.IsNaN(level) || slices.ContainsFunc(s, math.IsNaN) {
		slices.Sort(s) // NaNs defeat selection; sorting orders them first
		return QuantileSorted(s, level, rule)
	}
	j, frac, q, exact := quantileIndex(n, level, rule)
	if exact {
		return q
	}
	lo := selectKth(s, j)
	if frac == 0 {
		return lo
	}
	return interpolate(lo, slices.Min(s[j+1:]), frac) // selection leaves s[j+1:] ≥ s[j]
}

// selectKth reorders a (no NaNs) so that a[k] is its (k+1)-th smallest
// element, a[:k] ≤ a[k] ≤ a[k+1:], and returns a[k]: Hoare's FIND with a
// median-of-three pivot, falling back to sorting the remaining range after
// 2·log₂n + 8 rounds so adversarial inputs stay O(n log n).
func selectKth(a []float64, k int) float64 {
	lo, hi := 0, len(a)-1
	budget := 2*bits.Len(uint(len(a))) + 8
	for lo < hi {
		if budget--; budget < 0 {
			slices.Sort(a[lo : hi+1])
			break
		}
		mid := lo + (hi-lo)/2
		// median of three as the pivot value
		x, y, z := a[lo], a[mid], a[hi]
		if x > y {
			x, y = y, x
		}
		if y > z {
			y = z
			if x > y {
				y = x
			}
		}
		pivot := y
		i, j := lo, hi
		for i <= j {
			for a[i] < pivot {
				i++
			}
			for pivot < a[j] {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		if j < k {
			lo = i
		}
		if k < i {
			hi = j
		}
	}
	return a[k]
}

// QuantileSorted is Quantile on scores already sorted ascending (as
// slices.Sort leaves them). It allocates nothing.
func QuantileSorted(sorted []float64, level float64, rule QuantileRule) float64 {
	n := len(sorted)
	if math.IsNaN(level) {
		return math.NaN()
	}
	if n == 0 {
		return math.Inf(1)
	}
	j, frac, q, exact := quantileIndex(n, level, rule)
	if exact {
		return q
	}
	if frac == 0 {
		return sorted[j]
	}
	return interpolate(sorted[j], sorted[j+1], frac)
}

// quantileIndex is where rule reads the level-quantile of n ≥ 1 sorted
// scores: the order statistic j (0-based) and the fraction of the way to
// j+1 (RuleLinear; 0 otherwise). exact reports that the quantile is q
// without reading the scores (±∞ for RuleConformal's k outside [1, n], NaN
// for an unknown rule).
func quantileIndex(n int, level float64, rule QuantileRule) (j int, frac, q float64, exact bool) {
	switch rule {
	case RuleConformal:
		k := ceilIndex(float64(n+1) * level)
		if k > float64(n) {
			return 0, 0, math.Inf(1), true
		}
		if k < 1 {
			return 0, 0, math.Inf(-1), true
		}
		return int(k) - 1, 0, 0, false
	case RuleHigher:
		j := int(ceilIndex(float64(n-1) * clamp01(level)))
		return min(max(j, 0), n-1), 0, 0, false
	case RuleLinear:
		h := float64(n-1) * clamp01(level)
		j := min(max(int(math.Floor(h)), 0), n-1)
		if j == n-1 {
			return j, 0, 0, false
		}
		return j, h - float64(j), 0, false
	default:
		return 0, 0, math.NaN(), true
	}
}

// interpolate is lo + frac·(hi − lo), clamped so that rounding never pushes
// it past its neighbours.
func interpolate(lo, hi, frac float64) float64 {
	return math.Min(hi, math.Max(lo, lo+frac*(hi-lo)))
}

// ceilIndex is ⌈x⌉ with a relative tolerance of 1e-12, so that products such
// as (n+1)·(1−α) that are integers in exact arithmetic (10·0.9) are not pushed
// to the next integer by floating-point rounding. Values beyond ±2⁵³ are
// saturated so that the int conversion is always defined.
func ceilIndex(x float64) float64 {
	const big = 1 << 53
	if x > big {
		return big
	}
	if x < -big {
		return -big
	}
	return math.Ceil(x - 1e-12*math.Max(1, math.Abs(x)))
}

func clamp01(x float64) float64 {
	return math.Min(1, math.Max(0, x))
}
