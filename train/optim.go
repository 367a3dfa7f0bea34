package train

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
)

// OptimConfig configures the policy optimiser: AdamW with a constant
// learning rate after a linear warm-up, and global gradient-norm clipping —
// verl's actor optimiser as the official code runs it.
type OptimConfig struct {
	LR          float64 `yaml:"lr"`            // peak learning rate (1e-6)
	WarmupRatio float64 `yaml:"warmup_ratio"`  // warm-up length as a fraction of TotalSteps (code: 0.285)
	WarmupSteps int     `yaml:"warmup_steps"`  // warm-up length in steps; when > 0 it overrides WarmupRatio
	TotalSteps  int     `yaml:"-"`             // optimiser steps of the whole run (for WarmupRatio)
	WeightDecay float64 `yaml:"weight_decay"`  // decoupled (AdamW) weight decay, on every parameter (0.01)
	Beta1       float64 `yaml:"beta1"`         // first-moment decay (0.9)
	Beta2       float64 `yaml:"beta2"`         // second-moment decay (0.999)
	Epsilon     float64 `yaml:"epsilon"`       // denominator constant (1e-8, PyTorch's)
	MaxGradNorm float64 `yaml:"max_grad_norm"` // clip the global gradient norm to this (1.0); 0 disables clipping
	// SkipNonFinite makes a step whose gradient norm is NaN or ±Inf a no-op:
	// every variable the graph changed keeps its old value (see AdamW).
	SkipNonFinite bool `yaml:"-"`
}

// DefaultOptimConfig returns the paper's/code's optimiser settings; the
// caller sets TotalSteps.
func DefaultOptimConfig() OptimConfig {
	return OptimConfig{
		LR: 1e-6, WarmupRatio: 0.285, WeightDecay: 0.01,
		Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, MaxGradNorm: 1.0, SkipNonFinite: true,
	}
}

// Validate checks the settings.
func (c OptimConfig) Validate() error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("optim: lr %g must be finite and ≥ 0", c.LR)
	case !(c.WarmupRatio >= 0 && c.WarmupRatio <= 1):
		return fmt.Errorf("optim: warmup_ratio %g outside [0, 1]", c.WarmupRatio)
	case c.WarmupSteps < 0:
		return fmt.Errorf("optim: warmup_steps %d < 0", c.WarmupSteps)
	case c.TotalSteps < 0:
		return fmt.Errorf("optim: total_steps %d < 0", c.TotalSteps)
	case c.WarmupRatio > 0 && c.WarmupSteps == 0 && c.TotalSteps == 0:
		return fmt.Errorf("optim: warmup_ratio %g needs total_steps", c.WarmupRatio)
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("optim: weight_decay %g < 0", c.WeightDecay)
	case !(c.Beta1 >= 0 && c.Beta1 < 1) || !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("optim: betas (%g, %g) outside [0, 1)", c.Beta1, c.Beta2)
	case !(c.Epsilon > 0):
		return fmt.Errorf("optim: epsilon %g must be > 0", c.Epsilon)
	case !(c.MaxGradNorm >= 0):
		return fmt.Errorf("optim: max_grad_norm %g < 0", c.MaxGradNorm)
	}
	return nil
}

// NumWarmupSteps is W: WarmupSteps if set, else int(WarmupRatio · TotalSteps)
// (truncated, as verl does).
func (c OptimConfig) NumWarmupSteps() int {
	if c.WarmupSteps > 0 {
		return c.WarmupSteps
	}
	return int(c.WarmupRatio * float64(c.TotalSteps))
}

// LearningRate is the learning rate of optimiser step s (0-based), the
// constant-with-warm-up schedule of verl/Hugging Face
// (get_constant_schedule_with_warmup):
//
//	lr(s) = LR · s / W   for s < W
//	lr(s) = LR           for s ≥ W
//
// so with W > 0 the very first step has lr 0, and with W = 0 every step has LR.
func (c OptimConfig) LearningRate(step int) float64 {
	w := c.NumWarmupSteps()
	if step >= w {
		return c.LR
	}
	return c.LR * float64(step) / float64(max(1, w))
}

