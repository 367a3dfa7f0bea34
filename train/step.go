package train

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/qwen"
)

// ErrNonFinite is wrapped by the error a training step returns when the
// loss or the gradient norm is NaN or ±Inf. The step applies no update from
// the offending mini-batch (AdamW skips it); a run stops there and keeps its
// last good checkpoint.
var ErrNonFinite = errors.New("non-finite loss or gradient")

// LearnerConfig configures the GRPO+ACI policy update of one training step.
type LearnerConfig struct {
	Loss  LossConfig
	Optim OptimConfig
	// MiniBatchGroups is the number of prompts (groups of G trajectories) per
	// optimiser step (verl's ppo_mini_batch_size, 256); 0 means the whole
	// step's batch.
	MiniBatchGroups int
	// MicroBatch is the number of trajectories per forward/backward pass;
	// gradients of the micro-batches of a mini-batch are accumulated
	// (verl's ppo_micro_batch_size_per_gpu). 0 means 8.
	MicroBatch int
	// Epochs is the number of passes over the step's batch (PPO epochs, 1).
	Epochs int
	// RecomputeOldLogProbs recomputes log π_old with the policy before any
	// update of the step (verl's compute_log_prob) instead of using the
	// log-probs recorded while sampling; they agree up to float32 rounding.
	RecomputeOldLogProbs bool
	// Temperature divides the logits when scoring (verl scores at the
	// rollout temperature); 0 means 1.
	Temperature float64
	// ApplyACI multiplies each trajectory's policy loss by its ACI weight
	// ω ∈ {1, η}. When false (the −ACI ablation) every ω is 1; a controller,
	// if given, still runs so that α_t, q_t and the low-confidence ratio are
	// logged.
	ApplyACI bool
}

// DefaultLearnerConfig returns the paper's update: loss constants of
// DefaultLossConfig, DefaultOptimConfig, mini-batches of 256 prompts,
// micro-batches of 8 trajectories, one PPO epoch, old log-probs recomputed,
// temperature 1 and ACI weights applied.
func DefaultLearnerConfig() LearnerConfig {
	return LearnerConfig{
		Loss: DefaultLossConfig(), Optim: DefaultOptimConfig(),
		MiniBatchGroups: 256, MicroBatch: 8, Epochs: 1,
		RecomputeOldLogProbs: true, Temperature: 1, ApplyACI: true,
	}
}

// Validate checks the configuration.
func (c LearnerConfig) Validate() error {
	if err := c.Loss.Validate(); err != nil {
		return err
	}
	if err := c.Optim.Validate(); err != nil {
		return err
	}
	switch {
	case c.MiniBatchGroups < 0:
		return fmt.Errorf("learner: mini_batch_prompts %d < 0", c.MiniBatchGroups)
	case c.MicroBatch < 0:
		return fmt.Errorf("learner: micro_batch %d < 0", c.MicroBatch)
	case c.Epochs < 1:
		return fmt.Errorf("learner: epochs %d < 1", c.Epochs)
	case c.Temperature < 0 || math.IsNaN(c.Temperature) || math.IsInf(c.Temperature, 0):
		return fmt.Errorf("learner: temperature %g must be finite and ≥ 0", c.Temperature)
	}
	return nil
}

// Learner applies GRPO+ACI updates (paper Algorithm 1, lines 8–13) to a
// policy: for a batch of rewarded trajectories it scores them under the
// rollout and reference policies, runs the ACI step on their answer-span
// NLLs to get ω, computes group-relative advantages, and takes one AdamW
// step per mini-batch on the ω-weighted clipped objective with the k3 KL
// penalty, accumulating gradients over micro-batches.
//
// The reference model must be a separate qwen.Model (its own context and
// weights): nothing mutable is shared with the policy.
//
// A Learner is not safe for concurrent use.
type Learner struct {
	cfg    LearnerConfig
	policy *qwen.Model
	ref    *qwen.Model
	aci    *conformal.ACI
	useRef bool
	acc    *gradAccumulator
	micro  *context.Exec
}

