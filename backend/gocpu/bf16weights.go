package gocpu

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// bf16Source returns the bfloat16 operand of v when v is
// ConvertDType(bfloat16 → float32) of it: DotGeneral then reads the
// bfloat16 values in place (converted exactly as the GEMM packs them, the
// products accumulating in float32) instead of reading a float32 copy. The
// result is bit-identical, and batch-1 decoding of a model stored in
// bfloat16 and computing in float32 (qwen.LoadOptions.DType bf16 with
// SetComputeDType f32: its graphs cast every weight as they read it)
// streams half the bytes per token. The cast, when nothing else reads it,
// is dropped at Compile.
func bf16Source(v *value) (*value, bool) {
	n := v.node
	if n.kind != kindDelegate || n.opType != backends.OpTypeConvertDType || len(n.inputs) != 1 || len(n.outs) != 1 {
		return nil, false
	}
	src := n.inputs[0]
	if src.shape.DType != dtypes.BFloat16 || v.shape.DType != dtypes.Float32 {
		return nil, false
	}
	return src, true
}

// Gather implements backends.Builder. A gather of whole rows along axis 0
// (an embedding lookup) runs here, any dtype (gather.go). A gather from ConvertDType(bfloat16
// → float32) of a table (the embedding of a bfloat16-stored model read by
// a float32 graph) gathers the bfloat16 rows and converts only them: the
// same values, without converting the whole table on every call.
func (b *Builder) Gather(operand, startIndices backends.Op, indexVectorAxis int, offsetOutputAxes, collapsedSliceAxes, startIndexMap, sliceSizes []int, indicesAreSorted bool) (backends.Op, error) {
	offsetOutputAxes = slices.Clone(offsetOutputAxes)
	collapsedSliceAxes = slices.Clone(collapsedSliceAxes)
	startIndexMap = slices.Clone(startIndexMap)
	sliceSizes = slices.Clone(sliceSizes)
	gather := func(x backends.Op) (backends.Op, error) {
		if !b.backend.plain {
			vs, err := b.checkOps("Gather", []backends.Op{x, startIndices})
			if err != nil {
				return nil, err
			}
			if g, ok := newRowGather(vs[0].shape, vs[1].shape, indexVectorAxis, offsetOutputAxes, collapsedSliceAxes, startIndexMap, sliceSizes); ok {
				so, err := b.shadow.Gather(vs[0].shadow, vs[1].shadow, indexVectorAxis, slices.Clone(offsetOutputAxes), slices.Clone(collapsedSliceAxes),
					slices.Clone(startIndexMap), slices.Clone(sliceSizes), indicesAreSorted)
				if err != nil {
					return nil, err
				}
				if v, ok := b.byShadow[so]; ok {
					return v, nil
				}
				return b.customGather(vs, so, g)
			}
		}
		return b.record1(backends.OpTypeGather, []backends.Op{x, startIndices}, func(sb backends.Builder, in []backends.Op) (backends.Op, error) {
			return sb.Gather(in[0], in[1], indexVectorAxis, slices.Clone(offsetOutputAxes), slices.Clone(collapsedSliceAxes),
				slices.Clone(startIndexMap), slices.Clone(sliceSizes), indicesAreSorted)
		})
	}
	if v, ok := operand.(*value); ok && v.b == b && !b.backend.plain {
		if src, ok := bf16Source(v); ok {
			rows, err := gather(src)
			if err != nil {
				return nil, err
			}
			return b.ConvertDType(rows, dtypes.Float32)
		}
	}
	return gather(operand)
}
