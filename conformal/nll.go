package conformal

// EmptyNLL is the score the official code gives a trajectory with no response
// tokens at all (an empty generation during bootstrap).
const EmptyNLL = 20.0

// AnswerNLL is the ACI non-conformity score of one trajectory (CAS paper
// Eq. 6): the mean negative log-likelihood, under the rollout policy, of the
// response tokens inside the answer span,
//
//	s = −(1/|A|) Σ_{j∈A} log π_old(y_j | y_<j),   A = [span[0], span[1]),
//
// where logps[j] is the log-prob of response token j. Fallbacks, as in the
// official code: when the span is empty (no <answer>…</answer>; pass
// [2]int{0, 0} or any start ≥ end) the mean is over all response tokens; when
// there are no response tokens at all the score is EmptyNLL (20). A span
// reaching outside the response is clipped to it first.
func AnswerNLL[F float32 | float64](logps []F, span [2]int) float64 {
	if len(logps) == 0 {
		return EmptyNLL
	}
	lo, hi := max(span[0], 0), min(span[1], len(logps))
	if lo >= hi {
		lo, hi = 0, len(logps)
	}
	sum := 0.0
	for _, lp := range logps[lo:hi] {
		sum -= float64(lp)
	}
	return sum / float64(hi-lo)
}
