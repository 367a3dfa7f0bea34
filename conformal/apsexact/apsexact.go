// Package apsexact is an independent reference for APS on retrieval, for
// tests: the split-conformal rule of METHOD.md computed directly in log
// space, one suffix at a time (no running sums shared with the conformal
// package), with the conformal index in integer arithmetic, and a generator
// of BM25-scale calibration queries on which the float64 E-scale rule
// saturates.
package apsexact

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
)

// Query is one retrieval: raw scores in retrieval order and the gold's index
// (−1 when absent).
type Query struct {
	Scores []float64
	Gold   int
}

// desc returns the scores sorted descending and the rank (1-based) of the
// gold among them (0 when absent); ties keep input order.
func desc(q Query) ([]float64, int) {
	idx := make([]int, len(q.Scores))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case q.Scores[a] > q.Scores[b]:
			return -1
		case q.Scores[a] < q.Scores[b]:
			return 1
		}
		return 0
	})
	s := make([]float64, len(idx))
	r := 0
	for j, i := range idx {
		s[j] = q.Scores[i]
		if i == q.Gold {
			r = j + 1
		}
	}
	return s, r
}

// logSumExp is log Σ_j exp(z_j) over z, from its maximum, with the sum of
// the shifted exponentials accumulated in a 256-bit float.
func logSumExp(z []float64) float64 {
	if len(z) == 0 {
		return math.Inf(-1)
	}
	m := slices.Max(z)
	sum := new(big.Float).SetPrec(256)
	for _, v := range z {
		sum.Add(sum, new(big.Float).SetPrec(256).SetFloat64(math.Exp(v-m)))
	}
	f, _ := sum.Float64()
	return m + math.Log(f)
}

// NegTails returns −L_k for k = 0…n of the descending scores at temperature
// t: −L_k = logsumexp(z_{1..n}) − logsumexp(z_{k+1..n}), z = s/T (−L_0 = 0,
// −L_n = +∞).
func NegTails(sortedDesc []float64, t float64) []float64 {
	n := len(sortedDesc)
	z := make([]float64, n)
	for j, s := range sortedDesc {
		z[j] = s / t
	}
	total := logSumExp(z)
	out := make([]float64, n+1)
	for k := 1; k < n; k++ {
		out[k] = total - logSumExp(z[k:])
	}
	out[n] = math.Inf(1)
	return out
}

// Threshold is the paper's conformal threshold on the log scale: the
// ⌈(n+1)(1−α)⌉-th smallest score S_i = −L_{r_i} (+∞ without gold), +∞ when
// that index exceeds n. 1 − α is given as the fraction num/den.
func Threshold(queries []Query, t float64, num, den int) float64 {
	s := make([]float64, len(queries))
	for i, q := range queries {
		sorted, r := desc(q)
		if r == 0 {
			s[i] = math.Inf(1)
			continue
		}
		s[i] = NegTails(sorted, t)[r]
	}
	slices.Sort(s)
	n := len(s)
	k := ((n+1)*num + den - 1) / den
	if k > n {
		return math.Inf(1)
	}
	return s[k-1]
}

// Kept is the number of documents kept for a log-scale threshold q:
// k = min{k ≥ 0 : −L_k ≥ q}, clamped to [minDocs, maxDocs] and to n.
func Kept(q Query, t, qhat float64, minDocs, maxDocs int) int {
	sorted, _ := desc(q)
	tails := NegTails(sorted, t)
	n := len(sorted)
	k := n
	for j, v := range tails {
		if v >= qhat {
			k = j
			break
		}
	}
	k = max(k, minDocs)
	if maxDocs > 0 {
		k = min(k, maxDocs)
	}
	return min(k, n)
}

// BM25Queries draws n BM25-scale queries of m candidates: a top score in
// [12, 30), then gaps drawn from an exponential of mean 1.2 (whole units,
// as BM25 scores differ), in descending retrieval order; the gold sits at a
// geometric rank (p = 0.45), absent in about 4% of queries or when the rank
// falls past m.
func BM25Queries(rng *rand.Rand, n, m int) []Query {
	out := make([]Query, n)
	for i := range out {
		s := make([]float64, m)
		s[0] = 12 + 18*rng.Float64()
		for j := 1; j < m; j++ {
			s[j] = s[j-1] - 1.2*rng.ExpFloat64()
		}
		gold := -1
		if rng.Float64() >= 0.04 {
			r := 0
			for rng.Float64() >= 0.45 {
				r++
			}
			if r < m {
				gold = r
			}
		}
		out[i] = Query{Scores: s, Gold: gold}
	}
	return out
}
