package train

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
)

// Shapes used below: B trajectories, T response tokens (right-padded).
// logp, oldLogp, refLogp and mask are [B, T]; advantages and omega are [B].
// mask is 1 on tokens the policy generated and 0 on padding and on every
// retrieved token inside an <information> block.

// LossConfig holds the constants of the GRPO+ACI objective (verl's vanilla
// policy loss as the official code uses it, plus the ACI weights).
type LossConfig struct {
	ClipLow     float64 `yaml:"clip_low"`     // ε_low: the ratio is clipped below at 1 − ε_low (0.2)
	ClipHigh    float64 `yaml:"clip_high"`    // ε_high: the ratio is clipped above at 1 + ε_high (0.2)
	DualClip    float64 `yaml:"dual_clip"`    // c: for A < 0 the token loss is at most −c·A (3.0); must be > 1
	KLCoef      float64 `yaml:"kl_coef"`      // β: weight of the k3 KL to the reference policy (0.001)
	EntropyCoef float64 `yaml:"entropy_coef"` // weight of the entropy bonus (0: off, as in the paper)
}

// DefaultLossConfig returns the paper's and the code's constants.
func DefaultLossConfig() LossConfig {
	return LossConfig{ClipLow: 0.2, ClipHigh: 0.2, DualClip: 3.0, KLCoef: 0.001}
}

// Validate checks that the constants define a proper objective.
func (c LossConfig) Validate() error {
	switch {
	case c.ClipLow < 0 || c.ClipLow >= 1:
		return fmt.Errorf("loss: clip_low %g outside [0, 1)", c.ClipLow)
	case c.ClipHigh < 0:
		return fmt.Errorf("loss: clip_high %g < 0", c.ClipHigh)
	case c.DualClip <= 1:
		return fmt.Errorf("loss: dual_clip %g must be > 1", c.DualClip)
	case c.KLCoef < 0:
		return fmt.Errorf("loss: kl_coef %g < 0", c.KLCoef)
	case c.EntropyCoef < 0:
		return fmt.Errorf("loss: entropy_coef %g < 0", c.EntropyCoef)
	}
	return nil
}

// clamp is PyTorch's torch.clamp(x, lo, hi), including its gradient: 1 for
// lo ≤ x ≤ hi (boundaries included) and 0 outside. GoMLX's ClipScalar routes
// the gradient at x = hi to the bound instead.
func clamp(x *graph.Node, lo, hi float64) *graph.Node {
	g := x.Graph()
	loN := graph.ConstAsDType(g, x.DType(), lo)
	hiN := graph.ConstAsDType(g, x.DType(), hi)
	return graph.Where(graph.LessThan(x, loN), loN, graph.Where(graph.GreaterThan(x, hiN), hiN, x))
}

// ImportanceRatio is the per-token ratio of the current to the rollout
// (old) policy, with the log-ratio clamped for numerical safety:
//
//	r = exp(clamp(logp − logp_old, −20, 20))
func ImportanceRatio(logp, oldLogp *graph.Node) *graph.Node {
	return graph.Exp(clamp(graph.Sub(logp, graph.StopGradient(oldLogp)), -20, 20))
}

// ClippedPolicyLoss is the per-token PPO/GRPO clipped surrogate with dual
// clip and the ACI weight (the ω-weighted GRPO objective of paper
// Algorithm 1; verl's vanilla policy loss as the official code uses it):
//
//	pg = max(−A·r, −A·clip(r, 1 − ε_low, 1 + ε_high))
//	pg = min(pg, −c·A)                         if A < 0   (dual clip)
//	pg ← ω · pg
//
// ratio is [B, T]; adv and omega are [B] (broadcast over tokens) or [B, T].
// It returns the [B, T] token losses and a [B, T] bool marking tokens where
// the clipped branch was taken (pg2 > pg1: verl's pg_clipfrac numerator).
func ClippedPolicyLoss(ratio, adv, omega *graph.Node, cfg LossConfig) (loss, clipped *graph.Node) {
	p := clippedPolicy(ratio, adv, omega, cfg)
	return p.loss, p.clipped
}

type clipParts struct {
	loss     *graph.Node // ω·pg                                  [B, T]
	clipped  *graph.Node // pg2 > pg1                             [B, T] bool
	lowerHit *graph.Node // A < 0 and max(pg1, pg2) > −c·A (dual clip active) [B, T] bool
}

func clippedPolicy(ratio, adv, omega *graph.Node, cfg LossConfig) clipParts {
	adv = perToken(graph.StopGradient(adv), ratio)
	omega = perToken(graph.StopGradient(omega), ratio)
	negA := graph.Neg(adv)
	pg1 := graph.Mul(negA, ratio)                                       // −A·r
	pg2 := graph.Mul(negA, clamp(ratio, 1-cfg.ClipLow, 1+cfg.ClipHigh)) // −A·clip(r)
	clipped := graph.GreaterThan(pg2, pg1)
	pg := graph.Where(clipped, pg2, pg1) // max(pg1, pg2)
	pg3 := graph.MulScalar(negA, cfg.DualClip)
	dualHit := graph.LessThan(pg3, pg)
	negative := graph.IsNegative(adv)
	pg = graph.Where(negative, graph.Where(dualHit, pg3, pg), pg) // min(pg, −c·A) if A < 0
	return clipParts{
		loss:     graph.Mul(omega, pg),
		clipped:  clipped,
		lowerHit: graph.LogicalAnd(negative, dualHit),
	}
}

