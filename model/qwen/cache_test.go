package qwen

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/backend/backendtest"
)

// TestWriteSlots checks every form of writeSlots against an index loop —
// DynamicUpdateSlice (T = 1 on gocpu), the T = 1 Where ("go") and the T > 1
// one-hot contraction (both backends) — on both cache layouts (slot axis 2
// and 3), including writes that run past the end.
func TestWriteSlots(t *testing.T) {
	plain, err := backend.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, be := range []backends.Backend{backendtest.Shared(t), plain} {
		for _, tc := range []struct {
			slotAxis, t, start int
		}{
			{2, 1, 0}, {2, 1, 6}, {2, 3, 2}, {2, 3, 4}, {2, 3, 5}, {3, 1, 4}, {3, 4, 0}, {3, 4, 3}, {3, 4, 5}, {2, 7, 0},
		} {
			name := fmt.Sprintf("%s_axis%d_T%d_start%d", be.Name(), tc.slotAxis, tc.t, tc.start)
			t.Run(name, func(t *testing.T) { checkWriteSlots(t, be, rng, tc.slotAxis, tc.t, tc.start) })
		}
	}
}

func checkWriteSlots(t *testing.T, b backends.Backend, rng *rand.Rand, slotAxis, tt, start int) {
	const slots = 7
	dims := []int{2, 3, 4, 5}
	dims[slotAxis] = slots
	udims := append([]int(nil), dims...)
	udims[slotAxis] = tt
	cache := randomSlice(rng, product(dims))
	upd := randomSlice(rng, product(udims))
	exec, err := graph.NewExec(b, func(c, u, s *graph.Node) *graph.Node { return writeSlots(c, u, s, slotAxis) })
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	out, err := exec.Exec1(tensors.FromFlatDataAndDimensions(cache, dims...),
		tensors.FromFlatDataAndDimensions(upd, udims...), tensors.FromScalar(int32(start)))
	if err != nil {
		t.Fatal(err)
	}
	got := tensors.MustCopyFlatData[float32](out)
	want := append([]float32(nil), cache...)
	forEachIndex(udims, func(idx []int, flat int) {
		ci := append([]int(nil), idx...)
		if ci[slotAxis] = start + idx[slotAxis]; ci[slotAxis] >= slots {
			return // dropped
		}
		want[flatIndex(dims, ci)] = upd[flat]
	})
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("element %d: got %g, want %g", i, got[i], want[i])
		}
	}
}

func randomSlice(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func forEachIndex(dims []int, fn func(idx []int, flat int)) {
	idx := make([]int, len(dims))
	for flat := range product(dims) {
		fn(idx, flat)
		for a := len(dims) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < dims[a] {
				break
			}
			idx[a] = 0
		}
	}
}

func flatIndex(dims, idx []int) int {
	f := 0
	for a, d := range dims {
		f = f*d + idx[a]
	}
	return f
}

// TestPositionsFromMask checks the log-step prefix sum against a loop, for
// lengths around powers of two and masks with left, right and inner
// padding.
func TestPositionsFromMask(t *testing.T) {
	be := backendtest.Shared(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tl := range []int{1, 2, 3, 7, 8, 9, 64, 65, 320} {
		const b = 3
		mask := make([]int32, b*tl)
		for i := range mask {
			if rng.IntN(4) > 0 {
				mask[i] = 1
			}
		}
		exec, err := graph.NewExec(be, positionsFromMask)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Exec1(tensors.FromFlatDataAndDimensions(mask, b, tl))
		exec.Finalize()
		if err != nil {
			t.Fatal(err)
		}
		got := tensors.MustCopyFlatData[int32](out)
		for r := range b {
			sum := int32(0)
			for j := range tl {
				sum += mask[r*tl+j]
				if want := max(sum-1, 0); got[r*tl+j] != want {
					t.Fatalf("T=%d row %d position %d: got %d, want %d", tl, r, j, got[r*tl+j], want)
				}
			}
		}
	}
}
