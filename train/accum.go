package train

import (
	"errors"
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	"github.com/cas-engine/cas/model/qwen"
)

// AccumScope is the scope (under the policy's context) of the gradient
// accumulators, one per trainable variable, mirroring the variable's scope.
const AccumScope = "grad_accum"

// gradAccumulator sums the gradients of micro-batches into float32
// variables, one per trainable policy variable, and applies them with one
// AdamW step:
//
//	acc_i ← acc_i + ∂L_micro/∂θ_i          (each micro-batch)
//	θ ← AdamW(θ, acc),  acc ← 0             (each mini-batch)
//
// With each micro-batch loss divided by the whole mini-batch's token count
// (LossInputs.TokenCount) the sum is exactly the gradient of the
// mini-batch's token-mean loss.
type gradAccumulator struct {
	model     *qwen.Model
	opt       *AdamW
	trainable []*context.Variable // policy weights, in context order
	accums    []*context.Variable // same order
	index     map[*context.Variable]int
	applyExec *context.Exec
	zeroExec  *context.Exec
}

func newGradAccumulator(m *qwen.Model, cfg OptimConfig) (*gradAccumulator, error) {
	opt, err := NewAdamW(cfg)
	if err != nil {
		return nil, err
	}
	a := &gradAccumulator{model: m, opt: opt, index: map[*context.Variable]int{}}
	ctx := m.Context()
	for v := range ctx.IterVariables() {
		if !v.Trainable {
			continue
		}
		if v.DType() != dtypes.Float32 {
			return nil, fmt.Errorf("variable %s is %s, want float32", v.ScopeAndName(), v.DType())
		}
		a.trainable = append(a.trainable, v)
	}
	if len(a.trainable) == 0 {
		return nil, errors.New("the policy has no trainable variables")
	}
	root := ctx.Checked(false)
	for _, v := range a.trainable {
		scope := context.ScopeSeparator + AccumScope + v.Scope()
		if v.Scope() == context.RootScope {
			scope = context.ScopeSeparator + AccumScope
		}
		acc := root.InAbsPath(scope).VariableWithValue(v.Name(), tensors.FromShape(v.Shape())).SetTrainable(false)
		a.index[v] = len(a.accums)
		a.accums = append(a.accums, acc)
	}
	if a.applyExec, err = context.NewExec(m.Backend(), ctx, a.applyGraph); err != nil {
		return nil, err
	}
	if a.zeroExec, err = context.NewExec(m.Backend(), ctx, a.zeroGraph); err != nil {
		return nil, err
	}
	return a, nil
}

// begin creates the accumulators' parameter nodes at the start of a
// micro-batch graph (GoMLX v0.26's pure-Go backend fails on a parameter
// created after every node the outputs use) and returns their values.
func (a *gradAccumulator) begin(g *graph.Graph) []*graph.Node {
	acc := make([]*graph.Node, len(a.accums))
	for i, v := range a.accums {
		acc[i] = v.ValueGraph(g)
	}
	return acc
}

// add differentiates loss with respect to every trainable variable the
// graph uses and adds the gradients to the accumulators (acc from begin).
func (a *gradAccumulator) add(ctx *context.Context, acc []*graph.Node, loss *graph.Node) {
	g := loss.Graph()
	var used []*context.Variable
	for v := range ctx.IterVariables() {
		if v.Trainable && v.InUseByGraph(g) {
			used = append(used, v)
		}
	}
	grads := ctx.BuildTrainableVariablesGradientsGraph(loss)
	for i, v := range used {
		k, ok := a.index[v]
		if !ok {
			panic(fmt.Sprintf("trainable variable %s has no gradient accumulator", v.ScopeAndName()))
		}
		a.accums[k].SetValueGraph(graph.Add(acc[k], grads[i]))
	}
}

// applyGraph takes one AdamW step with the accumulated gradients, then
// zeroes the accumulators. It returns the global gradient norm (before
// clipping) and the learning rate used.
func (a *gradAccumulator) applyGraph(ctx *context.Context, g *graph.Graph) []*graph.Node {
	for _, v := range a.trainable {
		_ = v.ValueGraph(g)
	}
	grads := a.begin(g)
	a.opt.UpdateGraphWithGradients(ctx, grads, dtypes.Float32)
	for i, v := range a.accums {
		v.SetValueGraph(graph.ZerosLike(grads[i]))
	}
	opt := ctx.Checked(false).In(optimizers.Scope)
	norm := opt.GetVariable(GradNormVarName).ValueGraph(g)
	lr := opt.GetVariable(optimizers.ParamLearningRate).ValueGraph(g)
	return []*graph.Node{norm, lr}
}

// zeroGraph clears the accumulators.
func (a *gradAccumulator) zeroGraph(ctx *context.Context, g *graph.Graph) *graph.Node {
	var first *graph.Node
	for _, v := range a.accums {
		z := graph.ZerosLike(v.ValueGraph(g))
		v.SetValueGraph(z)
		if first == nil {
			first = graph.ReduceAllSum(z)
		}
	}
	return first
}

// apply runs one optimiser step on the accumulated gradients. A non-finite
// gradient norm makes the step a no-op (AdamW's SkipNonFinite) and returns
// an error wrapping ErrNonFinite.
func (a *gradAccumulator) apply() (norm, lr float64, err error) {
	out, err := a.applyExec.Exec()
	if err != nil {
		return 0, 0, fmt.Errorf("optimiser: %w", err)
	}
	vals, err := scalars(out)
	if err != nil {
		return 0, 0, err
	}
	if !isFinite(vals[0]) {
		return vals[0], vals[1], fmt.Errorf("gradient norm is %v; update skipped: %w", vals[0], ErrNonFinite)
	}
	return vals[0], vals[1], nil
}

// zero clears the accumulators.
func (a *gradAccumulator) zero() error {
	out, err := a.zeroExec.Exec()
	for _, t := range out {
		t.FinalizeAll()
	}
	return err
}

// clear deletes the optimiser's state (moments, counters) so that another
// optimiser can start afresh on the same policy.
func (a *gradAccumulator) clear() error {
	return a.opt.Clear(a.model.Context())
}

// scalars reads scalar float outputs and frees them.
func scalars(out []*tensors.Tensor) ([]float64, error) {
	vals := make([]float64, len(out))
	for i, t := range out {
		shape := t.Shape()
		v, ok := tensorScalar(t)
		t.FinalizeAll()
		if !ok || shape.Size() != 1 {
			return nil, fmt.Errorf("learner: output %d is %s, want a float scalar", i, shape)
		}
		vals[i] = v
	}
	return vals, nil
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
