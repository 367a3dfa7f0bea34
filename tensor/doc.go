// Package tensor holds host-side float32/BF16 kernels built on
// github.com/viterin/vek: dot products, blocked matrix products in Hugging
// Face's [out,in] layout, softmax, top-k selection and dtype conversions.
// Every kernel has a plain-Go reference it is tested against and a benchmark.
//
// It sits at the bottom of the data flow: search, model and train use it;
// it uses none of them.
package tensor
