package qwen

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Precision is the floating-point format of the weights a graph computes
// with, and so of its activations.
//
//   - "f32": float32 throughout (the default).
//   - "bf16": bfloat16 weights and activations (matmuls accumulate in
//     float32 on the backends; RMSNorm statistics, softmax, logits and
//     log-probabilities stay float32, as in Hugging Face's bf16 models).
//
// Storing the weights in a dtype (LoadOptions.DType) and computing in one
// (SetComputeDType) are separate: mixed-precision training keeps float32
// master weights (and so float32 AdamW state) and computes in bfloat16,
// the graph casting each weight once as it reads it; the cast's gradient
// carries the bfloat16 gradient back to the float32 variable.
type Precision string

// The precisions ParsePrecision accepts.
const (
	PrecisionF32  Precision = "f32"
	PrecisionBF16 Precision = "bf16"
)

// ParsePrecision reads "f32"/"float32" or "bf16"/"bfloat16" (any case); ""
// is f32.
func ParsePrecision(s string) (Precision, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "f32", "float32":
		return PrecisionF32, nil
	case "bf16", "bfloat16":
		return PrecisionBF16, nil
	}
	return "", fmt.Errorf("precision %q: want f32 or bf16", s)
}

// DType returns the GoMLX dtype of p.
func (p Precision) DType() dtypes.DType {
	if p == PrecisionBF16 {
		return dtypes.BFloat16
	}
	return dtypes.Float32
}

// computeDTypeParam is the context parameter that holds the compute dtype.
const computeDTypeParam = "qwen_compute_dtype"

// SetComputeDType makes the graphs built from ctx (and its sub-scopes)
// compute in p's dtype, whatever the dtype the variables are stored in.
// It must be set before the first graph is built: compiled graphs keep the
// dtype they were built with.
func SetComputeDType(ctx *context.Context, p Precision) {
	ctx.SetParam(computeDTypeParam, string(p))
}

// computeDType returns the compute dtype set on ctx, or the zero dtype when
// none is (the weights' own dtype is then used).
func computeDType(ctx *context.Context) dtypes.DType {
	p := context.GetParamOr(ctx, computeDTypeParam, "")
	if p == "" {
		return dtypes.InvalidDType
	}
	return Precision(p).DType()
}

// castWeight converts a bound weight to the compute dtype of ctx (none set:
// unchanged).
func castWeight(ctx *context.Context, w *graph.Node) *graph.Node {
	if dt := computeDType(ctx); dt != dtypes.InvalidDType {
		return graph.ConvertDType(w, dt)
	}
	return w
}

// ComputeDType returns the dtype the model's graphs compute in: the one set
// with SetComputeDType on its context, else the dtype its weights are
// stored in. The KV cache of a Session has this dtype.
func (m *Model) ComputeDType() dtypes.DType {
	if dt := computeDType(m.ctx); dt != dtypes.InvalidDType {
		return dt
	}
	return m.weightDType
}

// toBF16 returns a bfloat16 host copy of the float32 tensor t (rounded to
// nearest even) and releases t.
func toBF16(t *tensors.Tensor) *tensors.Tensor {
	out := tensors.FromShape(shapes.Make(dtypes.BFloat16, t.Shape().Dimensions...))
	tensors.MustConstFlatData(t, func(src []float32) {
		tensors.MustMutableFlatData(out, func(dst []bfloat16.BFloat16) {
			for i, v := range src {
				dst[i] = bfloat16.FromFloat32(v)
			}
		})
	})
	t.FinalizeAll()
	return out
}

// toF32 returns a float32 host copy of the bfloat16 tensor t.
func toF32(t *tensors.Tensor) *tensors.Tensor {
	out := tensors.FromShape(shapes.Make(dtypes.Float32, t.Shape().Dimensions...))
	tensors.MustConstFlatData(t, func(src []bfloat16.BFloat16) {
		tensors.MustMutableFlatData(out, func(dst []float32) {
			for i, v := range src {
				dst[i] = v.Float32()
			}
		})
	})
	return out
}

// Close releases the model's compiled graphs and every variable of its
// context (the weights, and whatever else a trainer put there, such as
// optimiser state) on the backend, so that a benchmark can build the next
// model in the memory this one used. The model is unusable afterwards.
func (m *Model) Close() {
	m.mu.Lock()
	for _, e := range m.scoreExecs {
		e.Finalize()
	}
	m.scoreExecs = nil
	m.mu.Unlock()
	for _, e := range []interface{ Finalize() }{m.logitsExec, m.stepExec, m.selectExec} {
		if e != nil {
			e.Finalize()
		}
	}
	m.ctx.Finalize()
}
