package qwen

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/internal/sharedtest"
)

// TestFusedAttentionMatchesPlain: the golden models' token log-probs and
// the gradients of their sum with respect to every weight, on gocpu (the
// attention as the blocked flash-style kernel, forward and backward, and
// the rotary embedding fused) and
// on the pure-Go backend (the same graph unfused), over the golden
// batch, whose rows are left-padded (padded queries see no key), agree to
// 2e-4 of each tensor's largest entry.
func TestFusedAttentionMatchesPlain(t *testing.T) {
	// Sequential: simplego's parallel scheduler can deadlock when its
	// DotGenerals wait for workers its nodes hold (seen once in 30 runs).
	plain, err := backend.NewWithConfig("go:ops_sequential")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range goldenModels {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Dir(sharedtest.Path(t, "golden", name, "config.json"))
			g := loadGolden(t, name)
			resp := make([]int32, len(g.mask))
			for i := range resp {
				if i%g.seqLen >= g.seqLen/3 {
					resp[i] = g.mask[i]
				}
			}
			var outs [2][][]float32
			for i, be := range []backends.Backend{backendtest.Shared(t), plain} {
				m, err := Load(dir, be, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				c := m.Config
				exec, err := context.NewExec(m.backend, m.ctx, func(ctx *context.Context, ids, mask, rm *graph.Node) []*graph.Node {
					lp, _ := TokenLogProbs(ctx, c, ids, mask, rm, ScoreOptions{})
					w := graph.Cos(graph.IotaFull(lp.Graph(), lp.Shape())) // a varying adjoint
					loss := graph.ReduceAllSum(graph.Mul(lp, w))
					return append([]*graph.Node{lp}, ctx.BuildTrainableVariablesGradientsGraph(loss)...)
				})
				if err != nil {
					t.Fatal(err)
				}
				res, err := exec.Exec(tensors.FromFlatDataAndDimensions(g.ids, g.batch, g.seqLen),
					tensors.FromFlatDataAndDimensions(g.mask, g.batch, g.seqLen),
					tensors.FromFlatDataAndDimensions(resp, g.batch, g.seqLen))
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range res {
					outs[i] = append(outs[i], tensors.MustCopyFlatData[float32](r))
				}
			}
			worst := 0.0
			for o := range outs[1] {
				scale := 1e-30
				for _, v := range outs[1][o] {
					scale = math.Max(scale, math.Abs(float64(v)))
				}
				for i, want := range outs[1][o] {
					d := math.Abs(float64(outs[0][o][i]-want)) / scale
					worst = math.Max(worst, d)
					if d > 2e-4 || math.IsNaN(float64(outs[0][o][i])) {
						t.Fatalf("output %d (0: log-probs, then gradients) [%d]: gocpu %g, pure Go %g (largest %g)", o, i, outs[0][o][i], want, scale)
					}
				}
			}
			t.Logf("%d tensors, largest difference %.2g of the tensor's largest entry", len(outs[1]), worst)
		})
	}
}
