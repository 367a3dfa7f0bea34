package vector

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/cas-engine/cas/internal/vectest"
	"github.com/cas-engine/cas/tensor"
)

// screenCase is one data set for the screened F32 batch.
type screenCase struct {
	name       string
	n, d, nq   int
	k          int
	x, q       []float32
	wantFallbk bool // the data must make some queries fall back
}

// screenCases are ordinary and adversarial sets: near-ties at the k-th
// score (more of them than the candidates), norms over 40 binades, zero
// rows and a zero query, k above the candidate count, fewer rows than k,
// and E5's width.
func screenCases() []screenCase {
	rng := rand.New(rand.NewPCG(7, 8))
	var cs []screenCase
	// 9,000 rows: two workers at 2–3 threads, whose candidates merge.
	x, q := vectest.LowRankPair(9000, 40, 40, 4, 1)
	cs = append(cs, screenCase{name: "lowrank", n: 9000, d: 40, nq: 40, k: 10, x: x, q: q})
	x, q = vectest.LowRankPair(3000, 24, 768, 24, 2)
	cs = append(cs, screenCase{name: "e5width", n: 3000, d: 768, nq: 24, k: 10, x: x, q: q})

	// Near-ties: 600 rows equal to one direction plus perturbations far
	// below bfloat16's resolution, so that 600 screened scores tie at the
	// top and the candidates (42) cannot separate them.
	d := 32
	n := 3000
	x = vectest.LowRank(n, d, 4, 3)
	dir := x[:d]
	for j := 1; j <= 600; j++ {
		for c := range d {
			x[j*d+c] = dir[c] * (1 + float32(rng.NormFloat64())*1e-6)
		}
	}
	q = make([]float32, 20*d)
	for i := range 20 {
		copy(q[i*d:], dir)
		q[i*d+i%d] += 1e-3
	}
	cs = append(cs, screenCase{name: "nearties", n: n, d: d, nq: 20, k: 10, x: x, q: q, wantFallbk: true})

	// Dynamic range: row norms from 2⁻²⁰ to 2²⁰, some zero rows; one zero
	// query.
	x, q = vectest.LowRankPair(4500, 36, 24, 3, 4)
	for j := range 4500 {
		s := float32(math.Exp2(float64(rng.IntN(41) - 20)))
		if j%97 == 0 {
			s = 0
		}
		for c := range 24 {
			x[j*24+c] *= s
		}
	}
	clear(q[5*24 : 6*24])
	cs = append(cs, screenCase{name: "range", n: 4500, d: 24, nq: 36, k: 10, x: x, q: q, wantFallbk: true})

	// Rounding that reorders: against q = (1, 1, 1, 1, 0, …), ten rows
	// with four components 1 + 2⁻⁸ − 2⁻²⁰ round down to a screened 4 but
	// are the exact best (4 + 2⁻⁶ − 2⁻¹⁸); a hundred decoys (1 + 2⁻⁷ + 2⁻⁸
	// − 2⁻¹⁶, 1, 1, 1, …) round to a screened 4 + 2⁻⁷, above them, though
	// exactly only 4 + 3·2⁻⁸ − 2⁻¹⁶ — still above that screened score, so
	// only the bound (not the rescored k-th key alone) sees that rows
	// outside the candidates, all decoys, may be better.
	d = 32
	n = 1110
	x = vectest.LowRank(n, d, 4, 9)
	for j := range 110 {
		r := x[j*d : (j+1)*d]
		for c := 4; c < d; c++ {
			r[c] *= 0.01
		}
		if j < 10 {
			r[0], r[1], r[2], r[3] = 1+0x1p-8-0x1p-20, 1+0x1p-8-0x1p-20, 1+0x1p-8-0x1p-20, 1+0x1p-8-0x1p-20
		} else {
			r[0], r[1], r[2], r[3] = 1+0x1p-7+0x1p-8-0x1p-16, 1, 1, 1
		}
	}
	q = make([]float32, 16*d)
	for i := range 16 {
		q[i*d], q[i*d+1], q[i*d+2], q[i*d+3] = 1, 1, 1, 1
	}
	cs = append(cs, screenCase{name: "rounding", n: n, d: d, nq: 16, k: 10, x: x, q: q, wantFallbk: true})

	x, q = vectest.LowRankPair(2000, 16, 20, 4, 5)
	cs = append(cs, screenCase{name: "k300", n: 2000, d: 20, nq: 16, k: 300, x: x, q: q})
	x, q = vectest.LowRankPair(7, 16, 12, 3, 6)
	cs = append(cs, screenCase{name: "n<k", n: 7, d: 12, nq: 16, k: 10, x: x, q: q})
	return cs
}

