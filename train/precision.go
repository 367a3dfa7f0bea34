package train

import (
	"io"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/model/qwen"
)

// Mixed-precision training (model.precision: bf16): the policy keeps
// float32 master weights — so its gradient accumulators and AdamW's two
// moments, which take the variables' dtype, are float32 too — and its
// graphs (rollout, scoring, loss and backward) compute in bfloat16: each
// weight is cast once where the graph reads it, and the cast's gradient
// carries the bfloat16 gradient back to float32 (Micikevicius et al. 2018,
// without loss scaling, which bfloat16's float32 exponent range makes
// unnecessary). The frozen reference model is stored in bfloat16.
//
// Memory per parameter: f32 training 16 B (weights, gradient accumulator,
// two moments) + 4 B reference; mixed 16 B + 2 B reference, and the
// activations (the bulk at long sequences) halve. configs/README.md has
// the arithmetic for 0.5B, 3B and 8B.

// policyLoadOptions returns how the policy is loaded for precision p.
func policyLoadOptions(p qwen.Precision, progress io.Writer) qwen.LoadOptions {
	opts := qwen.LoadOptions{Progress: progress}
	if p == qwen.PrecisionBF16 {
		opts.Context = context.New()
		qwen.SetComputeDType(opts.Context, p)
	}
	return opts
}

// referenceLoadOptions returns how the frozen reference is loaded for
// precision p: in bfloat16 storage under mixed precision.
func referenceLoadOptions(p qwen.Precision, progress io.Writer) qwen.LoadOptions {
	return qwen.LoadOptions{Progress: progress, DType: p}
}

// precision returns the parsed model.precision (Validate has checked it).
func (c *Config) precision() qwen.Precision {
	p, err := qwen.ParsePrecision(c.Model.Precision)
	if err != nil {
		return qwen.PrecisionF32
	}
	return p
}