// LowVarKL is the per-token "k3" estimator of KL(π_θ ‖ π_ref) (Schulman's
// low-variance estimator, verl's low_var_kl):
//
//	d  = clamp(logp_ref − logp, −20, 20)
//	k3 = clamp(exp(d) − d − 1, −10, 10)
func LowVarKL(logp, refLogp *graph.Node) *graph.Node {
	d := clamp(graph.Sub(graph.StopGradient(refLogp), logp), -20, 20)
	k3 := graph.Sub(graph.Sub(graph.Exp(d), d), graph.OnesLike(d))
	return clamp(k3, -10, 10)
}

// TokenMean aggregates [B, T] token values over the loss mask, each
// unmasked token counting once whatever its trajectory (verl's
// "token-mean"; not weighted by ω):
//
//	mean = Σ_{b,t} x·m / max(Σ_{b,t} m, 1)
//
// An empty mask gives 0. mask may be bool or any float dtype.
func TokenMean(x, mask *graph.Node) *graph.Node {
	m := maskAs(mask, x.DType())
	count := graph.MaxScalar(graph.ReduceAllSum(m), 1)
	return graph.Div(graph.ReduceAllSum(graph.Mul(x, m)), count)
}

// TokenEntropy is the entropy of the next-token distribution at every
// position, from logits [B, T, V]:
//
//	H = −Σ_v softmax(z)_v · log softmax(z)_v    → [B, T]
func TokenEntropy(logits *graph.Node) *graph.Node {
	logp := graph.LogSoftmax(logits, -1)
	return graph.Neg(graph.ReduceSum(graph.Mul(graph.Exp(logp), logp), -1))
}

// LossInputs are the graph inputs of the GRPO+ACI objective.
type LossInputs struct {
	LogProbs    *graph.Node // [B, T] log π_θ(token), differentiable
	OldLogProbs *graph.Node // [B, T] log π_old(token), from the rollout
	RefLogProbs *graph.Node // [B, T] log π_ref(token); may be nil when KLCoef = 0
	Mask        *graph.Node // [B, T] 1 on policy tokens, 0 on prompt, retrieved and padding tokens
	Advantages  *graph.Node // [B] group-relative advantages (GroupAdvantages)
	Omega       *graph.Node // [B] ACI weights ω_i ∈ {1, η}; nil means all 1
	Entropy     *graph.Node // [B, T] token entropies (TokenEntropy); needed only when EntropyCoef > 0
	// TokenCount, when set, is the scalar every token sum is divided by
	// instead of this batch's Σ mask. For gradient accumulation over
	// micro-batches pass the whole mini-batch's unmasked token count: the
	// micro-batch losses then add up exactly to the mini-batch's token-mean.
	TokenCount *graph.Node
}

// LossOutputs are the objective and its diagnostics, all scalars.
type LossOutputs struct {
	Loss          *graph.Node // pg + β·kl − entropy_coef·entropy: what is differentiated
	PG            *graph.Node // token-mean of ω·pg
	KL            *graph.Node // token-mean of k3 (0 when KLCoef = 0)
	Entropy       *graph.Node // token-mean entropy (0 unless EntropyCoef > 0)
	ClipFrac      *graph.Node // fraction of tokens where the clipped branch won
	ClipFracLower *graph.Node // fraction of A < 0 tokens where the dual clip bound won
	ApproxKL      *graph.Node // token-mean of logp_old − logp (verl's ppo_kl)
}

// nodes lists the outputs in the order of LossTerms' fields.
func (o LossOutputs) nodes() []*graph.Node {
	return []*graph.Node{o.Loss, o.PG, o.KL, o.Entropy, o.ClipFrac, o.ClipFracLower, o.ApproxKL}
}

// LossTerms are LossOutputs evaluated: the objective and its diagnostics
// as numbers, by name.
type LossTerms struct {
	Loss, PG, KL, Entropy, ClipFrac, ClipFracLower, ApproxKL float64
}

// fields lists the terms in the order of LossOutputs.nodes.
func (t *LossTerms) fields() []*float64 {
	return []*float64{&t.Loss, &t.PG, &t.KL, &t.Entropy, &t.ClipFrac, &t.ClipFracLower, &t.ApproxKL}
}

// add adds u's terms to t's.
func (t *LossTerms) add(u LossTerms) {
	uf := u.fields()
	for k, p := range t.fields() {
		*p += *uf[k]
	}
}

