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
//   - APS, decided in log space so that it stays exact at any score scale
//     (BM25 at T = 0.01 included): LogScores (S_k = −log(1 − c_k) per rank),
//     LogScore and RandomizedLogScore (calibration scores; Score and
//     RandomizedScore give them on the E = c_r scale for display), KeepLog
//     and KeepLogIndices (truncation by a log-scale threshold, clamped to
//     [MinDocs, MaxDocs]; Keep and KeepIndices take an E-scale one),
//     Probabilities (sorted softmax(s/T) and cumulative mass, for display).
//     PaperAPS and CodeAPS hold the two settings; PaperAlpha and CodeAlpha
//     their α.
//   - Calibration: the one APS calibration type and file (qhat.json) —
//     settings, threshold on both scales, α, rule, n, candidate counts,
//     coverage and warnings — from APS.Calibrate, written by Save or
//     SaveReport and read by LoadCalibration; it keeps by Keep/KeepIndices.
//   - ACI: NewACI(ACIConfig, bootstrap) and Step(batch scores) → q_t, err_t,
//     weights ω_i, α_{t+1}, with the plain (Eq. 4), smoothed (Eq. 7, default)
//     and EMA (official code) rules and a window of iterations (paper) or of
//     scores (code); state round-trips exactly through JSON.
//   - AnswerNLL: the ACI score of a trajectory (Eq. 6).
//   - ReadQueries / ReadScoreLines: the JSONL formats of `cas conformal`.
//   - Walkthrough: the simulated APS + ACI walkthrough `cas demo` prints.
//
// Nothing here keeps global state; an ACI value is not safe for concurrent
// use.
package conformal
