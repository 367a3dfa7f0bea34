package vector

import (
	"fmt"
	"math"
	"testing"

	"github.com/cas-engine/cas/internal/vectest"
)

// TestAssignScreenedIsExactArgmax: the AMX-screened assignment
// (kmeans_screen.go) picks, for every point, a centroid whose float64 key
// is the largest to within float32 rounding of a dot product, and its
// objective is the sum of those keys — on the adversarial sets of the
// screened flat search (bfloat16 rounding that reorders the best
// centroids, near-ties, 40 binades of norms) and on ordinary data.
func TestAssignScreenedIsExactArgmax(t *testing.T) {
	for _, c := range screenCases() {
		if c.n < 16 {
			continue
		}
		for _, m := range []Metric{InnerProduct, L2} {
			t.Run(fmt.Sprintf("%s/%v", c.name, m), func(t *testing.T) {
				// Centroids: the case's rows (at most 512); points: its
				// queries and some rows.
				k := min(c.n, 512)
				cent := c.x[:k*c.d]
				pts := append(append([]float32(nil), c.q...), vectest.LowRank(200, c.d, 4, 11)...)
				np := len(pts) / c.d
				cnorm := make([]float32, k)
				if m == L2 {
					for j := range k {
						for a := range c.d {
							cnorm[j] += cent[j*c.d+a] * cent[j*c.d+a]
						}
					}
				}
				assign := make([]int32, np)
				for th := 1; th <= 2; th++ {
					obj, ok := assignScreened(assign, pts, cent, cnorm, np, c.d, k, m, th)
					if !ok {
						t.Fatal("screened assignment refused finite centroids")
					}
					var want float64
					for i := range np {
						var best, scale float64 = math.Inf(-1), 0
						keys := make([]float64, k)
						var pp float64
						for a := range c.d {
							pp += float64(pts[i*c.d+a]) * float64(pts[i*c.d+a])
						}
						for j := range k {
							var dot, cc float64
							for a := range c.d {
								dot += float64(pts[i*c.d+a]) * float64(cent[j*c.d+a])
								cc += float64(cent[j*c.d+a]) * float64(cent[j*c.d+a])
							}
							keys[j] = dot
							s := math.Sqrt(pp * cc)
							if m == L2 {
								keys[j] = 2*dot - cc
								s = 2*s + cc
							}
							best = max(best, keys[j])
							scale = max(scale, s)
						}
						tol := 4 * float64(c.d+2) * 0x1p-24 * scale
						if got := keys[assign[i]]; best-got > tol {
							t.Fatalf("threads %d point %d: centroid %d has key %v, the best is %v (tolerance %.3g)", th, i, assign[i], got, best, tol)
						}
						if m == L2 {
							want += pp - best
						} else {
							want += best
						}
					}
					if math.Abs(obj-want) > 1e-4*max(1, math.Abs(want)) {
						t.Fatalf("threads %d: objective %v, exact %v", th, obj, want)
					}
				}
			})
		}
	}
}

// TestAssignListsScreenedMatchesSearch: an IVF's list assignment (screened
// on AMX where the CPU has it) picks the quantizer's exact nearest
// centroid, up to float32 rounding, for both metrics and in any batching.
func TestAssignListsScreenedMatchesSearch(t *testing.T) {
	const d, nc, n = 48, 256, 3000
	x := vectest.LowRank(n, d, 6, 21)
	for _, m := range []Metric{InnerProduct, L2} {
		q, _ := NewFlat(d, m, F32)
		q.Add(nil, x[:nc*d])
		lists, err := assignLists(q, x, 2)
		if err != nil {
			t.Fatal(err)
		}
		whole, _ := assignLists(q, x[:100*d], 1)
		_, exact, _ := q.search(x, 1, &SearchParams{Threads: 1}, false)
		differ := 0
		for i := range n {
			if i < 100 && whole[i] != lists[i] {
				t.Fatalf("%v vector %d: list %d in a batch of 100, %d in %d", m, i, whole[i], lists[i], n)
			}
			if lists[i] == exact[i] {
				continue
			}
			differ++
			xi := x[i*d : (i+1)*d]
			key := func(c int64) float64 {
				var dot, cc float64
				for a := range d {
					dot += float64(xi[a]) * float64(x[int(c)*d+a])
					cc += float64(x[int(c)*d+a]) * float64(x[int(c)*d+a])
				}
				if m == L2 {
					return 2*dot - cc
				}
				return dot
			}
			if diff := math.Abs(key(lists[i]) - key(exact[i])); diff > 1e-5 {
				t.Fatalf("%v vector %d: list %d, the exact search's %d, keys %.3g apart", m, i, lists[i], exact[i], diff)
			}
		}
		t.Logf("%v: %d of %d vectors in another list than the exact search's (float32 ties)", m, differ, n)
	}
}
