// Package vectest holds the synthetic vector sets and result comparisons
// shared by the tests of search/vector and search (and usable by benchmarks):
// low-rank unit vectors that behave like text embeddings, recall@k, and
// bit-identical result checks. It does not import search/vector, so that
// package's own tests can use it.
package vectest

import (
	"bufio"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/cas-engine/cas/tensor"
)

// LowRank returns n unit vectors in d dimensions that behave like text
// embeddings under IVF (the generator of shared/bench/faiss_peer.py): a
// Gaussian latent of rank r mapped to d dimensions plus isotropic noise.
func LowRank(n, d, r int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 99))
	a := make([]float32, r*d)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	return lowRankWith(rng, a, n, d, r)
}

func lowRankWith(rng *rand.Rand, a []float32, n, d, r int) []float32 {
	x := make([]float32, n*d)
	z := make([]float32, r)
	noise := float32(0.5 * math.Sqrt(float64(r)))
	for i := range n {
		for j := range z {
			z[j] = float32(rng.NormFloat64())
		}
		row := x[i*d : (i+1)*d]
		for j := range row {
			var s float32
			for t := range r {
				s += z[t] * a[t*d+j]
			}
			row[j] = s + noise*float32(rng.NormFloat64())
		}
	}
	tensor.L2Normalize(x, d)
	return x
}

// LowRankPair returns base and query sets drawn from the same latent map.
func LowRankPair(n, nq, d, r int, seed uint64) (base, queries []float32) {
	rng := rand.New(rand.NewPCG(seed, 99))
	a := make([]float32, r*d)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	return lowRankWith(rng, a, n, d, r), lowRankWith(rng, a, nq, d, r)
}

// RecallAt returns the mean fraction of the reference top-k ids found in
// the result rows.
func RecallAt(ids []int64, ref [][]int64, k int) float64 {
	var hit, total int
	for i, r := range ref {
		row := ids[i*k : (i+1)*k]
		for _, id := range r {
			total++
			if slices.Contains(row, id) {
				hit++
			}
		}
	}
	return float64(hit) / float64(total)
}

// SameResults fails unless two searches returned bit-identical rows.
func SameResults(t testing.TB, name string, s1 []float32, i1 []int64, s2 []float32, i2 []int64) {
	t.Helper()
	if len(s1) != len(s2) || len(i1) != len(i2) {
		t.Fatalf("%s: lengths %d/%d vs %d/%d", name, len(s1), len(i1), len(s2), len(i2))
	}
	for j := range s1 {
		if i1[j] != i2[j] || math.Float32bits(s1[j]) != math.Float32bits(s2[j]) {
			t.Fatalf("%s: result %d: (%v, %d) vs (%v, %d)", name, j, s1[j], i1[j], s2[j], i2[j])
		}
	}
}

// FAISSGolden is one line of a golden top-k file written by FAISS
// (shared/golden/faiss/*.jsonl).
type FAISSGolden struct {
	Query  int       `json:"query"`
	IDs    []int64   `json:"ids"`
	Scores []float32 `json:"scores"`
}

// ReadFAISSGolden reads a golden top-k JSONL file.
func ReadFAISSGolden(t testing.TB, path string) []FAISSGolden {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []FAISSGolden
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var g FAISSGolden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

// LowRankGen streams the distribution of LowRank in chunks, for sets too
// large to hold twice: each chunk of n rows is Z·A + noise, normalized, with
// Z [n, r] Gaussian drawn from the generator's own stream, the product
// computed by the tensor GEMM on workers goroutines. The same seed gives
// the same rows whatever the chunk sizes' sum; the rows differ from
// LowRank's (a different draw order), not their law.
type LowRankGen struct {
	d, r    int
	a       []float32
	rng     *rand.Rand
	workers int
}

// NewLowRankGen returns a generator of rank-r unit vectors in d dimensions.
func NewLowRankGen(d, r int, seed uint64, workers int) *LowRankGen {
	rng := rand.New(rand.NewPCG(seed, 99))
	a := make([]float32, r*d)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	return &LowRankGen{d: d, r: r, a: a, rng: rng, workers: max(workers, 1)}
}

// Next fills dst (a multiple of d floats) with the next rows.
func (g *LowRankGen) Next(dst []float32) {
	n := len(dst) / g.d
	z := make([]float32, n*g.r)
	for i := range z {
		z[i] = float32(g.rng.NormFloat64())
	}
	tensor.MatMul(dst[:n*g.d], z, g.a, n, g.d, g.r, g.workers)
	noise := 0.5 * math.Sqrt(float64(g.r))
	for i := range dst[:n*g.d] {
		dst[i] += float32(noise * g.rng.NormFloat64())
	}
	tensor.L2Normalize(dst[:n*g.d], g.d)
}
