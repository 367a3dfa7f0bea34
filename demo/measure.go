package demo

import (
	"math"
	"sort"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/train"
	"github.com/cas-engine/cas/world"
)

// QuestionOutcome is one evaluated test question: what the report's
// measurements (EM per type, searches, redundant searches, reliability) are
// computed from.
type QuestionOutcome struct {
	Hops int  `json:"hops"`
	EM   bool `json:"em"`
	// NLL is the trajectory's answer-span NLL (paper Eq. 6, the ACI score;
	// agent.Trajectory.AnswerNLL) under the evaluated policy.
	NLL       float64 `json:"nll"`
	Searches  int     `json:"searches"`
	Redundant int     `json:"redundant"`
}

// outcomeOf summarises one trajectory of question q.
func outcomeOf(q world.Question, t *agent.Trajectory) QuestionOutcome {
	return QuestionOutcome{Hops: q.Hops, EM: t.EM, NLL: t.AnswerNLL(), Searches: len(t.Searches), Redundant: agent.RedundantSearches(t.Searches)}
}

// ReliabilityBin is one bin of a reliability diagram: the questions whose
// answer-span NLL lies in [NLLLo, NLLHi], their mean confidence
// exp(−NLL) (the geometric-mean probability of the answer tokens) and
// their exact-match rate.
type ReliabilityBin struct {
	NLLLo      float64 `json:"nll_lo"`
	NLLHi      float64 `json:"nll_hi"`
	N          int     `json:"n"`
	Confidence float64 `json:"confidence"`
	EM         float64 `json:"em"`
}

// Reliability bins the outcomes by answer-span NLL into at most bins
// equal-count bins (ties kept together, so a bin may hold more) and
// returns them, lowest NLL first, with the expected calibration error
//
//	ECE = Σ_b (n_b / N) · |EM_b − conf_b|,   conf_b = mean_{i∈b} exp(−NLL_i).
//
// A calibrated policy's EM falls with its NLL and sits on the diagonal.
func Reliability(outs []QuestionOutcome, bins int) ([]ReliabilityBin, float64) {
	if len(outs) == 0 || bins < 1 {
		return nil, 0
	}
	s := append([]QuestionOutcome(nil), outs...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].NLL < s[j].NLL })
	var out []ReliabilityBin
	ece := 0.0
	for lo := 0; lo < len(s); {
		hi := max(lo+1, (len(out)+1)*len(s)/bins)
		for hi < len(s) && s[hi].NLL == s[hi-1].NLL {
			hi++
		}
		b := ReliabilityBin{NLLLo: s[lo].NLL, NLLHi: s[hi-1].NLL, N: hi - lo}
		for _, o := range s[lo:hi] {
			b.Confidence += math.Exp(-o.NLL)
			if o.EM {
				b.EM++
			}
		}
		b.Confidence /= float64(b.N)
		b.EM /= float64(b.N)
		ece += float64(b.N) / float64(len(s)) * math.Abs(b.EM-b.Confidence)
		out = append(out, b)
		lo = hi
	}
	return out, ece
}

// EMStdErr is the binomial standard error √(p(1−p)/n) of an EM rate p over
// n questions.
func EMStdErr(p float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	return math.Sqrt(max(p*(1-p), 0) / float64(n))
}

// FixedThresholdErr is, for each step of a GRPO run, the low-confidence
// ratio that a static threshold would have had: the fraction of the
// step's ACI scores above q₁, the quantile of the bootstrap scores alone
// that ACI used at step 1 (before its α_t and window moved). Next to ACI's
// err_t it shows the paper's argument for adapting (§3.3): the rollout
// policy's scores drift from the bootstrap's, and a fixed threshold's
// error rate drifts with them. Steps without scores give NaN.
func FixedThresholdErr(ms []train.StepMetrics) []float64 {
	out := make([]float64, len(ms))
	if len(ms) == 0 {
		return out
	}
	q := float64(ms[0].QHat)
	for i, m := range ms {
		out[i] = conformal.LowConfidenceRate(m.Scores, q)
	}
	return out
}

// ACISummary condenses a run's ACI trace: the low-confidence ratio err_t
// against its target ρ (at step 1, and its mean over all steps and over
// the second half), α_t from the first step to after the last, and the
// fixed bootstrap threshold's error rate (FixedThresholdErr) at step 1 and
// on average.
type ACISummary struct {
	Rho          float64 `json:"rho"`
	ErrFirst     float64 `json:"err_first"`
	ErrMean      float64 `json:"err_mean"`
	ErrLateMean  float64 `json:"err_late_mean"`
	AlphaFirst   float64 `json:"alpha_first"`
	AlphaLast    float64 `json:"alpha_last"`
	FixedFirst   float64 `json:"fixed_err_first"`
	FixedMean    float64 `json:"fixed_err_mean"`
	ScoreFirst   float64 `json:"nll_first"`
	ScoreLast    float64 `json:"nll_last"`
	Steps        int     `json:"steps"`
	Weighted     bool    `json:"weighted"`
	TheoremBound float64 `json:"theorem_bound"`
}

// SummarizeACI computes the ACISummary of one run, γ and α₁ being the
// controller's step and initial level (for the bound of the plain rule,
// |mean err − ρ| ≤ (max(α₁, 1−α₁) + γ)/(Tγ)).
func SummarizeACI(ms []train.StepMetrics, rho, gamma float64) ACISummary {
	if len(ms) == 0 {
		return ACISummary{Rho: rho}
	}
	fixed := FixedThresholdErr(ms)
	s := ACISummary{Rho: rho, Steps: len(ms), ErrFirst: ms[0].LowConfidence, AlphaFirst: ms[0].Alpha, AlphaLast: ms[len(ms)-1].AlphaNext,
		FixedFirst: fixed[0], ScoreFirst: ms[0].ScoreMean, ScoreLast: ms[len(ms)-1].ScoreMean, Weighted: ms[0].ACIWeighted}
	var all, late, fx []float64
	for i, m := range ms {
		all = append(all, m.LowConfidence)
		if i >= len(ms)/2 {
			late = append(late, m.LowConfidence)
		}
		if !math.IsNaN(fixed[i]) {
			fx = append(fx, fixed[i])
		}
	}
	s.ErrMean, s.ErrLateMean, s.FixedMean = mean(all), mean(late), mean(fx)
	if gamma > 0 {
		a1 := ms[0].Alpha
		s.TheoremBound = (max(a1, 1-a1) + gamma) / (float64(len(ms)) * gamma)
	}
	return s
}
