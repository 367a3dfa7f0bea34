// Package gocpu is a GoMLX backend for CPUs, registered as "gocpu": the
// pure-Go backend (GoMLX's simplego, "go") with its hot ops replaced by
// planned, multi-core float32 kernels, and with the ops the pure-Go backend
// lacks (DynamicSlice, DynamicUpdateSlice, Pad).
//
// Ops run here ("custom" ops):
//
//   - DotGeneral and Dot in float32 and BF16 on the blocked GEMM kernels of
//     package tensor (operands read in place through strides), float32 with
//     a bfloat16 operand when that operand is a ConvertDType(bf16 → f32)
//     (the weights of a model stored in bf16 computing in f32, read in
//     place: bf16weights.go; Gather from such a cast table converts only
//     the gathered rows), and products with a tiny right operand (RoPE's
//     2×2 rotation) in one pass without the GEMM (tinydot.go);
//   - ReduceSum of a broadcasting Mul, the form GoMLX v0.26 gives the
//     gradient of DotGeneral, rewritten into a DotGeneral (see ReduceSum):
//     the project's one fix of that gradient;
//   - float32 Add, Sub, Mul, Div (with size-1 broadcasting; AVX2 kernels
//     for Add, Sub and Mul (arith_amd64.s; vek's without AVX2), VDIVPS
//     (AVX-512 or AVX2) for Div), Exp, Logistic, Neg, Sqrt (VSQRTPS),
//     Rsqrt, ReduceSum and ReduceMax over contiguous axes (AVX-512 or AVX2
//     for Exp, Logistic's division and a last-axis ReduceMax; column sums
//     on tensor.ColSum), and Transpose and BroadcastInDim of any dtype;
//   - Gather of whole rows along axis 0 (an embedding lookup, any dtype)
//     and the float32 ScatterSum of whole rows that is its gradient, by
//     rows (gather.go);
//   - DynamicSlice, DynamicUpdateSlice (in place when the operand is not
//     used afterwards) and Pad, of any dtype; Slice with unit strides and
//     Concatenate, of any dtype, when an operand is a custom op's result or
//     the output is large (slice.go);
//   - fused kernels of package tensor, recognised from the op chains GoMLX
//     emits: the last-axis softmax of graph.Softmax and the gradient
//     p ⊙ (g − Σ g⊙p) (fuse_softmax.go), silu(g) ⊙ u and its gradients
//     (fuse_swiglu.go), sums over the last axis of a product of one shape
//     as row dot products and the RMSNorm input gradient
//     r ⊙ (g − y ⊙ c) (fuse_rmsnorm.go), grouped-query causal attention
//     forward and backward as one blocked flash-style kernel each, which
//     never writes the [B, H, T, T] scores (fuse_attention.go,
//     tensor.Attention); the gradients in the forms
//     model/vjp writes them as custom VJPs, each carried by a
//     straight-through term x − StopGradient(x), which this backend
//     drops (so p + (x − x) is p even where x is not finite). Identity,
//     a Transpose by the identity permutation and a Reshape to the same
//     shape return their operand; a Transpose that keeps the last axis,
//     of a Slice run here, is one strided copy from the Slice's operand; a
//     ReduceSum over a Concatenate of one operand with broadcast zeros
//     sums that operand alone (the layouts around the attention kernels;
//     foldZeroPad, transposeSlice);
//   - chains of the float32 elementwise ops above over one shape (with
//     1-element operands and operands broadcast along leading or trailing
//     axes, such as RMSNorm's scale and weight), such as an optimizer's
//     update, fused at Compile
//     into one pass over tiles of 4096 elements that writes only the
//     values read outside the chain (fuse_elementwise.go; bit-identical).
//
// Everything else runs on simplego. GoMLX v0.26's simplego has no hook for
// replacing an op, so this backend wraps it at the API level. Its Builder
// records every op (and applies it at once to a "shadow" simplego builder,
// which validates it and infers its shape exactly as the pure-Go backend
// would). At Compile the graph is cut into stages: each stage is one
// simplego executable (a segment holding the delegated ops that can run
// before the stage's custom ops), followed by those custom ops. Stages are
// assigned as early as dependencies allow, then delegated ops are moved as
// late as their consumers allow, so that independent products (the q, k, v
// projections of a layer) share a stage and values are not held longer
// than needed; ops whose results nothing uses are dropped. Buffers are
// simplego's (its DataInterface is embedded), so tensors move between the
// two backends' executables without copies, and an input that is not used
// afterwards is handed to the op that consumes it (donated to a segment, or
// overwritten by an elementwise op or DynamicUpdateSlice).
//
// Results equal the pure-Go backend's to float32 rounding: sums run in a
// different order and exp is a vectorized polynomial within 2 ulp of
// math.Exp; nothing else changes. Products with zero-sized axes, which
// simplego rejects, return zeros or empty tensors.
//
// Configuration (GOMLX_BACKEND=gocpu:<config>): comma-separated options;
// "workers=N" bounds the goroutines of the kernels (default GOMAXPROCS),
// "nofast" runs every op on simplego (for comparisons), "nofuse" turns
// off the fusion of elementwise chains; "profile" runs each
// delegated op as its own segment and accumulates wall time per op kind
// (Backend.Profile; cas bench cpu --profile prints it), "profile=shapes"
// per op kind and output size; any other option is passed to simplego
// (e.g. "ops_parallel": the segments run their ops one after another by
// default, "ops_sequential", except with "nofast").
//
// The package sits beside tensor, below the model code that uses it through
// package backend (which registers it); it imports only tensor and GoMLX.
package gocpu

//go:generate go run ./internal/genops ops_gen.go
