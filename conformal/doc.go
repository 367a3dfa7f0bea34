// Package conformal holds the conformal-prediction pieces of CAS: the
// split-conformal quantile and its variants, Adaptive Prediction Sets (APS,
// Romano et al. 2020) applied to retrieval scores, and Adaptive Conformal
// Inference (ACI, Gibbs & Candès 2021) applied to training trajectories.
//
// Data flow: search (retrieval scores) → conformal.APS → agent rollouts;
// agent (answer-span NLL) → conformal.ACI → train (GRPO weights ω).
package conformal
