// Package agent runs the search agent: prompts, batched rollouts that
// alternate generation with APS-truncated retrieval, and the rule reward of
// the paper's Eq. 5.
//
// Data flow: retriever + APS + model → agent rollouts → train.
package agent