// NewLearner builds the learner for policy (trained in place), ref (frozen;
// may be nil only when the KL coefficient is 0) and aci (nil: ω = 1 and no
// ACI metrics). Optimiser state lives in the policy's context, under the
// scopes of AdamW ("optimizers", "AdamOptimizer").
func NewLearner(policy, ref *qwen.Model, aci *conformal.ACI, cfg LearnerConfig) (*Learner, error) {
	if cfg.MicroBatch == 0 {
		cfg.MicroBatch = 8
	}
	if cfg.Temperature == 0 {
		cfg.Temperature = 1
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if policy == nil {
		return nil, errors.New("learner: no policy")
	}
	if ref == policy {
		return nil, errors.New("learner: the reference model must be a separate copy of the policy")
	}
	if ref == nil && cfg.Loss.KLCoef > 0 {
		return nil, fmt.Errorf("learner: kl_coef %g needs a reference model", cfg.Loss.KLCoef)
	}
	if ref != nil && ref.Context() == policy.Context() {
		return nil, errors.New("learner: the reference model shares the policy's context")
	}
	if ref != nil && ref.Config.VocabSize != policy.Config.VocabSize {
		return nil, fmt.Errorf("learner: reference vocabulary %d ≠ policy vocabulary %d", ref.Config.VocabSize, policy.Config.VocabSize)
	}
	acc, err := newGradAccumulator(policy, cfg.Optim)
	if err != nil {
		return nil, fmt.Errorf("learner: %w", err)
	}
	l := &Learner{cfg: cfg, policy: policy, ref: ref, aci: aci, acc: acc, useRef: ref != nil && cfg.Loss.KLCoef > 0}
	if l.micro, err = context.NewExec(policy.Backend(), policy.Context(), l.microGraph); err != nil {
		return nil, err
	}
	return l, nil
}

// Config returns the configuration (defaults filled in).
func (l *Learner) Config() LearnerConfig { return l.cfg }

// ACI returns the controller (nil if none).
func (l *Learner) ACI() *conformal.ACI { return l.aci }

// Policy returns the model being trained.
func (l *Learner) Policy() *qwen.Model { return l.policy }

// microGraph computes one micro-batch's loss terms and adds its gradients
// to the accumulators. Inputs: ids, attention mask [B, T] int32, loss mask,
// old log-probs [B, T] float32, advantages, ω [B], the mini-batch token count
// (scalar), and the reference log-probs [B, T] when the KL is on. Outputs
// the loss terms (LossOutputs.nodes) as this micro-batch's share of the
// mini-batch token-means.
func (l *Learner) microGraph(ctx *context.Context, in []*graph.Node) []*graph.Node {
	ids, attn, mask, old, adv, omega, count := in[0], in[1], in[2], in[3], in[4], in[5], in[6]
	acc := l.acc.begin(ids.Graph())
	var ref *graph.Node
	if l.useRef {
		ref = in[7]
	}
	logp, ent := qwen.TokenLogProbs(ctx, l.policy.Config, ids, attn, mask,
		qwen.ScoreOptions{Temperature: l.cfg.Temperature, Entropy: l.cfg.Loss.EntropyCoef > 0})
	out := GRPOLoss(LossInputs{
		LogProbs: logp, OldLogProbs: old, RefLogProbs: ref, Mask: mask,
		Advantages: adv, Omega: omega, Entropy: ent, TokenCount: count,
	}, l.cfg.Loss)
	l.acc.add(ctx, acc, out.Loss)
	return out.nodes()
}

// StepResult reports one learner step.
type StepResult struct {
	// LossTerms are averaged over the optimiser steps (mini-batches ×
	// epochs); each is a token-mean over its mini-batch.
	LossTerms
	// GradNorm is the mean global gradient norm before clipping; LR the
	// learning rate of the last optimiser step.
	GradNorm, LR float64
	// OptimizerSteps is the number of AdamW steps taken.
	OptimizerSteps int
	// Advantages and Omega are per trajectory, in input order; Scores are
	// the answer-span NLLs under the rollout policy (paper Eq. 6).
	Advantages, Omega, Scores []float64
	// ACI is the controller's step (zero when there is no controller).
	ACI    conformal.ACIStep
	HasACI bool
	// LowConfidence is the fraction of trajectories with ω = η (= err_t).
	LowConfidence float64
	// PolicyTokens is the number of tokens in the loss (one epoch).
	PolicyTokens int
	// ScoreTime and UpdateTime are the wall times of the old/ref scoring
	// and of the updates.
	ScoreTime, UpdateTime time.Duration
}

// Step runs one GRPO+ACI update on a batch of trajectories. Groups with
// their G members must be complete in the batch; the batch is split into
// mini-batches of MiniBatchGroups groups in order of first appearance.
//
// On a NaN or ±Inf loss or gradient norm it returns an error wrapping
// ErrNonFinite that names the epoch and mini-batch; the offending
// mini-batch changed no weight (earlier mini-batches of the step did).
func (l *Learner) Step(trajs []*agent.Trajectory) (*StepResult, error) {
	if len(trajs) == 0 {
		return nil, errors.New("learner step: no trajectories")
	}
	needOld := !l.cfg.RecomputeOldLogProbs
	for i := range trajs {
		if err := checkTrajectory(trajs[i], l.policy.Config.VocabSize, needOld); err != nil {
			return nil, fmt.Errorf("learner step: trajectory %d: %w", i, err)
		}
	}
	res := &StepResult{}
	start := time.Now()
	micro := l.microBatches(trajs)

	// Old (rollout-policy) and reference log-probs, per response token.
	old := make([][]float32, len(trajs))
	ref := make([][]float32, len(trajs))
	for _, idx := range micro {
		p := packRows(trajs, idx, l.cfg.MicroBatch)
		if l.cfg.RecomputeOldLogProbs {
			lp, _, err := l.policy.Score(p.ids, p.attn, p.respMaskI, p.rows, p.seqLen, qwen.ScoreOptions{Temperature: l.cfg.Temperature})
			if err != nil {
				return nil, fmt.Errorf("learner step: old log-probs: %w", err)
			}
			for r, i := range idx {
				old[i] = p.responseOf(lp, r, trajs[i])
			}
		}
		if l.useRef {
			lp, _, err := l.ref.Score(p.ids, p.attn, p.respMaskI, p.rows, p.seqLen, qwen.ScoreOptions{Temperature: l.cfg.Temperature})
			if err != nil {
				return nil, fmt.Errorf("learner step: reference log-probs: %w", err)
			}
			for r, i := range idx {
				ref[i] = p.responseOf(lp, r, trajs[i])
			}
		}
	}
	for i := range trajs {
		if !l.cfg.RecomputeOldLogProbs {
			old[i] = trajs[i].ResponseLogProbs()
		}
		res.PolicyTokens += trajs[i].PolicyTokens()
	}
	res.ScoreTime = time.Since(start)

	// ACI: scores under the rollout policy → q_t, err_t, ω, α update.
	res.Scores = make([]float64, len(trajs))
	for i := range trajs {
		res.Scores[i] = agent.ConfidenceScore(old[i], trajs[i].ResponseMask(), trajs[i].AnswerSpan)
		if math.IsNaN(res.Scores[i]) || math.IsInf(res.Scores[i], 0) {
			return nil, fmt.Errorf("learner step: trajectory %d: ACI score (answer-span NLL under the rollout policy) is %v: %w", i, res.Scores[i], ErrNonFinite)
		}
	}
	res.Omega = make([]float64, len(trajs))
	for i := range res.Omega {
		res.Omega[i] = 1
	}
	if l.aci != nil {
		st, err := l.aci.Step(res.Scores)
		if err != nil {
			return nil, fmt.Errorf("learner step: %w", err)
		}
		res.ACI, res.HasACI = st, true
		res.LowConfidence = st.Err
		if l.cfg.ApplyACI {
			copy(res.Omega, st.Weights)
		}
	}

	// Group-relative advantages.
	rewards := make([]float32, len(trajs))
	groups := make([]int, len(trajs))
	for i := range trajs {
		rewards[i] = float32(trajs[i].Outcome.Reward)
		groups[i] = trajs[i].Question
	}
	adv, err := GroupAdvantagesByID(rewards, groups)
	if err != nil {
		return nil, fmt.Errorf("learner step: %w", err)
	}
	res.Advantages = make([]float64, len(adv))
	for i, a := range adv {
		res.Advantages[i] = float64(a)
	}
	omega32 := make([]float32, len(trajs))
	for i, w := range res.Omega {
		omega32[i] = float32(w)
	}

	// Updates: one AdamW step per mini-batch, per epoch.
	upd := time.Now()
	for epoch := range l.cfg.Epochs {
		for mb, members := range l.miniBatches(trajs) {
			count := 0
			for _, i := range members {
				count += trajs[i].PolicyTokens()
			}
			var terms LossTerms
			members = byLength(trajs, members)
			for off := 0; off < len(members); off += l.cfg.MicroBatch {
				idx := members[off:min(off+l.cfg.MicroBatch, len(members))]
				p := packRows(trajs, idx, l.cfg.MicroBatch)
				args := []any{
					tensors.FromFlatDataAndDimensions(p.ids, p.rows, p.seqLen),
					tensors.FromFlatDataAndDimensions(p.attn, p.rows, p.seqLen),
					tensors.FromFlatDataAndDimensions(p.lossMask, p.rows, p.seqLen),
					tensors.FromFlatDataAndDimensions(p.spread(trajs, func(i int) []float32 { return old[i] }), p.rows, p.seqLen),
					tensors.FromFlatDataAndDimensions(p.perRow(adv), p.rows),
					tensors.FromFlatDataAndDimensions(p.perRow(omega32), p.rows),
					tensors.FromScalar(float32(count)),
				}
				if l.useRef {
					args = append(args, tensors.FromFlatDataAndDimensions(p.spread(trajs, func(i int) []float32 { return ref[i] }), p.rows, p.seqLen))
				}
				out, err := l.micro.Exec(args...)
				if err != nil {
					return nil, fmt.Errorf("learner step: epoch %d mini-batch %d: %w", epoch+1, mb+1, err)
				}
				vals, err := scalars(out)
				if err != nil {
					return nil, err
				}
				for k, p := range terms.fields() {
					*p += vals[k]
				}
			}
			if !isFinite(terms.Loss) {
				if err := l.acc.zero(); err != nil {
					return nil, errors.Join(err, fmt.Errorf("learner step: epoch %d mini-batch %d: loss is %v (pg %v, kl %v): %w",
						epoch+1, mb+1, terms.Loss, terms.PG, terms.KL, ErrNonFinite))
				}
				return nil, fmt.Errorf("learner step: epoch %d mini-batch %d: loss is %v (pg %v, kl %v); no update applied: %w",
					epoch+1, mb+1, terms.Loss, terms.PG, terms.KL, ErrNonFinite)
			}
			norm, lr, err := l.acc.apply()
			if err != nil {
				return nil, fmt.Errorf("learner step: epoch %d mini-batch %d: %w", epoch+1, mb+1, err)
			}
			res.add(terms)
			res.GradNorm += norm
			res.LR = lr
			res.OptimizerSteps++
		}
	}
	n := float64(res.OptimizerSteps)
	for _, p := range append(res.fields(), &res.GradNorm) {
		*p /= n
	}
	res.UpdateTime = time.Since(upd)
	return res, nil
}

// miniBatches splits trajectory indices into mini-batches of
// MiniBatchGroups groups, groups ordered by first appearance.
func (l *Learner) miniBatches(trajs []*agent.Trajectory) [][]int {
	var order []int
	members := map[int][]int{}
	for i := range trajs {
		g := trajs[i].Question
		if _, ok := members[g]; !ok {
			order = append(order, g)
		}
		members[g] = append(members[g], i)
	}
	per := l.cfg.MiniBatchGroups
	if per <= 0 {
		per = len(order)
	}
	var out [][]int
	for off := 0; off < len(order); off += per {
		var mb []int
		for _, g := range order[off:min(off+per, len(order))] {
			mb = append(mb, members[g]...)
		}
		out = append(out, mb)
	}
	return out
}

// microBatches splits all trajectory indices into micro-batches of
// trajectories of similar length (byLength).
func (l *Learner) microBatches(trajs []*agent.Trajectory) [][]int {
	all := make([]int, len(trajs))
	for i := range all {
		all[i] = i
	}
	all = byLength(trajs, all)
	var out [][]int
	for off := 0; off < len(all); off += l.cfg.MicroBatch {
		out = append(out, all[off:min(off+l.cfg.MicroBatch, len(all))])
	}
	return out
}

// byLength returns the trajectory indices idx ordered by sequence length
// (stable), so that consecutive micro-batches hold trajectories of similar
// length: a micro-batch is padded to its longest row's bucket, and one
// babbling 640-token response among short ones made every row of its
// micro-batch cost 1024 positions. The order changes no value: the
// micro-batch losses are divided by the whole mini-batch's token count and
// their gradients summed (LossInputs.TokenCount).
func byLength(trajs []*agent.Trajectory, idx []int) []int {
	out := slices.Clone(idx)
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(len(trajs[a].IDs), len(trajs[b].IDs)) })
	return out
}
