// Package conformal holds the conformal-prediction pieces of CAS: the
// split-conformal quantile and its variants, Adaptive Prediction Sets (APS,
// Romano et al. 2020) applied to retrieval scores, and Adaptive Conformal
// Inference (ACI, Gibbs & Candès 2021) applied to training trajectories.
//
// Data flow: search (retrieval scores) → conformal.APS → agent rollouts;
// agent (answer-span NLL) → conformal.ACI → train (GRPO weights ω).
//
// The pieces, each documented with its formula:
//
//   - Quantile / QuantileSorted with a QuantileRule: RuleConformal
//     (⌈(n+1)(1−α)⌉-th smallest, the paper), RuleHigher (numpy "higher", the
//     official code's APS), RuleLinear (torch.quantile, the code's ACI).
//   - APS: Probabilities (sorted softmax(s/T) and cumulative mass), Score and
//     RandomizedScore (calibration scores), Calibrate (q̂ and coverage), Keep
//     and KeepIndices (truncation, clamped to [MinDocs, MaxDocs]). PaperAPS
//     and CodeAPS hold the two settings; PaperAlpha and CodeAlpha their α.
//   - ACI: NewACI(ACIConfig, bootstrap) and Step(batch scores) → q_t, err_t,
//     weights ω_i, α_{t+1}, with the plain (Eq. 4), smoothed (Eq. 7, default)
//     and EMA (official code) rules; state round-trips exactly through JSON.
//   - AnswerNLL: the ACI score of a trajectory (Eq. 6).
//   - ReadQueries / ReadScoreLines: the JSONL formats of `cas conformal`.
//   - Walkthrough: the simulated APS + ACI walkthrough `cas demo` prints.
//
// Nothing here keeps global state; an ACI value is not safe for concurrent
// use.
package conformal