// TestFlatScreenedIsExact: the AMX-screened F32 batch (flat_screen.go,
// forced on, so that it runs here even without AMX) returns the exact
// top-k — ranked as float64 inner products or L2 keys rank the rows, ties
// only within float32 rounding of a dot product — with scores equal to
// the rows' float64 scores to that rounding, at 1–3 threads; and it
// matches the exact GEMM path id for id wherever that one has no such tie.
// The adversarial sets must fall back, the ordinary ones need not.
func TestFlatScreenedIsExact(t *testing.T) {
	for _, c := range screenCases() {
		for _, m := range []Metric{InnerProduct, L2} {
			t.Run(fmt.Sprintf("%s/%v", c.name, m), func(t *testing.T) {
				ids := make([]int64, c.n)
				for j := range ids {
					ids[j] = int64(7 * (c.n - j)) // not row numbers, not increasing
				}
				screened, _ := NewFlat(c.d, m, F32)
				screened.Add(ids, c.x)
				screened.screen = screenOn
				exact, _ := NewFlat(c.d, m, F32)
				exact.Add(ids, c.x)
				exact.screen = screenOff
				ref := exactKeys(c.x, c.q, c.d, m)
				es, ei, _ := exact.Search(c.q, c.k, &SearchParams{Threads: 1})
				for th := 1; th <= 3; th++ {
					before := screened.ScreenStats()
					ss, si, err := screened.Search(c.q, c.k, &SearchParams{Threads: th})
					if err != nil {
						t.Fatal(err)
					}
					st := screened.ScreenStats()
					if st.Queries-before.Queries != int64(c.nq) {
						t.Fatalf("%d queries screened, want %d", st.Queries-before.Queries, c.nq)
					}
					fb := st.Fallbacks - before.Fallbacks
					if th == 1 {
						t.Logf("%d of %d queries fell back", fb, c.nq)
					}
					if c.wantFallbk && fb == 0 {
						t.Errorf("threads %d: no query fell back on adversarial data", th)
					}
					checkExactTopK(t, fmt.Sprintf("threads %d", th), ref, ids, c, m, ss, si)
					checkExactTopK(t, "exact path", ref, ids, c, m, es, ei)
				}
			})
		}
	}
}

// exactKeys are the float64 ranking keys of every (query, row) pair.
func exactKeys(x, q []float32, d int, m Metric) [][]float64 {
	n, nq := len(x)/d, len(q)/d
	out := make([][]float64, nq)
	for i := range nq {
		out[i] = make([]float64, n)
		for j := range n {
			var dot, xx, qq float64
			for c := range d {
				a, b := float64(q[i*d+c]), float64(x[j*d+c])
				dot += a * b
				xx += b * b
				qq += a * a
			}
			if m == L2 {
				dot = 2*dot - xx - qq
			}
			out[i][j] = dot
		}
	}
	return out
}

// checkExactTopK checks a search result against the float64 keys: each
// rank's key equals the reference ranking's key at that rank, both to the
// rounding tolerance, every id once, and the scores equal to the rows'.
func checkExactTopK(t *testing.T, name string, ref [][]float64, ids []int64, c screenCase, m Metric, scores []float32, got []int64) {
	t.Helper()
	row := map[int64]int{}
	for j, id := range ids {
		row[id] = j
	}
	xx := make([]float64, c.n)
	for j := range c.n {
		for a := range c.d {
			xx[j] += float64(c.x[j*c.d+a]) * float64(c.x[j*c.d+a])
		}
	}
	for i := range c.nq {
		keys := append([]float64(nil), ref[i]...)
		sort.Sort(sort.Reverse(sort.Float64Slice(keys)))
		// float32 rounding of a dot product over d terms, on the scale of
		// the largest |q|·|x| involved.
		var qq, scale float64
		for a := range c.d {
			qq += float64(c.q[i*c.d+a]) * float64(c.q[i*c.d+a])
		}
		for j := range c.n {
			s := math.Sqrt(xx[j] * qq)
			if m == L2 {
				s = 2*s + xx[j] + qq
			}
			scale = max(scale, s)
		}
		tol := 4 * float64(c.d+2) * 0x1p-24 * scale
		seen := map[int64]bool{}
		for r := range c.k {
			id := got[i*c.k+r]
			if r >= c.n {
				if id != -1 {
					t.Fatalf("%s query %d rank %d: id %d past the %d rows", name, i, r, id, c.n)
				}
				continue
			}
			j, ok := row[id]
			if !ok || seen[id] {
				t.Fatalf("%s query %d rank %d: id %d unknown or repeated", name, i, r, id)
			}
			seen[id] = true
			key := ref[i][j]
			if math.Abs(key-keys[r]) > tol {
				t.Fatalf("%s query %d rank %d: id %d has key %v, the exact rank-%d key is %v (tolerance %.3g)", name, i, r, id, key, r, keys[r], tol)
			}
			want := key
			if m == L2 {
				want = max(-key, 0)
			}
			if math.Abs(float64(scores[i*c.k+r])-want) > tol {
				t.Fatalf("%s query %d rank %d: score %v, exact %v", name, i, r, scores[i*c.k+r], want)
			}
		}
	}
}

// TestFlatScreenedAuto: without being forced, F32 batches are screened
// exactly where the CPU has AMX-BF16, and the kernel is named.
func TestFlatScreenedAuto(t *testing.T) {
	f, _ := NewFlat(8, InnerProduct, F32)
	if got, want := f.useScreen(screenMinQueries), tensor.HasAMXBF16(); got != want {
		t.Fatalf("useScreen = %v on a CPU with AMX-BF16 %v", got, want)
	}
	if f.useScreen(screenMinQueries - 1) {
		t.Fatal("a small batch is screened")
	}
	want := "F32 GEMM"
	if tensor.HasAMXBF16() {
		want = "AMX-BF16 screen + exact F32 rescoring"
	}
	if got := f.BatchKernel(); got != want {
		t.Fatalf("BatchKernel = %q, want %q", got, want)
	}
}
