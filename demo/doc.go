// Package demo is CAS end to end on a laptop: `cas demo` and `cas ablate`.
//
// Run builds the embedded default world (package world: a synthetic
// encyclopedia whose facts cannot be known without searching) and walks the
// method's whole data flow on it, writing everything under one run folder:
//
//  1. world → corpus → BM25 index (package search);
//  2. APS calibrated on the hop queries of the aps_calib split with their
//     exact gold passages (calibrate.RunSplit with calibrate.GoldIDJudge)
//     — q̂ is the ⌈(n+1)(1−α)⌉-th smallest score E = c_r (paper §3.2) —
//     and its coverage measured on the test split;
//  3. a randomly initialised tiny Qwen3 warm-started by supervised
//     cross-entropy on scripted trajectories (one search per hop, with the
//     real APS-truncated retrieval results in <information>), mixed with
//     direct-answer examples for the no-retrieval baseline (the default
//     preset has a share answer from memory without searching, a decision
//     left for GRPO: WarmSettings.NoSearch); the question
//     and passage tokens are in the loss at a small weight λ, a stand-in
//     for the pretraining a real Qwen has (WarmSettings.EnvWeight;
//     train.SFT minimising train.WeightedNextTokenLoss);
//  4. ACI's window bootstrapped with the warm-started policy's answer-span
//     NLLs (Eq. 6), then GRPO with APS and ACI (Algorithm 1) for every
//     variant: CAS, −ACI (ω ≡ 1), and with --quick −APS (fixed top-3);
//  5. greedy evaluation on the test split (entities never seen in
//     training; bench.Eval): EM single-hop / two-hop / overall, searches
//     and redundant searches per question, the two-hop questions answered
//     after two searches, passages per search, gold coverage of the kept
//     passages, the format-valid rate and a reliability table of the
//     answer-span NLL against EM, next to the no-retrieval and warm-start
//     baselines;
//  6. report.md, result.json and PNG plots (the paper's Figure 2, reward
//     and EM against steps with moving averages, searches and redundant
//     searches, ACI's low-confidence ratio against ρ next to a fixed
//     bootstrap threshold's, α_t, the reliability diagram, APS set sizes,
//     warm-start loss, test EM with error bars).
//
// Every stage writes a completion marker (.stages/) once its outputs are
// complete; the warm start saves the policy after each of its chunks and the
// GRPO runs checkpoint every few steps (package train), so a run stopped by
// Ctrl-C resumes where it stopped when the same command is run again.
//
// Ablate repeats the pipeline over seeds with the paper's ablation rows
// (Default, −ACI, −APS, ρ ∈ {0.1, 0.4}, α_APS ∈ {0.05, 0.35}), each seed's
// variants sharing its warm start, and writes Table 3 (EM, mean ± std over
// seeds with the per-seed values, and for every row whether its
// difference to the default exceeds twice its paired standard error) and
// Table 4 (passages per search for each α_APS).
//
// Data flow: the package sits at the top, importing world, search,
// conformal, model, agent, train, calibrate and bench; nothing imports it
// but cmd/cas.
package demo
