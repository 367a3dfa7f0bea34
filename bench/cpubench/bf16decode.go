package cpubench

import (
	"github.com/gomlx/gomlx/backends"

	"github.com/cas-engine/cas/model/qwen"
)

// NewBF16WeightModel returns a random model of cfg (the weights of seed,
// rounded to bfloat16) stored in bfloat16 and computing in float32: every
// graph casts each weight to float32 as it reads it, which gocpu folds
// into the products (they read the bfloat16 weights in place), so batch-1
// decoding streams half the bytes of the float32 model. Activations, the
// KV cache and the logits stay float32; the only rounding is the
// weights'. Half the bytes is faster where the float32 decode is
// bandwidth-bound, which with tensor's GEMV kernels it is: gocpu's
// DotGeneral hands them the bfloat16 weights in place and they widen each
// one in a register. On the 2-core AVX2 VM (2026-12-02, 19:55 UTC, load
// 4.4–4.7 from other work) the 25M model decoded at 220–228 tok/s with
// bf16 weights and 122–131 with float32, 1.28–1.40 times the float32
// streaming bound (cas bench cpu --decode-only).
func NewBF16WeightModel(cfg *qwen.Config, be backends.Backend, seed uint64) (*qwen.Model, error) {
	m, err := qwen.NewRandomWith(cfg, be, seed, qwen.LoadOptions{DType: qwen.PrecisionBF16})
	if err != nil {
		return nil, err
	}
	qwen.SetComputeDType(m.Context(), qwen.PrecisionF32)
	return m, nil
}
