package train

import (
	"math"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/backend/backendtest"
)

func TestLearningRateSchedule(t *testing.T) {
	code := DefaultOptimConfig()
	code.TotalSteps = 351 // int(0.285·351) = 100 warm-up steps, the code's ≈ 100
	cases := []struct {
		cfg  OptimConfig
		step int
		want float64
	}{
		{code, 0, 0},
		{code, 1, 1e-8},
		{code, 50, 0.5e-6},
		{code, 99, 0.99e-6},
		{code, 100, 1e-6},
		{code, 350, 1e-6},
		{OptimConfig{LR: 1e-6}, 0, 1e-6}, // no warm-up: full lr from the first step
		{OptimConfig{LR: 2e-6, WarmupSteps: 4, WarmupRatio: 0.9, TotalSteps: 100}, 2, 1e-6},
		{OptimConfig{LR: 2e-6, WarmupSteps: 4}, 4, 2e-6},
	}
	if w := code.NumWarmupSteps(); w != 100 {
		t.Fatalf("NumWarmupSteps = %d, want 100", w)
	}
	for _, c := range cases {
		if got := c.cfg.LearningRate(c.step); math.Abs(got-c.want) > 1e-18 {
			t.Errorf("%+v: LearningRate(%d) = %g, want %g", c.cfg, c.step, got, c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultOptimConfig()
	good.TotalSteps = 10
	if err := good.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := map[string]func(c *OptimConfig){
		"lr":            func(c *OptimConfig) { c.LR = -1 },
		"lr NaN":        func(c *OptimConfig) { c.LR = math.NaN() },
		"warmup_ratio":  func(c *OptimConfig) { c.WarmupRatio = 1.5 },
		"total_steps":   func(c *OptimConfig) { c.TotalSteps = 0 },
		"weight_decay":  func(c *OptimConfig) { c.WeightDecay = -0.1 },
		"betas":         func(c *OptimConfig) { c.Beta2 = 1 },
		"epsilon":       func(c *OptimConfig) { c.Epsilon = 0 },
		"max_grad_norm": func(c *OptimConfig) { c.MaxGradNorm = -1 },
	}
	for want, mutate := range bad {
		c := good
		mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), strings.Fields(want)[0]) {
			t.Errorf("%s: Validate() = %v", want, err)
		}
		if _, err := NewAdamW(c); err == nil {
			t.Errorf("%s: NewAdamW accepted an invalid config", want)
		}
	}
	lc := DefaultLossConfig()
	if err := lc.Validate(); err != nil {
		t.Fatalf("default loss config: %v", err)
	}
	lc.DualClip = 1
	if lc.Validate() == nil {
		t.Error("dual clip 1 accepted")
	}
}

func TestClipByGlobalNorm(t *testing.T) {
	b := backendtest.Shared(t)
	cases := []struct {
		maxNorm float64
		want    []float32
	}{
		{6.5, []float32{1.5, 2, 6}}, // coef = 6.5/(13+1e-6)
		{100, []float32{3, 4, 12}},  // below the bound: unchanged
		{0, []float32{3, 4, 12}},    // disabled
	}
	for _, c := range cases {
		maxNorm := c.maxNorm
		exec, err := graph.NewExec(b, func(a, x *graph.Node) []*graph.Node {
			clipped, norm := ClipByGlobalNorm(a.Graph(), []*graph.Node{a, x}, maxNorm)
			return []*graph.Node{clipped[0], clipped[1], norm}
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := exec.Exec([]float32{3, 4}, []float32{12})
		if err != nil {
			t.Fatal(err)
		}
		got := append(tensors.MustCopyFlatData[float32](res[0]), tensors.MustCopyFlatData[float32](res[1])...)
		for i := range got {
			if math.Abs(float64(got[i]-c.want[i])) > 1e-5 {
				t.Errorf("max %g: clipped = %v, want %v", maxNorm, got, c.want)
				break
			}
		}
		if n := tensors.MustCopyFlatData[float32](res[2])[0]; n != 13 {
			t.Errorf("norm = %g, want 13", n)
		}
	}
}

// refAdamW is PyTorch's clip_grad_norm_ + AdamW + constant-with-warm-up
// schedule in float64, the reference for AdamW.
type refAdamW struct {
	cfg  OptimConfig
	m, v []float64
	t    int
}

func (r *refAdamW) step(w, grad []float64) (norm, lr float64) {
	for _, g := range grad {
		norm += g * g
	}
	norm = math.Sqrt(norm)
	coef := 1.0
	if r.cfg.MaxGradNorm > 0 {
		coef = math.Min(1, r.cfg.MaxGradNorm/(norm+1e-6))
	}
	lr = r.cfg.LearningRate(r.t)
	r.t++
	if r.m == nil {
		r.m, r.v = make([]float64, len(w)), make([]float64, len(w))
	}
	b1, b2 := r.cfg.Beta1, r.cfg.Beta2
	for i := range w {
		g := grad[i] * coef
		r.m[i] = b1*r.m[i] + (1-b1)*g
		r.v[i] = b2*r.v[i] + (1-b2)*g*g
		mh := r.m[i] / (1 - math.Pow(b1, float64(r.t)))
		vh := r.v[i] / (1 - math.Pow(b2, float64(r.t)))
		w[i] *= 1 - lr*r.cfg.WeightDecay
		w[i] -= lr * mh / (math.Sqrt(vh) + r.cfg.Epsilon)
	}
	return norm, lr
}

// quadratic is the test loss Σ a_i w_i² + x_i w_i, gradient 2 a_i w_i + x_i.
var quadA = []float64{0.5, 2, 1}

func quadGrad(w, x []float64) []float64 {
	g := make([]float64, len(w))
	for i := range w {
		g[i] = 2*quadA[i]*w[i] + x[i]
	}
	return g
}

func newQuadStep(t *testing.T, opt *AdamW, w0 []float32) (*context.Context, *context.Exec) {
	t.Helper()
	ctx := context.New()
	exec, err := context.NewExec(backendtest.Shared(t), ctx, func(ctx *context.Context, x *graph.Node) *graph.Node {
		g := x.Graph()
		w := ctx.In("policy").VariableWithValue("w", w0).ValueGraph(g)
		a := graph.Const(g, []float32{float32(quadA[0]), float32(quadA[1]), float32(quadA[2])})
		loss := graph.ReduceAllSum(graph.Add(graph.Mul(a, graph.Square(w)), graph.Mul(x, w)))
		opt.UpdateGraph(ctx, g, loss)
		return loss
	})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, exec
}

func weights(t *testing.T, ctx *context.Context) []float64 {
	t.Helper()
	v := ctx.In("policy").GetVariable("w")
	val, err := v.Value()
	if err != nil {
		t.Fatal(err)
	}
	f := tensors.MustCopyFlatData[float32](val)
	return []float64{float64(f[0]), float64(f[1]), float64(f[2])}
}

// TestAdamWMatchesPyTorchReference runs AdamW with warm-up, weight decay and
// active clipping for several steps and compares weights, learning rates
// and gradient norms with the float64 reference.
func TestAdamWMatchesPyTorchReference(t *testing.T) {
	cfg := OptimConfig{LR: 0.05, WarmupSteps: 3, WeightDecay: 0.1, Beta1: 0.9, Beta2: 0.999,
		Epsilon: 1e-8, MaxGradNorm: 1.0, SkipNonFinite: true}
	opt, err := NewAdamW(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w0 := []float32{1, -2, 0.5}
	ctx, exec := newQuadStep(t, opt, w0)
	ref := &refAdamW{cfg: cfg}
	w := []float64{1, -2, 0.5}
	x := []float64{0.3, -0.7, 2}
	clippedSteps := 0
	for step := 0; step < 8; step++ {
		wantNorm, wantLR := ref.step(w, quadGrad(w, x))
		if wantNorm > cfg.MaxGradNorm {
			clippedSteps++
		}
		if _, err := exec.Exec([]float32{float32(x[0]), float32(x[1]), float32(x[2])}); err != nil {
			t.Fatalf("%+v", err)
		}
		got := weights(t, ctx)
		for i := range w {
			if math.Abs(got[i]-w[i]) > 1e-5*math.Max(1, math.Abs(w[i])) {
				t.Fatalf("step %d: w = %v, reference %v", step, got, w)
			}
		}
		norm, ok1 := LastGradNorm(ctx)
		lr, ok2 := LastLearningRate(ctx)
		if !ok1 || !ok2 || math.Abs(norm-wantNorm) > 1e-5*wantNorm || math.Abs(lr-wantLR) > 1e-7*cfg.LR {
			t.Fatalf("step %d: grad norm %g lr %g, reference %g %g", step, norm, lr, wantNorm, wantLR)
		}
	}
	if clippedSteps == 0 {
		t.Fatal("test never exercised clipping")
	}
	if weights(t, ctx)[0] == float64(w0[0]) {
		t.Fatal("weights did not move")
	}
}

// TestAdamWSkipsNonFiniteStep: a NaN gradient leaves every variable as it
// was, and the run then continues exactly like one that never saw it.
func TestAdamWSkipsNonFiniteStep(t *testing.T) {
	cfg := OptimConfig{LR: 0.05, WarmupSteps: 2, WeightDecay: 0.1, Beta1: 0.9, Beta2: 0.999,
		Epsilon: 1e-8, MaxGradNorm: 1.0, SkipNonFinite: true}
	x := []float32{0.3, -0.7, 2}
	nan := []float32{0.3, float32(math.NaN()), 2}

	run := func(inputs ...[]float32) (*context.Context, []float64) {
		opt, err := NewAdamW(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, exec := newQuadStep(t, opt, []float32{1, -2, 0.5})
		for _, in := range inputs {
			if _, err := exec.Exec(in); err != nil {
				t.Fatal(err)
			}
		}
		return ctx, weights(t, ctx)
	}
	ctxA, a := run(x, x, nan)
	_, before := run(x, x)
	for i := range a {
		if a[i] != before[i] {
			t.Fatalf("NaN step changed weights: %v → %v", before, a)
		}
	}
	if n, ok := LastGradNorm(ctxA); !ok || !math.IsNaN(n) {
		t.Fatalf("LastGradNorm after NaN step = %g, %v; want NaN", n, ok)
	}
	_, b := run(x, x, nan, x, x)
	_, c := run(x, x, x, x)
	for i := range b {
		if b[i] != c[i] {
			t.Fatalf("run with a skipped step %v differs from run without %v", b, c)
		}
	}
}
