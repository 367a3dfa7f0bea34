package vector

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/cas-engine/cas/internal/meter"
	"github.com/cas-engine/cas/tensor"
	"github.com/viterin/vek/vek32"
)

// KMeansInit chooses the initial centroids.
type KMeansInit uint8

const (
	// KMeansRandom takes k distinct training points at random, drawn as
	// FAISS draws them (rand_perm on mt19937).
	KMeansRandom KMeansInit = iota
	// KMeansPlusPlus is k-means++ seeding (Arthur & Vassilvitskii, 2007):
	// each next centroid is a point drawn with probability ∝ D(x)², its
	// squared distance to the nearest centroid so far. It runs on at most
	// 16·k of the training points.
	KMeansPlusPlus
)

// KMeansOptions configure KMeans. The zero value is FAISS's IVF setting:
// 10 iterations, random init, at most 256 points per centroid, L2
// assignment, no normalisation.
type KMeansOptions struct {
	// Iterations of Lloyd's algorithm (≤ 0: 10).
	Iterations int
	// Seed drives the subsample, the init and empty-cluster re-seeding.
	Seed uint64
	// Init is KMeansRandom or KMeansPlusPlus.
	Init KMeansInit
	// Metric assigns each point to the centroid with the largest ⟨x, c⟩
	// (InnerProduct) or the smallest ‖x − c‖² (L2).
	Metric Metric
	// Spherical renormalises the centroids to unit length after each
	// update (spherical k-means, for inner-product search).
	Spherical bool
	// MaxPointsPerCentroid caps the training set at this many points per
	// centroid, drawn at random (≤ 0: 256, FAISS's default).
	MaxPointsPerCentroid int
	// Threads for the assignment step (≤ 0: GOMAXPROCS). The result does
	// not depend on it.
	Threads int
	// Progress, when non-nil, receives a progress bar.
	Progress io.Writer
}

// KMeansResult is a trained clustering.
type KMeansResult struct {
	// Centroids, k × d row-major.
	Centroids []float32
	// Objective per iteration, measured at its assignment step: Σ ⟨x, c(x)⟩
	// for inner product (increasing), Σ ‖x − c(x)‖² for L2 (decreasing).
	Objective []float64
	// Sizes are the cluster sizes of the last assignment.
	Sizes []int
	// Points is the number of training points after subsampling.
	Points int
	// Splits counts empty clusters that were re-seeded.
	Splits int
}

