package gocpu

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cas-engine/cas/tensor"
)

// bf16AsF32 is the float32 tensor of the exact values of a bfloat16 one.
func bf16AsF32(t *tensors.Tensor) *tensors.Tensor {
	var out *tensors.Tensor
	t.ConstFlatData(func(flat any) {
		h := flat.([]bfloat16.BFloat16)
		f := make([]float32, len(h))
		for i, v := range h {
			f[i] = v.Float32()
		}
		out = tensors.FromFlatDataAndDimensions(f, t.Shape().Dimensions...)
	})
	return out
}

// TestDotGeneralReadsBF16WeightsInPlace: DotGeneral(x, ConvertDType(w_bf16,
// f32)) (a bfloat16-stored weight in a float32 graph) equals, bit for bit,
// the product with the weight's exact float32 values passed as float32,
// for decode (one row), prefill and weights on either side; the cast is
// not executed when nothing else reads it (profile), and still is when
// something does.
func TestDotGeneralReadsBF16WeightsInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 16))
	cases := []struct {
		name       string
		x, w       []int
		lc, rc     []int
		weightLeft bool
		alsoUsed   bool
	}{
		{"decode row", []int{1, 1, 64}, []int{96, 64}, []int{2}, []int{1}, false, false},
		{"prefill", []int{2, 7, 40}, []int{33, 40}, []int{2}, []int{1}, false, false},
		{"weight on the left", []int{5, 48}, []int{20, 48}, []int{1}, []int{1}, true, false},
		{"cast also read elsewhere", []int{3, 32}, []int{17, 32}, []int{1}, []int{1}, false, true},
		{"zero rows", []int{0, 16}, []int{8, 16}, []int{1}, []int{1}, false, false},
		{"both operands cast", []int{4, 24}, []int{6, 24}, []int{1}, []int{1}, false, false},
	}
	prof := newProfiling(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, w := randTensor(r, dtypes.Float32, c.x...), randTensor(r, dtypes.BFloat16, c.w...)
			prod := func(x, w *graph.Node) *graph.Node {
				if c.weightLeft {
					return graph.DotGeneral(w, c.rc, nil, x, c.lc, nil)
				}
				return graph.DotGeneral(x, c.lc, nil, w, c.rc, nil)
			}
			bothCast := c.name == "both operands cast"
			if bothCast {
				x = randTensor(r, dtypes.BFloat16, c.x...)
			}
			fused := func(in []*graph.Node) []*graph.Node {
				wf := graph.ConvertDType(in[1], dtypes.Float32)
				xf := in[0]
				if bothCast {
					xf = graph.ConvertDType(in[0], dtypes.Float32)
				}
				out := []*graph.Node{prod(xf, wf)}
				if c.alsoUsed {
					out = append(out, graph.ReduceAllSum(wf))
				}
				return out
			}
			prof.Profile(true)
			got, gs, err := run(t, prof, fused, x, w)
			if err != nil {
				t.Fatal(err)
			}
			casts, _ := opRuns(prof, "ConvertDType")
			if want := map[bool]int{false: 0, true: 1}[c.alsoUsed]; casts != want {
				t.Errorf("ConvertDType ran %d times, want %d", casts, want)
			}
			xw := x
			if bothCast {
				xw = bf16AsF32(x)
			}
			want, ws, err := run(t, fastOnce(), func(in []*graph.Node) []*graph.Node {
				return []*graph.Node{prod(in[0], in[1])}
			}, xw, bf16AsF32(w))
			if err != nil {
				t.Fatal(err)
			}
			assertSame(t, got[0], want[0], gs[0], ws[0])
		})
	}
}

// TestGatherFromBF16Table: gathering rows of ConvertDType(table_bf16, f32)
// equals gathering from the table's exact float32 values, and converts
// only the gathered rows (the profile's ConvertDType elements).
func TestGatherFromBF16Table(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 17))
	table := randTensor(r, dtypes.BFloat16, 50, 24)
	ids := tensors.FromFlatDataAndDimensions([]int32{3, 0, 49, 3, 17}, 5, 1)
	prof := newProfiling(t)
	got, gs, err := run(t, prof, func(in []*graph.Node) []*graph.Node {
		return []*graph.Node{graph.Gather(graph.ConvertDType(in[0], dtypes.Float32), in[1])}
	}, table, ids)
	if err != nil {
		t.Fatal(err)
	}
	_, cast := opRuns(prof, "ConvertDType")
	if cast != 5*24 {
		t.Errorf("%d elements converted, want the 5 rows' %d", cast, 5*24)
	}
	want, ws, err := run(t, fastOnce(), func(in []*graph.Node) []*graph.Node {
		return []*graph.Node{graph.Gather(in[0], in[1])}
	}, bf16AsF32(table), ids)
	if err != nil {
		t.Fatal(err)
	}
	assertSame(t, got[0], want[0], gs[0], ws[0])
}

// TestDotGeneralDecodeRowGemv: a batch-1 decode product (one row against
// weights [N, K], N and K not multiples of the kernels' 8 rows and 16
// lanes) runs on tensor.GemvT and equals tensor.MatMulT, the GEMM it
// replaces, bit for bit.
func TestDotGeneralDecodeRowGemv(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 17))
	be := fastOnce()
	for _, s := range [][2]int{{67, 100}, {96, 64}, {704, 256}} {
		n, k := s[0], s[1]
		x, w := randTensor(r, dtypes.Float32, 1, 1, k), randTensor(r, dtypes.Float32, n, k)
		exec, err := graph.NewExec(be, func(x, w *graph.Node) *graph.Node {
			return graph.DotGeneral(x, []int{2}, nil, w, []int{1}, nil)
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Exec(x, w)
		if err != nil {
			t.Fatal(err)
		}
		got := tensors.MustCopyFlatData[float32](out[0])
		want := make([]float32, n)
		tensor.MatMulT(want, tensors.MustCopyFlatData[float32](x), tensors.MustCopyFlatData[float32](w), 1, n, k, 0)
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("n=%d k=%d: y[%d] = %g, GEMM %g", n, k, j, got[j], want[j])
			}
		}
	}
}
