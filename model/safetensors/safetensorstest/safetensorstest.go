// Package safetensorstest reads the tensors of golden safetensors files
// (inputs, expected logits and hidden states) in tests, failing the test
// on any error.
package safetensorstest

import (
	"testing"

	"github.com/cas-engine/cas/model/safetensors"
)

// Open opens the safetensors file path; it is closed when tb ends.
func Open(tb testing.TB, path string) *safetensors.File {
	tb.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// Int64 reads tensor name of f as int64 values with its shape.
func Int64(tb testing.TB, f *safetensors.File, name string) ([]int64, []int) {
	tb.Helper()
	return must(tb, f, name, (*safetensors.File).Int64)
}

// Float32 reads tensor name of f as float32 values with its shape.
func Float32(tb testing.TB, f *safetensors.File, name string) ([]float32, []int) {
	tb.Helper()
	return must(tb, f, name, (*safetensors.File).Float32)
}

func must[T any](tb testing.TB, f *safetensors.File, name string, get func(*safetensors.File, string) ([]T, []int, error)) ([]T, []int) {
	tb.Helper()
	v, shape, err := get(f, name)
	if err != nil {
		tb.Fatal(err)
	}
	return v, shape
}
