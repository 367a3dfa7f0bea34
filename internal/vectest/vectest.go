// Package vectest holds the synthetic vector sets and result comparisons
// shared by the tests of search/vector and search (and usable by benchmarks):
// low-rank unit vectors that behave like text embeddings, recall@k, and
// bit-identical result checks. It does not import search/vector, so that
// package's own tests can use it.
package vectest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cas-engine/cas/internal/testfile"
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
	return testfile.ReadJSONL[FAISSGolden](t, path)
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

// Gen streams synthetic unit vectors in chunks: Next fills dst (a multiple
// of the dimension) with the next rows.
type Gen interface {
	Next(dst []float32)
}

// Generator names accepted by NewGen.
const (
	GenLowRank = "lowrank" // LowRankGen: a rank-r Gaussian, no cluster structure
	GenE5Mix   = "e5mix"   // E5MixGen: fitted to E5-base-v2 passage vectors, topics shared to depth 5
	// GenE5MixDeep is E5MixGen with all 7 topic levels shared (16,384
	// leaves): the same statistics at 1,000 vectors, tight leaf clusters at
	// a million, which the real sample cannot confirm (optimistic).
	GenE5MixDeep = "e5mix-deep"
)

// Gens lists the generator names, the default first.
var Gens = []string{GenE5Mix, GenE5MixDeep, GenLowRank}

// NewGen returns the named generator of d-dimensional unit vectors (r is
// LowRankGen's latent rank; E5MixGen has its own, E5MixRank).
func NewGen(name string, d, r int, seed uint64, workers int) (Gen, error) {
	switch name {
	case GenLowRank:
		return NewLowRankGen(d, r, seed, workers), nil
	case GenE5Mix:
		return NewE5MixGen(d, E5MixShared, seed, workers), nil
	case GenE5MixDeep:
		return NewE5MixGen(d, E5MixLevels, seed, workers), nil
	}
	return nil, fmt.Errorf("unknown vector generator %q (want one of %v)", name, Gens)
}

// The parameters of E5MixGen, fitted by a grid search on the 1,000 real
// E5-base-v2 passage vectors of shared/data/corpus (see E5MixGen).
const (
	E5MixRank     = 256  // latent dimensions
	E5MixBranch   = 4    // children of each topic node
	E5MixLevels   = 7    // depth of the topic tree (4⁷ = 16,384 leaves)
	E5MixShared   = 5    // levels shared between vectors by default (4⁵ = 1,024 topics)
	E5MixGrowth   = 1.15 // scale ratio of a level to its parent's
	E5MixWithin   = 0.5  // scale of a vector's own offset from its leaf
	E5MixMean     = 7.0  // length of the shared direction
	E5MixNoise    = 0.5  // isotropic noise (total over the d dimensions)
	E5MixSpectrum = 0.3  // latent variance of component j ∝ j^−spectrum
)

// E5MixGen streams unit vectors with the statistics of E5 passage
// embeddings: a shared direction (E5 vectors all lie in a narrow cone), a
// hierarchy of topics, and a power-law spectrum. Vector x is
//
//	y = μ·m + A·(t_1 + … + t_L + w·s⊙g) + (ν/√d)·g',   x = y/‖y‖
//
// with m a random unit vector, μ = E5MixMean; A [r, d] Gaussian/√d (a
// random near-isometry, so the structure is not aligned with coordinates or
// PQ sub-spaces); a uniform random leaf of a tree of L = E5MixLevels levels
// and E5MixBranch children per node, whose path's node offsets t_l are
// fixed Gaussians with per-component scale s_j·ρ^(l−1) (s_j ∝
// j^(−E5MixSpectrum/2), Σ s_j² = 1, ρ = E5MixGrowth: finer topics spread
// more than coarser ones, so the clusters overlap as in real text); g, g'
// standard normal.
//
// Only the top `shared` levels are fixed nodes that vectors share; the
// offsets of the deeper levels are drawn afresh for every vector (the
// same variance, s_j²·Σ_{l>shared} ρ^(2(l−1)) + w²·s_j², in one draw). A
// sample of 1,000 vectors cannot tell the two apart (at that size almost
// no two vectors share a node below level 5), but a million can: with all
// 7 levels shared (GenE5MixDeep) a leaf holds ~60 vectors in a tight
// cluster and every index finds them (recall@10 0.999 for IVF-PQ at
// nprobe 16 of 1,024 at 1M), which the real sample does not support; the
// default shares the 4⁵ = 1,024 topics the sample resolves and asserts no
// structure below them.
//
// Fitted on the 1,000 wiki-18 E5 vectors (leave-one-out neighbours; k-means
// with 32 lists), real → this generator at n = 1,000: ‖mean‖ 0.844 → 0.849,
// mean cosine to the 1st / 10th neighbour 0.860 / 0.792 → 0.861 / 0.788,
// median cosine 0.711 → 0.720, participation ratio of the centred spectrum
// 110 → 116, fraction of the exact top-10 inside the 1 / 2 / 4 / 8 nearest
// lists 0.59 / 0.74 / 0.86 / 0.95 → 0.63 / 0.78 / 0.87 / 0.94 (LowRankGen
// at rank 64: 0.19 / 0.30 / 0.46 / 0.65). Structure finer than 1,000
// points can show is the model's extrapolation: below the leaves (16,384)
// the vectors are a Gaussian blob again.
type E5MixGen struct {
	d, r    int
	a       []float32 // [r, d]
	mean    []float32 // μ·m
	leaves  []float32 // [branch^shared, r]: Σ of the path's node offsets
	scale   []float32 // per-vector scale: s_j·√(Σ_{l>shared} ρ^(2(l−1)) + w²)
	rng     *rand.Rand
	workers int
}

