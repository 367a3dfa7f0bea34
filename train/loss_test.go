package train

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/testfile"
)

// lossCase is one case of ../shared/golden/grpo/loss_cases.json (PyTorch,
// float64).
type lossCase struct {
	GroupSize    int         `json:"group_size"`
	Rewards      []float64   `json:"rewards"`
	Advantages   []float64   `json:"advantages"`
	LogP         [][]float64 `json:"logp"`
	OldLogP      [][]float64 `json:"old_logp"`
	RefLogP      [][]float64 `json:"ref_logp"`
	ResponseMask [][]float64 `json:"response_mask"`
	Omega        []float64   `json:"omega"`
	ClipEps      float64     `json:"clip_eps"`
	DualClipC    float64     `json:"dual_clip_c"`
	KLCoef       float64     `json:"kl_coef"`
	Expected     struct {
		PGLoss   float64     `json:"pg_loss"`
		KL       float64     `json:"kl"`
		Loss     float64     `json:"loss"`
		GradLogP [][]float64 `json:"grad_logp"`
	} `json:"expected"`
}

func loadLossCases(t testing.TB) []lossCase {
	t.Helper()
	path := sharedtest.Path(t, "golden", "grpo", "loss_cases.json")
	raw := testfile.Read(t, path)
	var file struct {
		Cases []lossCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	if len(file.Cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return file.Cases
}

// matrix flattens a [B][T] table into a tensor of the given dtype.
func matrix(dtype dtypes.DType, m [][]float64) *tensors.Tensor {
	flat := make([]float64, 0, len(m)*len(m[0]))
	for _, row := range m {
		flat = append(flat, row...)
	}
	return vector(dtype, flat, len(m), len(m[0]))
}

func vector(dtype dtypes.DType, v []float64, dims ...int) *tensors.Tensor {
	if len(dims) == 0 {
		dims = []int{len(v)}
	}
	if dtype == dtypes.Float64 {
		return tensors.FromFlatDataAndDimensions(append([]float64(nil), v...), dims...)
	}
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return tensors.FromFlatDataAndDimensions(f, dims...)
}

func flat64(t *tensors.Tensor) []float64 {
	switch t.DType() {
	case dtypes.Float64:
		return tensors.MustCopyFlatData[float64](t)
	case dtypes.Float32:
		f := tensors.MustCopyFlatData[float32](t)
		out := make([]float64, len(f))
		for i, x := range f {
			out[i] = float64(x)
		}
		return out
	}
	panic(fmt.Sprintf("unexpected dtype %s", t.DType()))
}

// within is the golden tolerance: max(1e-5 relative, 1e-7 absolute).
func within(got, want float64) bool {
	return math.Abs(got-want) <= math.Max(1e-5*math.Abs(want), 1e-7)
}

// lossAndGrad evaluates GRPOLoss on one case and d loss / d logp by autodiff.
func lossAndGrad(t testing.TB, b backends.Backend, dtype dtypes.DType, c lossCase) (pg, kl, loss float64, grad []float64) {
	t.Helper()
	cfg := LossConfig{ClipLow: c.ClipEps, ClipHigh: c.ClipEps, DualClip: c.DualClipC, KLCoef: c.KLCoef}
	exec, err := graph.NewExec(b, func(in []*graph.Node) []*graph.Node {
		out := GRPOLoss(LossInputs{
			LogProbs: in[0], OldLogProbs: in[1], RefLogProbs: in[2], Mask: in[3],
			Advantages: in[4], Omega: in[5],
		}, cfg)
		return []*graph.Node{out.PG, out.KL, out.Loss, graph.Gradient(out.Loss, in[0])[0]}
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := exec.Exec(matrix(dtype, c.LogP), matrix(dtype, c.OldLogP), matrix(dtype, c.RefLogP),
		matrix(dtype, c.ResponseMask), vector(dtype, c.Advantages), vector(dtype, c.Omega))
	if err != nil {
		t.Fatal(err)
	}
	return flat64(res[0])[0], flat64(res[1])[0], flat64(res[2])[0], flat64(res[3])
}

// TestGRPOLossGolden checks pg_loss, kl, loss and d loss / d logp against
// the PyTorch float64 reference, in float32 (the training dtype) and float64.
func TestGRPOLossGolden(t *testing.T) {
	cases := loadLossCases(t)
	b := backendtest.Shared(t)
	for _, dtype := range []dtypes.DType{dtypes.Float32, dtypes.Float64} {
		worst, worstGrad := 0.0, 0.0
		for i, c := range cases {
			pg, kl, loss, grad := lossAndGrad(t, b, dtype, c)
			for _, v := range []struct {
				name      string
				got, want float64
			}{{"pg_loss", pg, c.Expected.PGLoss}, {"kl", kl, c.Expected.KL}, {"loss", loss, c.Expected.Loss}} {
				if !within(v.got, v.want) {
					t.Errorf("%s case %d: %s = %.10g, want %.10g", dtype, i, v.name, v.got, v.want)
				}
				worst = math.Max(worst, math.Abs(v.got-v.want)/math.Abs(v.want))
			}
			T := len(c.LogP[0])
			for j, g := range grad {
				want := c.Expected.GradLogP[j/T][j%T]
				worstGrad = math.Max(worstGrad, math.Abs(g-want)/math.Max(math.Abs(want), 1e-2))
				if !within(g, want) {
					t.Errorf("%s case %d: grad[%d][%d] = %.10g, want %.10g", dtype, i, j/T, j%T, g, want)
				}
				if c.ResponseMask[j/T][j%T] == 0 && g != 0 {
					t.Errorf("%s case %d: masked token [%d][%d] has gradient %g", dtype, i, j/T, j%T, g)
				}
			}
		}
		t.Logf("%s: %d cases, worst relative error of pg/kl/loss %.2e, of grads (relative to max(|g|, 1e-2)) %.2e",
			dtype, len(cases), worst, worstGrad)
	}
}

// TestGroupAdvantagesGolden checks the host and graph advantages against
// the reference's (computed there in float32).
func TestGroupAdvantagesGolden(t *testing.T) {
	b := backendtest.Shared(t)
	for i, c := range loadLossCases(t) {
		r := make([]float32, len(c.Rewards))
		for j, x := range c.Rewards {
			r[j] = float32(x)
		}
		host, err := GroupAdvantages(r, c.GroupSize)
		if err != nil {
			t.Fatal(err)
		}
		gs := c.GroupSize
		res, err := graph.ExecOnce(b, func(x *graph.Node) *graph.Node { return GroupAdvantagesGraph(x, gs) },
			tensors.FromFlatDataAndDimensions(r, len(r)))
		if err != nil {
			t.Fatal(err)
		}
		inGraph := tensors.MustCopyFlatData[float32](res)
		for j, want := range c.Advantages {
			if math.Abs(float64(host[j])-want) > 1e-6 || math.Abs(float64(inGraph[j])-want) > 1e-6 {
				t.Errorf("case %d: A[%d] host %.8g graph %.8g, want %.8g", i, j, host[j], inGraph[j], want)
			}
		}
	}
}

// TestClippedPolicyLossBranches checks every branch of the clipped
// surrogate on single tokens, value and gradient, against hand computation.
func TestClippedPolicyLossBranches(t *testing.T) {
	cases := []struct {
		name              string
		logRatio, a, w    float64
		pg, grad          float64
		clipped, lowerHit bool
	}{
		{"A>0 ratio above 1+ε: clipped", math.Log(1.5), 1, 1, -1.2, 0, true, false},
		{"A>0 ratio below 1−ε: unclipped", math.Log(0.5), 1, 1, -0.5, -0.5, false, false},
		{"A<0 ratio 1.5: unclipped, under −cA", math.Log(1.5), -1, 1, 1.5, 1.5, false, false},
		{"A<0 ratio 5: dual clip −cA", math.Log(5), -1, 1, 3, 0, false, true},
		{"A<0 ratio 0.5: clipped at 1−ε", math.Log(0.5), -1, 1, 0.8, 0, true, false},
		{"ω = η halves the dual-clipped loss", math.Log(5), -1, 0.5, 1.5, 0, false, true},
		{"ω = η halves the gradient", math.Log(0.5), 2, 0.5, -0.5, -0.5, false, false},
		{"log-ratio 30 clamped to 20", 30, 1, 1, -1.2, 0, true, false},
		{"log-ratio −30 clamped to −20, A<0", -30, -1, 1, 0.8, 0, true, false},
		{"inside the trust region", math.Log(1.1), 0.7, 1, -0.77, -0.77, false, false},
		{"A = 0", math.Log(2), 0, 1, 0, 0, false, false},
	}
	n := len(cases)
	logp, old, adv, omega := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, c := range cases {
		logp[i], old[i], adv[i], omega[i] = c.logRatio-1, -1, c.a, c.w
	}
	cfg := DefaultLossConfig()
	exec, err := graph.NewExec(backendtest.Shared(t), func(in []*graph.Node) []*graph.Node {
		p := clippedPolicy(ImportanceRatio(in[0], in[1]), in[2], in[3], cfg)
		grad := graph.Gradient(graph.ReduceAllSum(p.loss), in[0])[0]
		return []*graph.Node{p.loss, grad, graph.ConvertDType(p.clipped, dtypes.Float64), graph.ConvertDType(p.lowerHit, dtypes.Float64)}
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := exec.Exec(vector(dtypes.Float64, logp, n, 1), vector(dtypes.Float64, old, n, 1),
		vector(dtypes.Float64, adv), vector(dtypes.Float64, omega))
	if err != nil {
		t.Fatal(err)
	}
	pg, grad, clipped, lower := flat64(res[0]), flat64(res[1]), flat64(res[2]), flat64(res[3])
	for i, c := range cases {
		if math.Abs(pg[i]-c.pg) > 1e-12 || math.Abs(grad[i]-c.grad) > 1e-12 ||
			(clipped[i] == 1) != c.clipped || (lower[i] == 1) != c.lowerHit {
			t.Errorf("%s: pg %g grad %g clipped %v lower %v; want %g %g %v %v",
				c.name, pg[i], grad[i], clipped[i] == 1, lower[i] == 1, c.pg, c.grad, c.clipped, c.lowerHit)
		}
	}
}

func TestLowVarKL(t *testing.T) {
	// d = ref − logp; k3 = clamp(e^d − d − 1, −10, 10) with d clamped to ±20.
	ds := []float64{0, 1, -3, 2.5, 3, 30, -30}
	want := []float64{0, math.E - 2, math.Exp(-3) + 2, math.Exp(2.5) - 3.5, 10, 10, 10}
	wantGrad := []float64{0, -(math.E - 1), -(math.Exp(-3) - 1), -(math.Exp(2.5) - 1), 0, 0, 0}
	logp := make([]float64, len(ds))
	ref := make([]float64, len(ds))
	for i, d := range ds {
		logp[i], ref[i] = -2, d-2
	}
	exec, err := graph.NewExec(backendtest.Shared(t), func(lp, rf *graph.Node) (*graph.Node, *graph.Node) {
		k3 := LowVarKL(lp, rf)
		return k3, graph.Gradient(graph.ReduceAllSum(k3), lp)[0]
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := exec.Exec(logp, ref)
	if err != nil {
		t.Fatal(err)
	}
	got, grad := flat64(res[0]), flat64(res[1])
	for i := range ds {
		if math.Abs(got[i]-want[i]) > 1e-12*math.Max(1, want[i]) || math.Abs(grad[i]-wantGrad[i]) > 1e-12 {
			t.Errorf("d = %g: k3 %.15g grad %.15g, want %.15g %.15g", ds[i], got[i], grad[i], want[i], wantGrad[i])
		}
	}
}

// TestGRPOLossMaskingAndOptions: garbage under the mask never leaks into
// the loss or the gradient; bool masks, nil ω, empty masks, the entropy
// bonus and β = 0 behave as documented.
func TestGRPOLossMaskingAndOptions(t *testing.T) {
	b := backendtest.Shared(t)
	nan, inf := math.NaN(), math.Inf(-1)
	logp := []float64{-1, -0.5, inf, -2, nan, -0.1}
	old := []float64{-1.2, -0.4, nan, -2.1, -1, -0.2}
	ref := []float64{-1.1, -0.6, inf, -1.9, nan, -0.3}
	maskF := []float64{1, 1, 0, 1, 0, 1}
	adv := []float64{0.8, -1.1}
	type result struct{ loss, pg, kl, ent float64 }
	run := func(cfg LossConfig, mask *tensors.Tensor, withOmega, withEntropy bool) (result, []float64) {
		exec, err := graph.NewExec(b, func(in []*graph.Node) []*graph.Node {
			li := LossInputs{LogProbs: in[0], OldLogProbs: in[1], RefLogProbs: in[2], Mask: in[3], Advantages: in[4]}
			if withOmega {
				li.Omega = graph.OnesLike(in[4])
			}
			if withEntropy {
				logits := graph.Zeros(in[0].Graph(), shapesOf(in[0], 4)) // uniform over 4 tokens
				li.Entropy = TokenEntropy(logits)
			}
			out := GRPOLoss(li, cfg)
			return []*graph.Node{out.Loss, out.PG, out.KL, out.Entropy, graph.Gradient(out.Loss, in[0])[0]}
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := exec.Exec(vector(dtypes.Float64, logp, 2, 3), vector(dtypes.Float64, old, 2, 3),
			vector(dtypes.Float64, ref, 2, 3), mask, vector(dtypes.Float64, adv))
		if err != nil {
			t.Fatal(err)
		}
		return result{flat64(res[0])[0], flat64(res[1])[0], flat64(res[2])[0], flat64(res[3])[0]}, flat64(res[4])
	}
	floatMask := vector(dtypes.Float64, maskF, 2, 3)
	boolMask := tensors.FromValue([][]bool{{true, true, false}, {true, false, true}})
	base, grad := run(DefaultLossConfig(), floatMask, false, false)
	for i, v := range grad {
		if math.IsNaN(v) || math.IsInf(v, 0) || (maskF[i] == 0 && v != 0) {
			t.Errorf("grad[%d] = %g (mask %g)", i, v, maskF[i])
		}
	}
	if math.IsNaN(base.loss) || math.Abs(base.loss-(base.pg+0.001*base.kl)) > 1e-15 || base.ent != 0 {
		t.Errorf("loss %+v is not pg + β·kl", base)
	}
	if r, _ := run(DefaultLossConfig(), boolMask, true, false); r != base {
		t.Errorf("bool mask and ω = 1: %+v, want %+v", r, base)
	}
	noKL := DefaultLossConfig()
	noKL.KLCoef = 0
	if r, _ := run(noKL, floatMask, false, false); r.loss != base.pg || r.kl != 0 {
		t.Errorf("β = 0: %+v", r)
	}
	ent := DefaultLossConfig()
	ent.EntropyCoef = 0.01
	r, _ := run(ent, floatMask, false, true)
	if math.Abs(r.ent-math.Log(4)) > 1e-12 || math.Abs(r.loss-(base.loss-0.01*math.Log(4))) > 1e-12 {
		t.Errorf("entropy bonus: %+v, want entropy log 4 and loss %g", r, base.loss-0.01*math.Log(4))
	}
	empty, _ := run(DefaultLossConfig(), vector(dtypes.Float64, make([]float64, 6), 2, 3), false, false)
	if empty != (result{}) {
		t.Errorf("empty mask: %+v, want zeros", empty)
	}
}

func shapesOf(x *graph.Node, vocab int) shapes.Shape {
	return shapes.Make(x.DType(), append(append([]int(nil), x.Shape().Dimensions...), vocab)...)
}

func TestGroupAdvantagesEdgeCases(t *testing.T) {
	cases := []struct {
		name    string
		rewards []float32
		g       int
		want    []float32
	}{
		{"groups of one get 0", []float32{1, 0.2, 0}, 1, []float32{0, 0, 0}},
		{"equal rewards get 0", []float32{0.2, 0.2, 0.2, 1, 0, 1}, 3, []float32{0, 0, 0, 0.57735, -1.1547, 0.57735}},
		{"two of a group", []float32{1, 0}, 2, []float32{0.7071063, -0.7071063}},
	}
	for _, c := range cases {
		got, err := GroupAdvantages(c.rewards, c.g)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i := range got {
			if math.Abs(float64(got[i]-c.want[i])) > 1e-5 {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
	// Groups by id, shuffled, equal the contiguous layout.
	byID, err := GroupAdvantagesByID([]float32{1, 0, 0.2, 0.8, 0.2, 1}, []int{7, 3, 7, 3, 7, 9})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := GroupAdvantages([]float32{1, 0.2, 0.2}, 3)
	c, _ := GroupAdvantages([]float32{0, 0.8}, 2)
	want := []float32{a[0], c[0], a[1], c[1], a[2], 0}
	for i := range want {
		if byID[i] != want[i] {
			t.Fatalf("by id %v, want %v", byID, want)
		}
	}
	for _, bad := range []struct {
		r []float32
		g int
	}{{[]float32{1, 2, 3}, 2}, {[]float32{1}, 0}, {[]float32{float32(math.NaN()), 1}, 2}} {
		if _, err := GroupAdvantages(bad.r, bad.g); err == nil {
			t.Errorf("GroupAdvantages(%v, %d) accepted", bad.r, bad.g)
		}
	}
	if _, err := GroupAdvantagesByID([]float32{1, 2}, []int{1}); err == nil {
		t.Error("length mismatch accepted")
	}
}

// BenchmarkGRPOLossGrad measures the objective and its gradient w.r.t.
// logp on a mini-batch of 40 trajectories × 1024 tokens.
func BenchmarkGRPOLossGrad(b *testing.B) {
	const B, T = 40, 1024
	be := backendtest.Shared(b)
	exec, err := graph.NewExec(be, func(in []*graph.Node) (*graph.Node, *graph.Node) {
		out := GRPOLoss(LossInputs{LogProbs: in[0], OldLogProbs: in[1], RefLogProbs: in[2], Mask: in[3], Advantages: in[4], Omega: in[5]}, DefaultLossConfig())
		return out.Loss, graph.Gradient(out.Loss, in[0])[0]
	})
	if err != nil {
		b.Fatal(err)
	}
	mk := func(f func(i int) float64, dims ...int) *tensors.Tensor {
		n := 1
		for _, d := range dims {
			n *= d
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = f(i)
		}
		return vector(dtypes.Float32, v, dims...)
	}
	args := []any{
		mk(func(i int) float64 { return -float64(i%7) / 3 }, B, T),
		mk(func(i int) float64 { return -float64(i%5) / 3 }, B, T),
		mk(func(i int) float64 { return -float64(i%3) / 3 }, B, T),
		mk(func(i int) float64 { return float64((i / 17) % 2) }, B, T),
		mk(func(i int) float64 { return float64(i%5) - 2 }, B),
		mk(func(i int) float64 { return 1 - 0.5*float64(i%2) }, B),
	}
	b.SetBytes(B * T * 4 * 4)
	for b.Loop() {
		if _, err := exec.Exec(args...); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTokenCountAccumulation: splitting a golden mini-batch into two
// micro-batches that divide by the mini-batch's token count gives losses
// and gradients that add up to the whole batch's.
func TestTokenCountAccumulation(t *testing.T) {
	b := backendtest.Shared(t)
	for ci, c := range loadLossCases(t)[:2] {
		total := 0.0
		for _, row := range c.ResponseMask {
			for _, m := range row {
				total += m
			}
		}
		cfg := LossConfig{ClipLow: c.ClipEps, ClipHigh: c.ClipEps, DualClip: c.DualClipC, KLCoef: c.KLCoef}
		exec, err := graph.NewExec(b, func(in []*graph.Node) []*graph.Node {
			out := GRPOLoss(LossInputs{LogProbs: in[0], OldLogProbs: in[1], RefLogProbs: in[2], Mask: in[3],
				Advantages: in[4], Omega: in[5], TokenCount: in[6]}, cfg)
			return []*graph.Node{out.Loss, graph.Gradient(out.Loss, in[0])[0]}
		})
		if err != nil {
			t.Fatal(err)
		}
		half := len(c.LogP) / 2
		loss := 0.0
		var grad []float64
		for _, r := range [][2]int{{0, half}, {half, len(c.LogP)}} {
			lo, hi := r[0], r[1]
			res, err := exec.Exec(matrix(dtypes.Float64, c.LogP[lo:hi]), matrix(dtypes.Float64, c.OldLogP[lo:hi]),
				matrix(dtypes.Float64, c.RefLogP[lo:hi]), matrix(dtypes.Float64, c.ResponseMask[lo:hi]),
				vector(dtypes.Float64, c.Advantages[lo:hi]), vector(dtypes.Float64, c.Omega[lo:hi]), total)
			if err != nil {
				t.Fatal(err)
			}
			loss += flat64(res[0])[0]
			grad = append(grad, flat64(res[1])...)
		}
		if !within(loss, c.Expected.Loss) {
			t.Errorf("case %d: accumulated loss %.12g, want %.12g", ci, loss, c.Expected.Loss)
		}
		T := len(c.LogP[0])
		for j, g := range grad {
			if want := c.Expected.GradLogP[j/T][j%T]; !within(g, want) {
				t.Errorf("case %d: accumulated grad[%d] %g, want %g", ci, j, g, want)
			}
		}
	}
}