// KMeans clusters the len(x)/d points of x into k clusters with Lloyd's
// algorithm:
//
//	assign:  a(x) = argmax_c ⟨x, c⟩  (inner product)  or  argmin_c ‖x − c‖²  (L2)
//	update:  c ← mean{x : a(x) = c}  (then c ← c/‖c‖ when Spherical)
//
// Assignment scores the points against the centroids with the F32 GEMM,
// or, where the CPU has AMX-BF16, screens them in bfloat16 and rescores
// the few centroids that can be the best exactly (kmeans_screen.go: the
// same argmax up to float32 rounding), on Threads goroutines; the update is FAISS's compute_centroids, a
// serial float32 sum in point order times 1/size, so the result is the same
// for any thread count. An empty cluster is re-seeded FAISS's way
// (splitEmpty). With KMeansRandom the subsample, the initial centroids and
// the splits are FAISS's own draws (faiss::Clustering with seed = Seed, its
// default 1234), so that on the same data the two train the same
// centroids up to float rounding in the assignment (TestKMeansMatchesFAISS).
func KMeans(x []float32, d, k int, opt KMeansOptions) (*KMeansResult, error) {
	n, err := checkVectors("k-means", x, d)
	if err != nil {
		return nil, err
	}
	if k <= 0 {
		return nil, fmt.Errorf("k-means: k = %d", k)
	}
	if n < k {
		return nil, fmt.Errorf("k-means: %d training points for %d centroids", n, k)
	}
	if err := checkMetric(opt.Metric); err != nil {
		return nil, fmt.Errorf("k-means: %w", err)
	}
	iters := opt.Iterations
	if iters <= 0 {
		iters = 10
	}
	maxPer := opt.MaxPointsPerCentroid
	if maxPer <= 0 {
		maxPer = 256
	}
	rng := newRand(opt.Seed)
	if limit := maxPer * k; n > limit {
		if opt.Init == KMeansRandom {
			// FAISS's subsample: the first limit points of rand_perm(seed),
			// in that order.
			perm := faissRandPerm(n, int64(opt.Seed))[:limit]
			sub := make([]float32, limit*d)
			for i, j := range perm {
				copy(sub[i*d:(i+1)*d], x[j*d:(j+1)*d])
			}
			x = sub
		} else {
			x = sampleRows(x, d, n, limit, rng)
		}
		n = limit
	}
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("k-means: training point %d has a non-finite component", i/d)
		}
	}

	cent := make([]float32, k*d)
	switch opt.Init {
	case KMeansRandom:
		// FAISS's init: the points at the first k positions of
		// rand_perm(seed + 1).
		for c, j := range faissRandPerm(n, int64(opt.Seed)+1)[:k] {
			copy(cent[c*d:(c+1)*d], x[j*d:(j+1)*d])
		}
	case KMeansPlusPlus:
		kmeansPlusPlus(cent, x, n, d, k, rng)
	default:
		return nil, fmt.Errorf("k-means: unknown init %d", opt.Init)
	}
	if opt.Spherical {
		tensor.L2Normalize(cent, d)
	}

	res := &KMeansResult{Points: n}
	assign := make([]int32, n)
	sizes := make([]int, k)
	hassign := make([]float32, k)
	bar := meter.NewCount(opt.Progress, int64(iters), "k-means")
	for range iters {
		obj := assignPoints(assign, x, cent, n, d, k, opt.Metric, opt.Threads)
		res.Objective = append(res.Objective, obj)
		// FAISS's compute_centroids: float32 sums in point order, then
		// times 1/size; empty clusters keep nothing until split.
		clear(sizes)
		clear(cent)
		for i, a := range assign {
			sizes[a]++
			// Element by element, so vectorised adds give the same sums.
			vek32.Add_Inplace(cent[int(a)*d:int(a+1)*d], x[i*d:(i+1)*d])
		}
		for c := range k {
			hassign[c] = float32(sizes[c])
			if sizes[c] == 0 {
				continue
			}
			inv := 1 / hassign[c]
			for j := range d {
				cent[c*d+j] *= inv
			}
		}
		res.Splits += splitEmpty(cent, hassign, n, d, k)
		if opt.Spherical {
			tensor.L2Normalize(cent, d)
		}
		bar.Add(1)
	}
	bar.Finish()
	res.Centroids = cent
	res.Sizes = sizes
	return res, nil
}

// assignPoints sets assign[i] to the best centroid of point i and returns
// the objective (see KMeansResult). Ties go to the lower centroid index.
func assignPoints(assign []int32, x, cent []float32, n, d, k int, m Metric, threads int) float64 {
	var cnorm []float32
	if m == L2 {
		cnorm = make([]float32, k)
		tensor.SquaredNorms(cnorm, cent, d)
	}
	if useScreenAssign(k) {
		if obj, ok := assignScreened(assign, x, cent, cnorm, n, d, k, m, threads); ok {
			return obj
		}
	}
	return assignGEMM(assign, x, cent, cnorm, n, d, k, m, threads)
}

// assignGEMM is assignPoints on the F32 GEMM.
func assignGEMM(assign []int32, x, cent, cnorm []float32, n, d, k int, m Metric, threads int) float64 {
	// Points per block: up to 768 (GEMM rows), fewer for large k so that
	// the score block stays under 8 MiB. The block size depends on k only,
	// so the assignment does not depend on the thread count.
	chunk := max(3, min(768, (8<<20)/(4*k))/3*3)
	nchunks := (n + chunk - 1) / chunk
	workers := max(1, min(tensor.Workers(threads), nchunks))
	// Per-chunk objectives, summed in chunk order so the total does not
	// depend on the thread count.
	partial := make([]float64, nchunks)
	outs := make([][]float32, workers)
	forChunks(nchunks, 1, workers, func(w, lo, hi int) {
		if outs[w] == nil {
			outs[w] = make([]float32, chunk*k)
		}
		out := outs[w]
		for c := lo; c < hi; c++ {
			var obj float64
			p0 := c * chunk
			p1 := min(n, p0+chunk)
			// Scores of the chunk's points against every centroid: one
			// GEMM (x·centᵀ), then an argmax per row.
			tensor.MatMulT(out[:(p1-p0)*k], x[p0*d:p1*d], cent, p1-p0, k, d, 1)
			for i := p0; i < p1; i++ {
				row := out[(i-p0)*k : (i-p0+1)*k]
				if m == L2 {
					// 2⟨x, c⟩ − ‖c‖² (doubling is exact: one rounding).
					vek32.MulNumber_Inplace(row, 2)
					vek32.Sub_Inplace(row, cnorm)
				}
				// The first index of the largest value: its value, then
				// the first index that reaches it (both vectorised).
				best := tensor.IndexAtLeast(row, vek32.Max(row))
				bestV := row[best]
				assign[i] = int32(best)
				if m == L2 {
					xi := x[i*d : (i+1)*d]
					obj += float64(tensor.Dot(xi, xi) - bestV)
				} else {
					obj += float64(bestV)
				}
			}
			partial[c] = obj
		}
	})
	var total float64
	for _, v := range partial {
		total += v
	}
	return total
}

