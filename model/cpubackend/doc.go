// Package cpubackend is a GoMLX backend for CPUs, registered as "gocpu": the
// pure-Go backend (GoMLX's simplego, "go") with its matrix products replaced
// by the blocked, multi-core kernels of package tensor, and with the ops the
// pure-Go backend lacks (DynamicSlice, DynamicUpdateSlice, Pad).
//
// GoMLX v0.26's simplego has no hook for replacing an op, so this backend
// wraps it at the API level. Its Builder records every op; ops it executes
// itself (float32/BF16 DotGeneral and Dot, DynamicSlice, DynamicUpdateSlice,
// Pad) become "custom" nodes, every other op is replayed onto simplego
// builders. At Compile the graph is cut into stages: each stage is one
// simplego executable (a segment holding every delegated op that can run
// before the stage's custom ops), followed by those custom ops. Stages are
// assigned as early as dependencies allow, then delegated ops are moved as
// late as their consumers allow, so that independent products (the q, k, v
// projections of a layer, the gate and up projections of its MLP) share a
// stage and values are not held longer than needed. Buffers are simplego's:
// the DataInterface is simplego's own, so tensors move between the two
// backends' executables without copies.
//
// Results equal the pure-Go backend's to float32 rounding: the kernels sum
// in a different order (see tensor.Gemm), nothing else changes. Products
// with zero-sized axes, which simplego rejects, return zeros or empty
// tensors.
//
// Configuration (GOMLX_BACKEND=gocpu:<config>): comma-separated options;
// "workers=N" bounds the goroutines of the matrix kernels (default
// GOMAXPROCS), "nofast" routes nothing (every op to simplego, for
// comparisons); any other option is passed to simplego (e.g.
// "ops_sequential").
//
// The package sits in model/, below the model code that uses it through
// model/backend; it imports only tensor and GoMLX.
package cpubackend

//go:generate go run ./internal/genops ops_gen.go