// GlobalNorm is the L2 norm of all gradients taken as one vector,
//
//	‖g‖ = sqrt( Σ_i Σ_j g_ij² ),
//
// accumulated in float32 (float64 if the gradients are float64). It returns
// a scalar; an empty list gives 0.
func GlobalNorm(g *graph.Graph, grads []*graph.Node) *graph.Node {
	dtype := normDType(grads)
	total := graph.ScalarZero(g, dtype)
	for _, gr := range grads {
		if gr.DType() != dtype {
			gr = graph.ConvertDType(gr, dtype)
		}
		total = graph.Add(total, graph.ReduceAllSum(graph.Square(gr)))
	}
	return graph.Sqrt(total)
}

func normDType(grads []*graph.Node) dtypes.DType {
	for _, gr := range grads {
		if gr.DType() == dtypes.Float64 {
			return dtypes.Float64
		}
	}
	return dtypes.Float32
}

// ClipByGlobalNorm scales all gradients by one factor so that their global
// norm is at most maxNorm (torch.nn.utils.clip_grad_norm_):
//
//	coef = min(1, maxNorm / (‖g‖ + 1e-6)),   g_i ← coef · g_i
//
// maxNorm ≤ 0 leaves them unchanged. It returns the gradients and the norm
// before clipping (a NaN/Inf norm propagates into the gradients, as in
// PyTorch; AdamW then skips the step).
func ClipByGlobalNorm(g *graph.Graph, grads []*graph.Node, maxNorm float64) (clipped []*graph.Node, norm *graph.Node) {
	norm = GlobalNorm(g, grads)
	if maxNorm <= 0 {
		return grads, norm
	}
	coef := graph.MinScalar(graph.Div(graph.ConstAsDType(g, norm.DType(), maxNorm), graph.AddScalar(norm, 1e-6)), 1)
	clipped = make([]*graph.Node, len(grads))
	for i, gr := range grads {
		c := coef
		if c.DType() != gr.DType() {
			c = graph.ConvertDType(c, gr.DType())
		}
		clipped[i] = graph.Mul(gr, c)
	}
	return clipped, norm
}

// Names of the non-trainable variables AdamW keeps under the
// optimizers.Scope ("optimizers") scope of the context it is given.
const (
	WarmupScope     = "warmup"    // holds the schedule's own step counter, "global_step"
	GradNormVarName = "grad_norm" // the last step's global gradient norm (before clipping)
)

// withGradients is GoMLX's train.OptimizeWithGradients (declared here so
// this package does not pull in gomlx's trainer and its dependencies).
type withGradients interface {
	UpdateGraphWithGradients(ctx *context.Context, gradients []*graph.Node, lossDType dtypes.DType)
}

// AdamW is the policy optimiser: it clips the gradients by global norm, sets
// the learning rate of this step from the warm-up schedule, and applies
// GoMLX's Adam with decoupled weight decay, which is PyTorch's AdamW:
//
//	m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²,
//	θ ← θ − lr·( m/(1−β₁ᵗ) / (sqrt(v/(1−β₂ᵗ)) + ε) + λ·θ ).
//
// It implements GoMLX's optimizers.Interface and train.OptimizeWithGradients,
// so it works with gomlx's Trainer and with accumulated gradients. With
// SkipNonFinite, a non-finite gradient norm turns the step into a no-op for
// every variable changed in the graph up to the optimiser's update (weights,
// moments, step counters), verl's "skip the step" behaviour. After each
// execution, LastGradNorm and LastLearningRate read the step's values.
type AdamW struct {
	cfg  OptimConfig
	adam optimizers.Interface
}

var (
	_ optimizers.Interface = (*AdamW)(nil)
	_ withGradients        = (*AdamW)(nil)
)

// NewAdamW validates cfg and builds the optimiser.
func NewAdamW(cfg OptimConfig) (*AdamW, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	adam := optimizers.Adam().
		LearningRate(cfg.LR).
		Betas(cfg.Beta1, cfg.Beta2).
		Epsilon(cfg.Epsilon).
		WeightDecay(cfg.WeightDecay).
		Done()
	if _, ok := adam.(withGradients); !ok {
		return nil, fmt.Errorf("optim: GoMLX Adam does not accept precomputed gradients")
	}
	return &AdamW{cfg: cfg, adam: adam}, nil
}

// Config returns the optimiser's settings.
func (o *AdamW) Config() OptimConfig { return o.cfg }

