// Package train holds the CAS trainer: GRPO with ACI confidence weights
// (paper Algorithm 1), the supervised warm start, the optimiser, checkpoints
// and per-step metrics.
//
// Data flow: agent rollouts → rewards → GRPO+ACI → checkpoint.
package train
