package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// refTopK sorts everything: score descending, id ascending, NaNs dropped.
func refTopK(scores []float32, ids []int64, k int) ([]float32, []int64) {
	idx := make([]int, 0, len(scores))
	for i, s := range scores {
		if !math.IsNaN(float64(s)) {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool {
		i, j := idx[a], idx[b]
		if scores[i] != scores[j] {
			return scores[i] > scores[j]
		}
		return ids[i] < ids[j]
	})
	idx = idx[:min(k, len(idx))]
	s := make([]float32, len(idx))
	o := make([]int64, len(idx))
	for n, i := range idx {
		s[n], o[n] = scores[i], ids[i]
	}
	return s, o
}

func TestTopKMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, n := range []int{0, 1, 5, 10, 11, 100, 1000} {
		for _, k := range []int{0, 1, 3, 10, 64, 2000} {
			scores := make([]float32, n)
			ids := make([]int64, n)
			for i := range scores {
				scores[i] = float32(r.IntN(50)) // many ties
				ids[i] = int64(r.IntN(1 << 20))
				if r.IntN(97) == 0 {
					scores[i] = float32(math.NaN())
				}
			}
			ws, wi := refTopK(scores, ids, k)
			for mode := range 3 {
				tk := NewTopK(k)
				switch mode {
				case 0:
					for i := range scores {
						tk.Push(scores[i], ids[i])
					}
				case 1:
					tk.PushIDs(scores, ids)
				case 2: // two halves merged, as a parallel search does
					a, b := NewTopK(k), NewTopK(k)
					a.PushIDs(scores[:n/2], ids[:n/2])
					b.PushIDs(scores[n/2:], ids[n/2:])
					tk.Merge(a)
					tk.Merge(b)
				}
				gs := make([]float32, tk.Len())
				gi := make([]int64, tk.Len())
				tk.Sorted(gs, gi)
				if !slices.Equal(gs, ws) || !slices.Equal(gi, wi) {
					t.Fatalf("n=%d k=%d mode %d:\n got %v %v\nwant %v %v", n, k, mode, gs, gi, ws, wi)
				}
				// Still a valid heap after Sorted: a new best pair displaces
				// exactly the worst one.
				if k > 0 {
					tk.Push(1000, -5)
					gs = make([]float32, tk.Len())
					gi = make([]int64, tk.Len())
					tk.Sorted(gs, gi)
					want := append([]float32{1000}, ws...)[:min(k, len(ws)+1)]
					if !slices.Equal(gs, want) || gi[0] != -5 {
						t.Fatalf("n=%d k=%d mode %d after push: %v want %v", n, k, mode, gs, want)
					}
				}
			}
		}
	}
}

func TestTopKPushRowsIDs(t *testing.T) {
	scores := []float32{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}
	tk := NewTopK(4)
	tk.PushRows(scores[:5], 100)
	tk.PushRows(scores[5:], 105)
	s := make([]float32, 4)
	ids := make([]int64, 4)
	tk.Sorted(s, ids)
	if !slices.Equal(s, []float32{9, 6, 5, 5}) || !slices.Equal(ids, []int64{105, 107, 104, 108}) {
		t.Fatalf("got %v %v", s, ids)
	}
	if got := TopKIndices(scores, 3); !slices.Equal(got, []int{5, 7, 4}) {
		t.Fatalf("TopKIndices = %v", got)
	}
	if got := TopKIndices(scores, 0); len(got) != 0 {
		t.Fatalf("k=0: %v", got)
	}
	if got := TopKIndices(nil, 5); len(got) != 0 {
		t.Fatalf("empty: %v", got)
	}
}

func BenchmarkTopKPushRows(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	scores := randVec(r, 100_000)
	tk := NewTopK(10)
	for b.Loop() {
		tk.Reset()
		tk.PushRows(scores, 0)
	}
}