// UpdateGraph differentiates loss with respect to every trainable variable
// used by the graph and applies UpdateGraphWithGradients.
func (o *AdamW) UpdateGraph(ctx *context.Context, g *graph.Graph, loss *graph.Node) {
	if !loss.Shape().IsScalar() {
		panic(fmt.Sprintf("AdamW: loss must be a scalar, got %s", loss.Shape()))
	}
	o.UpdateGraphWithGradients(ctx, ctx.BuildTrainableVariablesGradientsGraph(loss), loss.DType())
}

// UpdateGraphWithGradients applies one AdamW step from gradients ordered as
// ctx.BuildTrainableVariablesGradientsGraph orders them.
func (o *AdamW) UpdateGraphWithGradients(ctx *context.Context, grads []*graph.Node, lossDType dtypes.DType) {
	if len(grads) == 0 {
		panic("AdamW: no gradients (are there trainable variables in the graph?)")
	}
	g := grads[0].Graph()
	normVar := ctx.Checked(false).In(optimizers.Scope).
		VariableWithValue(GradNormVarName, float32(0)).SetTrainable(false)
	// Create the variable's parameter node now: GoMLX v0.26's simplego
	// backend fails on a parameter created after every node the outputs use.
	_ = normVar.ValueGraph(g)
	clipped, norm := ClipByGlobalNorm(g, grads, o.cfg.MaxGradNorm)

	// This step's learning rate (OptimConfig.LearningRate), s = steps taken before.
	counter := optimizers.IncrementGlobalStepGraph(ctx.In(optimizers.Scope).In(WarmupScope), g, lossDType)
	s := graph.AddScalar(counter, -1)
	w := o.cfg.NumWarmupSteps()
	lr := graph.Where(graph.LessThan(s, graph.ConstAsDType(g, lossDType, w)),
		graph.MulScalar(s, o.cfg.LR/float64(max(1, w))),
		graph.ConstAsDType(g, lossDType, o.cfg.LR))
	optimizers.LearningRateVarWithValue(ctx, lossDType, o.cfg.LR).SetValueGraph(lr)

	o.adam.(withGradients).UpdateGraphWithGradients(ctx, clipped, lossDType)

	if o.cfg.SkipNonFinite {
		finite := graph.IsFinite(norm)
		for v := range ctx.IterVariables() {
			if !v.ChangedInGraph(g) {
				continue
			}
			old := g.GetParameterByName(v.ParameterName())
			if old == nil {
				continue
			}
			updated := v.ValueGraph(g)
			cond := graph.BroadcastToDims(finite, updated.Shape().Dimensions...)
			v.SetValueGraph(graph.Where(cond, updated, old))
		}
	}
	normVar.SetValueGraph(graph.ConvertDType(norm, dtypes.Float32))
}

// Clear deletes the optimiser's moments, counters and recorded values.
func (o *AdamW) Clear(ctx *context.Context) error {
	if err := o.adam.Clear(ctx); err != nil {
		return err
	}
	return ctx.In(optimizers.Scope).DeleteVariablesInScope()
}

// LastGradNorm returns the global gradient norm (before clipping) of the
// last executed AdamW step; ok is false before the first step.
func LastGradNorm(ctx *context.Context) (norm float64, ok bool) {
	return scalarVar(ctx.In(optimizers.Scope), GradNormVarName)
}

// LastLearningRate returns the learning rate used by the last executed step.
func LastLearningRate(ctx *context.Context) (lr float64, ok bool) {
	return scalarVar(ctx.In(optimizers.Scope), optimizers.ParamLearningRate)
}

func scalarVar(ctx *context.Context, name string) (float64, bool) {
	v := ctx.GetVariable(name)
	if v == nil || !v.HasValue() {
		return 0, false
	}
	t, err := v.Value()
	if err != nil || t.Shape().Size() != 1 {
		return 0, false
	}
	return tensorScalar(t)
}

func tensorScalar(t *tensors.Tensor) (float64, bool) {
	switch t.DType() {
	case dtypes.Float32:
		return float64(tensors.MustCopyFlatData[float32](t)[0]), true
	case dtypes.Float64:
		return tensors.MustCopyFlatData[float64](t)[0], true
	}
	return 0, false
}
