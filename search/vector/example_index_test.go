package vector_test

import (
	"fmt"

	"github.com/cas-engine/cas/search/vector"
)

// Exact inner-product search: four 2-d vectors, two queries, top 2.
func ExampleFlat() {
	ix, err := vector.NewFlat(2, vector.InnerProduct, vector.F32)
	if err != nil {
		panic(err)
	}
	ix.Add([]int64{10, 20, 30, 40}, []float32{
		1, 0,
		0, 1,
		0.6, 0.8,
		-1, 0,
	})
	scores, ids, err := ix.Search([]float32{1, 0, 0, 1}, 2, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(ids[:2], scores[:2])
	fmt.Println(ids[2:], scores[2:])
	// Output:
	// [10 30] [1 0.6]
	// [20 30] [1 0.8]
}

// An IVF index visits nprobe of its lists; k beyond what it finds is
// padded with id −1.
func ExampleIVF() {
	x := []float32{
		1, 0, 0.9, 0.1, 0.95, -0.05, // near (1, 0)
		0, 1, 0.1, 0.9, -0.05, 0.95, // near (0, 1)
	}
	ix, err := vector.NewIVF(2, 2, vector.IVFOptions{Metric: vector.L2, KMeans: vector.KMeansOptions{Init: vector.KMeansPlusPlus}})
	if err != nil {
		panic(err)
	}
	if err := ix.Train(x); err != nil {
		panic(err)
	}
	if err := ix.Add(nil, x); err != nil {
		panic(err)
	}
	_, ids, _ := ix.Search([]float32{1, 0.05}, 4, &vector.SearchParams{NProbe: 1})
	fmt.Println(ids)
	_, ids, _ = ix.Search([]float32{1, 0.05}, 4, &vector.SearchParams{NProbe: 2})
	fmt.Println(ids)
	// Output:
	// [0 1 2 -1]
	// [0 1 2 4]
}
