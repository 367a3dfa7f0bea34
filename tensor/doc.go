// Package tensor holds host-side float32/BF16 kernels built on
// github.com/viterin/vek: dot products, blocked matrix products in Hugging
// Face's [out,in] layout, softmax, top-k selection and dtype conversions.
// Every kernel has a plain-Go reference it is tested against and a benchmark.
//
// The vector-index kernels (Dot, DotRows, DotBlock and their F16/U8 forms,
// the F16 and U8 conversions) run hand-written AVX2/FMA/F16C assembly on
// amd64 CPUs that have it (kernels_amd64.s) and portable Go elsewhere;
// KernelName says which. DotBlock is register-blocked (3 queries × 4 rows,
// twelve 8-lane accumulators) and cache-blocked (row tiles that stay in L2
// while every query passes over them): it runs near the FMA peak where
// vek32.MatMul, for this shape, is slower than separate single-query scans.
// Every (query, row) pair is accumulated in the same order by every shape,
// so single, batched, serial and parallel scoring agree bit for bit.
//
// It sits at the bottom of the data flow: search, model and train use it;
// it uses none of them.
package tensor
