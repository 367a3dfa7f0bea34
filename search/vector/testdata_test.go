package vector

import (
	"math"
	"slices"
	"sort"
	"testing"
)

// bruteForce is the reference search: float64 scores over decoded vectors,
// sorted best first with ties by smaller id.
func bruteForce(x []float32, ids []int64, q []float32, d, k int, m Metric) ([]float64, [][]int64) {
	n := len(x) / d
	nq := len(q) / d
	outS := make([]float64, 0, nq*k)
	outI := make([][]int64, nq)
	for i := range nq {
		qi := q[i*d : (i+1)*d]
		type cand struct {
			s  float64
			id int64
		}
		c := make([]cand, n)
		for j := range n {
			xj := x[j*d : (j+1)*d]
			var s float64
			for t := range d {
				if m == L2 {
					diff := float64(qi[t]) - float64(xj[t])
					s -= diff * diff
				} else {
					s += float64(qi[t]) * float64(xj[t])
				}
			}
			id := int64(j)
			if ids != nil {
				id = ids[j]
			}
			c[j] = cand{s, id}
		}
		sort.Slice(c, func(a, b int) bool {
			if c[a].s != c[b].s {
				return c[a].s > c[b].s
			}
			return c[a].id < c[b].id
		})
		for j := range min(k, n) {
			s := c[j].s
			if m == L2 {
				s = -s
			}
			outS = append(outS, s)
			outI[i] = append(outI[i], c[j].id)
		}
	}
	return outS, outI
}

// closeResults fails unless two searches agree to float32 rounding: scores
// within tol (relative, at least absolute tol) rank by rank, and the same
// id at each rank except where two scores tie within tol (the batched F32
// flat search sums in another order than the single-query kernels).
func closeResults(t *testing.T, name string, s1 []float32, i1 []int64, s2 []float32, i2 []int64, tol float64) {
	t.Helper()
	if len(s1) != len(s2) || len(i1) != len(i2) {
		t.Fatalf("%s: lengths %d/%d vs %d/%d", name, len(s1), len(i1), len(s2), len(i2))
	}
	near := func(a, b float32) bool {
		return math.Abs(float64(a)-float64(b)) <= tol*max(1, math.Abs(float64(a)))
	}
	for j := range s1 {
		if !near(s1[j], s2[j]) {
			t.Fatalf("%s: result %d: score %v vs %v", name, j, s1[j], s2[j])
		}
		if i1[j] != i2[j] && !slices.ContainsFunc(i1, func(id int64) bool {
			k := slices.Index(i1, id)
			return id == i2[j] && near(s1[k], s1[j])
		}) {
			t.Fatalf("%s: result %d: id %d vs %d (not a tie)", name, j, i1[j], i2[j])
		}
	}
}

// exactScore is the float64 inner product or squared L2 distance.
func exactScore(x, q []float32, m Metric) float64 {
	var s float64
	for t := range q {
		if m == L2 {
			diff := float64(q[t]) - float64(x[t])
			s += diff * diff
		} else {
			s += float64(q[t]) * float64(x[t])
		}
	}
	return s
}
