package qwen

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// The KV cache is a fixed-size buffer per layer, with S slots shared by all
// rows of a batch:
//
//	keys   [B, k, S, h]  (slot axis 2: scores contract h, the last axis)
//	values [B, k, h, S]  (slot axis 3: the output contracts s, the last axis)
//
// A step writes T new tokens into slots start … start+T−1 and attends over
// all S slots, masked by keyValid [B, S] (which slots hold a real token of
// that row) and causality (slot ≤ start + t). Position ids are explicit, so
// a row may leave slots empty (padding) anywhere: slot and position are
// decoupled. start is a runtime scalar, so one compiled graph serves every
// decode step; the graph depends only on (B, T, S).

// writeSlots returns cache with slots start … start+T−1 along slotAxis
// replaced by upd, which is shaped like cache except that slotAxis has T
// entries. Slots at or beyond S are dropped (for T = 1, start < S is the
// caller's to ensure: Session.reserve grows the cache before each step).
//
// A decode step (T = 1) on a backend with DynamicUpdateSlice (gocpu, which
// updates in place, and XLA) is that op. Otherwise — GoMLX's pure-Go
// backend lacks it, and a prefill chunk's padded width may run past the
// end, where DynamicUpdateSlice would clamp start instead of dropping — for
// T = 1 the new entry is broadcast over the slot axis and selected with
// Where(slot == start), and for T > 1 it is spread onto the slots by a
// one-hot [T, S] contraction (exact: each output sums one product with 1
// and zeros).
func writeSlots(cache, upd, start *graph.Node, slotAxis int) *graph.Node {
	g := cache.Graph()
	dims := cache.Shape().Dimensions
	s := dims[slotAxis]
	t := upd.Shape().Dimensions[slotAxis]
	start = graph.ConvertDType(start, dtypes.Int32)
	if t == 1 && g.Backend().Capabilities().Operations[backends.OpTypeDynamicUpdateSlice] {
		at := make([]*graph.Node, len(dims))
		for i := range at {
			at[i] = graph.ScalarZero(g, dtypes.Int32)
		}
		at[slotAxis] = start
		return graph.DynamicUpdateSlice(cache, upd, at)
	}
	slots := graph.Iota(g, shapes.Make(dtypes.Int32, s), 0)                                     // [S]
	end := graph.AddScalar(start, t)                                                            // start + T
	written := graph.LogicalAnd(graph.GreaterOrEqual(slots, start), graph.LessThan(slots, end)) // [S]
	condDims := make([]int, len(dims))
	for i := range condDims {
		condDims[i] = 1
	}
	condDims[slotAxis] = s
	cond := graph.BroadcastToDims(graph.Reshape(written, condDims...), dims...)
	var spread *graph.Node
	if t == 1 {
		spread = graph.BroadcastToDims(upd, dims...)
	} else {
		ti := graph.Iota(g, shapes.Make(dtypes.Int32, t, s), 0)
		si := graph.Iota(g, shapes.Make(dtypes.Int32, t, s), 1)
		oneHot := graph.ConvertDType(graph.Equal(si, graph.Add(ti, start)), cache.DType()) // [T, S]
		spread = graph.DotGeneral(upd, []int{slotAxis}, nil, oneHot, []int{0}, nil)        // [..., S] (slot last)
		if slotAxis != len(dims)-1 {
			perm := make([]int, 0, len(dims))
			for i := range len(dims) - 1 {
				if i == slotAxis {
					perm = append(perm, len(dims)-1)
				}
				perm = append(perm, i)
			}
			spread = graph.TransposeAllAxes(spread, perm...)
		}
	}
	return graph.Where(cond, spread, cache)
}

// Inputs of stepGraph, in order; the KV caches follow, keys then values for
// each layer.
const (
	stepIDs      = iota // [B, T] int32 token ids (anything valid where padded)
	stepPos             // [B, T] int32 position ids
	stepKeyValid        // [B, S] bool: slot holds a real token after this step's write
	stepStart           // scalar int32: first slot written
	stepLast            // [B] int32: index t whose logits to return, per row
	stepCaches
)

// stepGraph runs T tokens per row through the model with the KV cache and
// returns the logits [B, V] at position last[b] of each row followed by the
// updated caches.
func stepGraph(ctx *context.Context, c *Config, in []*graph.Node) []*graph.Node {
	if len(in) != stepCaches+2*c.NumHiddenLayers {
		panic(fmt.Errorf("qwen: step graph got %d inputs, want %d", len(in), stepCaches+2*c.NumHiddenLayers))
	}
	ids, pos, keyValid, start, last := in[stepIDs], in[stepPos], in[stepKeyValid], in[stepStart], in[stepLast]
	caches := in[stepCaches:]
	g := ids.Graph()
	w := bindWeights(ctx, g, c)
	b, t := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
	s := keyValid.Shape().Dimensions[1]

	ti := graph.Iota(g, shapes.Make(dtypes.Int32, t, s), 0)
	si := graph.Iota(g, shapes.Make(dtypes.Int32, t, s), 1)
	causal := graph.LessOrEqual(si, graph.Add(ti, start)) // [T, S]
	allowed := graph.LogicalAnd(
		graph.BroadcastToDims(graph.ExpandAxes(causal, 0), b, t, s),
		graph.BroadcastToDims(graph.ExpandAxes(keyValid, 1), b, t, s)) // [B, T, S]
	bias := maskBias(allowed, w.Embed.DType())

	out := make([]*graph.Node, 1+len(caches))
	x := decoder(c, w, ids, pos, func(l int, q, k, v *graph.Node) *graph.Node {
		keys := writeSlots(caches[2*l], graph.TransposeAllAxes(k, 0, 2, 1, 3), start, 2)     // [B, k, S, h]
		values := writeSlots(caches[2*l+1], graph.TransposeAllAxes(v, 0, 2, 3, 1), start, 3) // [B, k, h, S]
		out[1+2*l], out[2+2*l] = keys, values
		return attend(c, q, keys, values, bias)
	}) // [B, T, D]
	picked := graph.Einsum("btd,bt->bd", x, graph.OneHot(last, t, x.DType()))    // [B, D]
	out[0] = graph.ConvertDType(linear(picked, w.lmHead(), nil), dtypes.Float32) // [B, V]
	return out
}

// growGraph returns a function that copies caches into buffers of newSlots
// slots (the new slots zero).
func growGraph(newSlots int) func([]*graph.Node) []*graph.Node {
	return func(in []*graph.Node) []*graph.Node {
		out := make([]*graph.Node, len(in))
		for i, x := range in {
			axis := 2 + i%2 // keys [B, k, S, h], values [B, k, h, S]
			dims := append([]int(nil), x.Shape().Dimensions...)
			dims[axis] = newSlots - dims[axis]
			out[i] = graph.Concatenate([]*graph.Node{x, graph.Zeros(x.Graph(), shapes.Make(x.DType(), dims...))}, axis)
		}
		return out
	}
}

// selectRowsGraph keeps the batch rows listed in rows [B'] of every cache.
func selectRowsGraph(in []*graph.Node) []*graph.Node {
	rows := graph.ExpandAxes(in[0], -1) // [B', 1]
	out := make([]*graph.Node, len(in)-1)
	for i, x := range in[1:] {
		out[i] = graph.Gather(x, rows)
	}
	return out
}
