package qwen

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/model/vjp"
)

// ScoreOptions tune TokenLogProbs.
type ScoreOptions struct {
	// Temperature divides the logits before the softmax (verl scores the
	// rollout policy at its sampling temperature); 0 means 1.
	Temperature float64
	// Entropy also returns the per-token entropy of the predicted
	// distribution.
	Entropy bool
}

// TokenLogProbs builds the teacher-forced per-token log-probabilities of
// ids [B, T] under the model whose variables live under ctx's scope:
//
//	logp[b, t]    = log softmax(z[b, t−1] / τ)[ids[b, t]]        for t ≥ 1, 0 at t = 0
//	entropy[b, t] = −Σ_v p_v log p_v of that same distribution   (nil unless opts.Entropy)
//
// where z[b, t−1] are the logits after the prefix ids[b, ≤ t−1] and τ the
// temperature. mask [B, T] is the attention mask (1 for real tokens, left or
// right padding). When respMask [B, T] is not nil both outputs are
// multiplied by it (the response tokens of GRPO; prompt and retrieved tokens
// 0). Outputs are float32 [B, T] and differentiable with respect to the
// model variables: the trainer builds this into its loss graph.
//
// Implementation: the decoder runs on ids[:, :T−1] only (the last
// position's logits predict nothing, and causal attention makes the
// first T−1 hidden states independent of it: 1/T less work than the full
// pass); the hidden state at t−1 is dotted with the lm_head row of
// ids[b, t] (no [B, T, V] one-hot), minus logsumexp over the vocabulary;
// the shift from t−1 to t is a [T−1, T] 0/1 contraction rather than a
// Concatenate, whose gradient needs a Slice of the gradient, and a Slice's
// gradient needs Pad, which the pure-Go backend lacks. A single token
// (T = 1) predicts nothing: its logp is 0.
func TokenLogProbs(ctx *context.Context, c *Config, ids, mask, respMask *graph.Node, opts ScoreOptions) (logp, entropy *graph.Node) {
	g := ids.Graph()
	w := bindWeights(ctx, g, c)
	ids = graph.ConvertDType(ids, dtypes.Int32)
	b, t := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
	tau := opts.Temperature
	if tau == 0 {
		tau = 1
	}
	// n positions s = 0…n−1 predict next[b, s] = ids[b, s+1]. At T = 1
	// the one position runs, predicting a 0 that the shift drops.
	n, in, inMask := t-1, ids, mask
	var next *graph.Node
	if n == 0 {
		n, next = 1, graph.Zeros(g, shapes.Make(dtypes.Int32, b, 1))
	} else {
		in, inMask = graph.SliceAxis(ids, 1, graph.AxisRange(0, n)), graph.SliceAxis(mask, 1, graph.AxisRange(0, n))
		next = graph.SliceAxis(ids, 1, graph.AxisRangeToEnd(1))
	}
	hidden := hiddenStates(c, w, in, inMask)                                // [B, n, D]
	head := w.lmHead()                                                      // [V, D]
	logits := graph.ConvertDType(linear(hidden, head, nil), dtypes.Float32) // [B, n, V]
	if tau != 1 {
		logits = graph.DivScalar(logits, tau)
	}
	lse := vjp.LogSumExp(logits)                                                            // [B, n]
	rows := graph.Gather(head, graph.ExpandAxes(next, -1))                                  // [B, n, D]
	target := graph.ConvertDType(graph.Einsum("btd,btd->bt", hidden, rows), dtypes.Float32) // [B, n]
	if tau != 1 {
		target = graph.DivScalar(target, tau)
	}
	shift := shiftMatrix(g, n, t) // [n, T]: moves s to s+1
	logp = graph.Einsum("bs,st->bt", graph.Sub(target, lse), shift)
	if opts.Entropy {
		mx := graph.StopGradient(graph.ReduceAndKeep(logits, graph.ReduceMax, -1)) // [B, n, 1]
		shifted := graph.Sub(logits, mx)
		sumExp := graph.ReduceSum(graph.Exp(shifted), -1)                    // [B, n]
		probs := graph.Div(graph.Exp(shifted), graph.ExpandAxes(sumExp, -1)) // [B, n, V]
		meanLogit := graph.ReduceSum(graph.Mul(probs, logits), -1)           // [B, n]
		entropy = graph.Einsum("bs,st->bt", graph.Sub(lse, meanLogit), shift)
	}
	if respMask != nil {
		m := graph.ConvertDType(respMask, dtypes.Float32)
		logp = graph.Mul(logp, m)
		if entropy != nil {
			entropy = graph.Mul(entropy, m)
		}
	}
	return logp, entropy
}