// GRPOLoss builds the CAS training objective (paper Algorithm 1: the
// clipped GRPO objective with ACI's per-trajectory weights ω and the KL
// penalty to the reference model):
//
//	L = TokenMean(ω · pg) + β · TokenMean(k3) − entropy_coef · TokenMean(H)
//
// with pg from ClippedPolicyLoss, k3 from LowVarKL, both averaged over the
// loss mask with the unweighted token count (or divided by TokenCount); the
// KL is not weighted by ω.
// It panics (GoMLX's graph-building convention) on mismatched shapes.
func GRPOLoss(in LossInputs, cfg LossConfig) LossOutputs {
	logp := in.LogProbs
	if logp == nil || logp.Rank() != 2 {
		panic("GRPOLoss: LogProbs must be [B, T]")
	}
	checkSame := func(name string, n *graph.Node) {
		if !n.Shape().Equal(logp.Shape()) {
			panic(fmt.Sprintf("GRPOLoss: %s has shape %s, LogProbs has %s", name, n.Shape(), logp.Shape()))
		}
	}
	if in.OldLogProbs == nil || in.Advantages == nil {
		panic("GRPOLoss: OldLogProbs and Advantages are required")
	}
	checkSame("OldLogProbs", in.OldLogProbs)
	if in.Mask == nil || !sameDims(in.Mask, logp) {
		panic("GRPOLoss: Mask must be [B, T] like LogProbs")
	}
	mask := maskAs(in.Mask, logp.DType())
	// Masked tokens never reach the arithmetic: garbage (±inf) there cannot
	// turn into NaN through 0·inf, and their gradient is exactly 0.
	valid := graph.GreaterThan(mask, graph.ZerosLike(mask))
	zero := graph.ZerosLike(logp)
	sanitize := func(x *graph.Node) *graph.Node { return graph.Where(valid, x, zero) }
	logpS := sanitize(logp)
	omega := in.Omega
	if omega == nil {
		omega = graph.OnesLike(in.Advantages)
	}
	g := logp.Graph()
	out := LossOutputs{}
	mean := func(x *graph.Node) *graph.Node { return TokenMean(x, mask) }
	if in.TokenCount != nil {
		if !in.TokenCount.Shape().IsScalar() {
			panic(fmt.Sprintf("GRPOLoss: TokenCount must be a scalar, got %s", in.TokenCount.Shape()))
		}
		count := graph.MaxScalar(graph.StopGradient(maskAs(in.TokenCount, logp.DType())), 1)
		mean = func(x *graph.Node) *graph.Node { return graph.Div(graph.ReduceAllSum(graph.Mul(x, mask)), count) }
	}

	ratio := ImportanceRatio(logpS, sanitize(in.OldLogProbs))
	parts := clippedPolicy(ratio, in.Advantages, omega, cfg)
	out.PG = mean(parts.loss)
	out.ClipFrac = mean(graph.ConvertDType(parts.clipped, logp.DType()))
	out.ClipFracLower = mean(graph.ConvertDType(parts.lowerHit, logp.DType()))
	out.ApproxKL = mean(graph.StopGradient(graph.Sub(sanitize(in.OldLogProbs), logpS)))
	out.Loss = out.PG

	out.KL = graph.ScalarZero(g, logp.DType())
	if cfg.KLCoef != 0 {
		if in.RefLogProbs == nil {
			panic("GRPOLoss: KLCoef > 0 needs RefLogProbs")
		}
		checkSame("RefLogProbs", in.RefLogProbs)
		out.KL = mean(LowVarKL(logpS, sanitize(in.RefLogProbs)))
		out.Loss = graph.Add(out.Loss, graph.MulScalar(out.KL, cfg.KLCoef))
	}
	out.Entropy = graph.ScalarZero(g, logp.DType())
	if cfg.EntropyCoef != 0 {
		if in.Entropy == nil {
			panic("GRPOLoss: EntropyCoef > 0 needs Entropy")
		}
		checkSame("Entropy", in.Entropy)
		out.Entropy = mean(sanitize(in.Entropy))
		out.Loss = graph.Sub(out.Loss, graph.MulScalar(out.Entropy, cfg.EntropyCoef))
	}
	return out
}

// perToken broadcasts a per-trajectory [B] tensor to like's [B, T] shape
// (a [B, T] tensor is returned as is), in like's dtype.
func perToken(x, like *graph.Node) *graph.Node {
	if x.DType() != like.DType() {
		x = graph.ConvertDType(x, like.DType())
	}
	if x.Rank() == like.Rank() {
		return x
	}
	if x.Rank() != 1 || x.Shape().Dimensions[0] != like.Shape().Dimensions[0] {
		panic(fmt.Sprintf("per-trajectory value has shape %s, want [%d]", x.Shape(), like.Shape().Dimensions[0]))
	}
	return graph.BroadcastToDims(graph.InsertAxes(x, -1), like.Shape().Dimensions...)
}

// maskAs converts a bool or numeric mask to dtype.
func maskAs(mask *graph.Node, dtype dtypes.DType) *graph.Node {
	if mask.DType() == dtype {
		return mask
	}
	return graph.ConvertDType(mask, dtype)
}

func sameDims(a, b *graph.Node) bool {
	if a.Rank() != b.Rank() {
		return false
	}
	for i, d := range a.Shape().Dimensions {
		if b.Shape().Dimensions[i] != d {
			return false
		}
	}
	return true
}