// splitEmpty re-seeds every empty cluster from a large one, FAISS's
// split_clusters: a fresh mt19937(1234) per call draws, cycling over the
// clusters, cj with probability (size_cj − 1)/(n − k); the empty centroid
// copies cj's, the two are pushed apart by ×(1 ± 1/1024) on alternate
// components, and cj's size is shared between them. It returns how many
// clusters it re-seeded.
func splitEmpty(cent, hassign []float32, n, d, k int) int {
	const eps = 1.0 / 1024
	rng := newMT19937(1234)
	splits := 0
	for ci := range k {
		if hassign[ci] != 0 {
			continue
		}
		cj := 0
		for ; ; cj = (cj + 1) % k {
			p := (hassign[cj] - 1) / float32(n-k)
			if rng.float() < p {
				break
			}
		}
		a, b := cent[ci*d:(ci+1)*d], cent[cj*d:(cj+1)*d]
		copy(a, b)
		for j := range d {
			if j%2 == 0 {
				a[j] *= 1 + eps
				b[j] *= 1 - eps
			} else {
				a[j] *= 1 - eps
				b[j] *= 1 + eps
			}
		}
		hassign[ci] = hassign[cj] / 2
		hassign[cj] -= hassign[ci]
		splits++
	}
	return splits
}

// kmeansPlusPlus seeds cent with D² sampling over at most 16·k points.
func kmeansPlusPlus(cent, x []float32, n, d, k int, rng *rand.Rand) {
	m := min(n, 16*k)
	cand := x
	if m < n {
		cand = sampleRows(x, d, n, m, rng)
	}
	dist := make([]float64, m)
	for i := range dist {
		dist[i] = math.Inf(1)
	}
	first := rng.IntN(m)
	copy(cent[:d], cand[first*d:(first+1)*d])
	for c := 1; c < k; c++ {
		prev := cent[(c-1)*d : c*d]
		var total float64
		for i := range m {
			xi := cand[i*d : (i+1)*d]
			var s float64
			for j, v := range xi {
				diff := float64(v - prev[j])
				s += diff * diff
			}
			dist[i] = min(dist[i], s)
			total += dist[i]
		}
		next := 0
		if total > 0 {
			r := rng.Float64() * total
			for next = 0; next < m-1; next++ {
				r -= dist[next]
				if r < 0 {
					break
				}
			}
		} else {
			next = rng.IntN(m)
		}
		copy(cent[c*d:(c+1)*d], cand[next*d:(next+1)*d])
	}
}

// samplePositions returns m distinct positions of 0…n−1 in random order
// (a partial Fisher–Yates shuffle over a sparse map).
func samplePositions(n, m int, rng *rand.Rand) []int {
	swapped := make(map[int]int, m)
	get := func(i int) int {
		if v, ok := swapped[i]; ok {
			return v
		}
		return i
	}
	out := make([]int, m)
	for i := range m {
		j := i + rng.IntN(n-i)
		vi, vj := get(i), get(j)
		swapped[j] = vi
		out[i] = vj
	}
	return out
}

// sampleRows copies m random rows of x (n rows of d), in increasing row
// order.
func sampleRows(x []float32, d, n, m int, rng *rand.Rand) []float32 {
	pos := samplePositions(n, m, rng)
	slices.Sort(pos)
	out := make([]float32, m*d)
	for i, j := range pos {
		copy(out[i*d:(i+1)*d], x[j*d:(j+1)*d])
	}
	return out
}

// newRand returns the package's seeded generator.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6b6d65616e73)) }