// shiftMatrix returns M [n, T] with M[s, t] = 1 when t = s + 1.
func shiftMatrix(g *graph.Graph, n, t int) *graph.Node {
	si := graph.Iota(g, shapes.Make(dtypes.Int32, n, t), 0)
	ti := graph.Iota(g, shapes.Make(dtypes.Int32, n, t), 1)
	return graph.ConvertDType(graph.Equal(graph.AddScalar(si, 1), ti), dtypes.Float32)
}

// Score runs TokenLogProbs on the host: ids, mask and respMask (nil: no
// response mask) are [batch, seqLen] row-major; it returns logp and, when
// opts.Entropy, the entropy, both [batch, seqLen] row-major.
func (m *Model) Score(ids, mask, respMask []int32, batch, seqLen int, opts ScoreOptions) (logp, entropy []float32, err error) {
	n := batch * seqLen
	if batch <= 0 || seqLen <= 0 || len(ids) != n || len(mask) != n || (respMask != nil && len(respMask) != n) {
		return nil, nil, fmt.Errorf("score: want %d×%d ids and masks, got %d, %d and %d", batch, seqLen, len(ids), len(mask), len(respMask))
	}
	if err := m.checkIDs(ids); err != nil {
		return nil, nil, fmt.Errorf("score: %w", err)
	}
	if respMask == nil {
		respMask = make([]int32, n)
		for i := range respMask {
			respMask[i] = 1
		}
	}
	exec, err := m.scoreExec(opts)
	if err != nil {
		return nil, nil, err
	}
	out, err := exec.Exec(
		tensors.FromFlatDataAndDimensions(ids, batch, seqLen),
		tensors.FromFlatDataAndDimensions(mask, batch, seqLen),
		tensors.FromFlatDataAndDimensions(respMask, batch, seqLen))
	if err != nil {
		return nil, nil, fmt.Errorf("score: %w", err)
	}
	defer func() {
		for _, t := range out {
			t.FinalizeAll()
		}
	}()
	if logp, err = tensors.CopyFlatData[float32](out[0]); err != nil {
		return nil, nil, err
	}
	if len(out) > 1 {
		if entropy, err = tensors.CopyFlatData[float32](out[1]); err != nil {
			return nil, nil, err
		}
	}
	return logp, entropy, nil
}

// scoreExec returns the (cached) executor of TokenLogProbs for opts.
func (m *Model) scoreExec(opts ScoreOptions) (*context.Exec, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.scoreExecs[opts]; ok {
		return e, nil
	}
	c := m.Config
	e, err := context.NewExec(m.backend, m.ctx, func(ctx *context.Context, ids, mask, resp *graph.Node) []*graph.Node {
		lp, ent := TokenLogProbs(ctx, c, ids, mask, resp, opts)
		if ent == nil {
			return []*graph.Node{lp}
		}
		return []*graph.Node{lp, ent}
	})
	if err != nil {
		return nil, err
	}
	if m.scoreExecs == nil {
		m.scoreExecs = map[ScoreOptions]*context.Exec{}
	}
	m.scoreExecs[opts] = e
	return e, nil
}