// NewE5MixGen returns the E5-fitted generator of d-dimensional unit
// vectors whose top `shared` topic levels (1…E5MixLevels) are shared.
func NewE5MixGen(d, shared int, seed uint64, workers int) *E5MixGen {
	shared = min(max(shared, 1), E5MixLevels)
	r := E5MixRank
	rng := rand.New(rand.NewPCG(seed, 0xe5))
	g := &E5MixGen{d: d, r: r, rng: rng, workers: max(workers, 1)}
	g.a = make([]float32, r*d)
	inv := 1 / math.Sqrt(float64(d))
	for i := range g.a {
		g.a[i] = float32(rng.NormFloat64() * inv)
	}
	s := make([]float64, r)
	var ss float64
	for j := range s {
		s[j] = math.Pow(float64(j+1), -E5MixSpectrum/2)
		ss += s[j] * s[j]
	}
	for j := range s {
		s[j] /= math.Sqrt(ss)
	}
	g.mean = make([]float32, d)
	var mm float64
	for i := range g.mean {
		v := rng.NormFloat64()
		g.mean[i] = float32(v)
		mm += v * v
	}
	for i := range g.mean {
		g.mean[i] *= float32(E5MixMean / math.Sqrt(mm))
	}
	// Level by level: every node adds its own offset to its parent's sum.
	sums := make([]float32, r) // the root
	nodes := 1
	for l := range shared {
		lv := math.Pow(E5MixGrowth, float64(l))
		next := make([]float32, nodes*E5MixBranch*r)
		for p := range nodes {
			for c := range E5MixBranch {
				row := next[(p*E5MixBranch+c)*r : (p*E5MixBranch+c+1)*r]
				for j := range row {
					row[j] = sums[p*r+j] + float32(rng.NormFloat64()*s[j]*lv)
				}
			}
		}
		sums, nodes = next, nodes*E5MixBranch
	}
	g.leaves = sums
	fresh := E5MixWithin * E5MixWithin
	for l := shared; l < E5MixLevels; l++ {
		fresh += math.Pow(E5MixGrowth, float64(2*l))
	}
	g.scale = make([]float32, r)
	for j := range s {
		g.scale[j] = float32(math.Sqrt(fresh) * s[j])
	}
	return g
}

// Next fills dst (a multiple of d floats) with the next rows.
func (g *E5MixGen) Next(dst []float32) {
	d, r := g.d, g.r
	n := len(dst) / d
	nleaf := len(g.leaves) / r
	z := make([]float32, n*r)
	for i := range n {
		leaf := g.leaves[g.rng.IntN(nleaf)*r:]
		zi := z[i*r : (i+1)*r]
		for j := range zi {
			zi[j] = leaf[j] + g.scale[j]*float32(g.rng.NormFloat64())
		}
	}
	tensor.MatMul(dst[:n*d], z, g.a, n, d, r, g.workers)
	noise := E5MixNoise / math.Sqrt(float64(d))
	for i := range n {
		row := dst[i*d : (i+1)*d]
		for j := range row {
			row[j] += g.mean[j] + float32(noise*g.rng.NormFloat64())
		}
	}
	tensor.L2Normalize(dst[:n*d], d)
}
