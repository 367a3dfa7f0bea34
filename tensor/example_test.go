package tensor_test

import (
	"fmt"

	"github.com/cas-engine/cas/tensor"
)

// Three queries against four rows in one blocked call.
func ExampleDotBlock() {
	q := []float32{
		1, 0,
		0, 1,
		1, 1,
	}
	x := []float32{
		1, 2,
		3, 4,
		5, 6,
		7, 8,
	}
	out := make([]float32, 3*4)
	tensor.DotBlock(out, q, x, 2)
	fmt.Println(out[0:4])
	fmt.Println(out[4:8])
	fmt.Println(out[8:12])
	// Output:
	// [1 3 5 7]
	// [2 4 6 8]
	// [3 7 11 15]
}

// Keeping the best three of a stream, ties broken by the smaller id.
func ExampleTopK() {
	t := tensor.NewTopK(3)
	t.PushRows([]float32{0.1, 0.9, 0.5, 0.9, 0.2}, 100)
	scores := make([]float32, 3)
	ids := make([]int64, 3)
	n := t.Sorted(scores, ids)
	fmt.Println(n, scores, ids)
	// Output: 3 [0.9 0.9 0.5] [101 103 102]
}

func ExampleF32ToF16() {
	h := tensor.F32ToF16(1.0 / 3)
	fmt.Printf("%#04x %v\n", h, tensor.F16ToF32(h))
	// Output: 0x3555 0.33325195
}
