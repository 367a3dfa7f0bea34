package vector

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cas-engine/cas/internal/vectest"
)

// blobs returns k well-separated Gaussian clusters of m points each, and
// the true label of every point.
func blobs(k, m, d int, seed uint64) ([]float32, []int) {
	rng := rand.New(rand.NewPCG(seed, 5))
	x := make([]float32, 0, k*m*d)
	labels := make([]int, 0, k*m)
	for c := range k {
		center := make([]float32, d)
		for j := range center {
			center[j] = float32(rng.NormFloat64() * 10)
		}
		for range m {
			for j := range d {
				x = append(x, center[j]+float32(rng.NormFloat64()*0.1))
			}
			labels = append(labels, c)
		}
	}
	return x, labels
}

func TestKMeansRecoversBlobs(t *testing.T) {
	for _, init := range []KMeansInit{KMeansRandom, KMeansPlusPlus} {
		k, m, d := 6, 50, 5
		x, labels := blobs(k, m, d, 1)
		res, err := KMeans(x, d, k, KMeansOptions{Metric: L2, Init: init, Seed: 3, Iterations: 20})
		if err != nil {
			t.Fatal(err)
		}
		assign := make([]int32, len(labels))
		assignPoints(assign, x, res.Centroids, len(labels), d, k, L2, 1)
		// Every true cluster maps to one centroid and vice versa (random
		// init may merge two blobs; k-means++ should not, and then the
		// mapping is a bijection).
		seen := map[int]int32{}
		pure := true
		for i, l := range labels {
			if c, ok := seen[l]; ok && c != assign[i] {
				pure = false
			}
			seen[l] = assign[i]
		}
		distinct := map[int32]bool{}
		for _, c := range seen {
			distinct[c] = true
		}
		if init == KMeansPlusPlus && (!pure || len(distinct) != k) {
			t.Fatalf("k-means++: clusters not recovered (pure %v, %d distinct)", pure, len(distinct))
		}
		for i := 1; i < len(res.Objective); i++ {
			if res.Objective[i] > res.Objective[i-1]*(1+1e-6)+1e-9 {
				t.Fatalf("init %d: L2 objective rose at iteration %d: %v", init, i, res.Objective)
			}
		}
	}
}

func TestKMeansSphericalAndDeterministic(t *testing.T) {
	d, k := 16, 20
	x := vectest.LowRank(3000, d, 4, 7)
	var first []float32
	for _, threads := range []int{1, 2, 3} {
		res, err := KMeans(x, d, k, KMeansOptions{Metric: InnerProduct, Spherical: true, Seed: 9, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		for c := range k {
			row := res.Centroids[c*d : (c+1)*d]
			var n float64
			for _, v := range row {
				n += float64(v) * float64(v)
			}
			if math.Abs(n-1) > 1e-5 {
				t.Fatalf("centroid %d has norm² %v", c, n)
			}
		}
		for i := 1; i < len(res.Objective); i++ {
			if res.Objective[i] < res.Objective[i-1]*(1-1e-6) {
				t.Fatalf("spherical objective fell at iteration %d: %v", i, res.Objective)
			}
		}
		if first == nil {
			first = res.Centroids
		} else if !slices.Equal(first, res.Centroids) {
			t.Fatalf("threads=%d changed the centroids", threads)
		}
	}
}

func TestKMeansSplitsEmptyClusters(t *testing.T) {
	// 400 points on 3 distinct locations, 10 centroids: random init picks
	// duplicates, so clusters go empty and must be re-seeded.
	d := 4
	var x []float32
	for i := range 400 {
		v := float32(i % 3)
		x = append(x, v, v*2, -v, 1)
	}
	res, err := KMeans(x, d, 10, KMeansOptions{Metric: L2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Splits == 0 {
		t.Fatal("no empty cluster was re-seeded")
	}
	for i, v := range res.Centroids {
		if math.IsNaN(float64(v)) {
			t.Fatalf("centroid value %d is NaN", i)
		}
	}
}

func TestKMeansSubsampleAndErrors(t *testing.T) {
	d := 3
	x := vectest.LowRank(1000, d, 2, 3)
	res, err := KMeans(x, d, 4, KMeansOptions{MaxPointsPerCentroid: 50, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Points != 200 {
		t.Fatalf("trained on %d points, want 4×50", res.Points)
	}
	bad := []struct {
		name string
		x    []float32
		d, k int
		opt  KMeansOptions
	}{
		{"k=0", x, d, 0, KMeansOptions{}},
		{"n<k", x[:3*d], d, 4, KMeansOptions{}},
		{"ragged", x[:10], d, 2, KMeansOptions{}},
		{"nan", []float32{1, float32(math.NaN()), 0, 1, 2, 3}, d, 1, KMeansOptions{}},
		{"init", x, d, 2, KMeansOptions{Init: 9}},
		{"metric", x, d, 2, KMeansOptions{Metric: 5}},
	}
	for _, c := range bad {
		if _, err := KMeans(c.x, c.d, c.k, c.opt); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func TestSamplePositions(t *testing.T) {
	rng := newRand(1)
	for _, c := range []struct{ n, m int }{{10, 10}, {1000, 7}, {5, 0}} {
		p := samplePositions(c.n, c.m, rng)
		seen := map[int]bool{}
		for _, v := range p {
			if v < 0 || v >= c.n || seen[v] {
				t.Fatalf("%+v: bad or repeated position %d in %v", c, v, p)
			}
			seen[v] = true
		}
		if len(p) != c.m {
			t.Fatalf("%+v: %d positions", c, len(p))
		}
	}
}

func BenchmarkKMeansAssign(b *testing.B) {
	d, n, k := 768, 9600, 1024
	x := vectest.LowRank(n, d, 48, 1)
	cent := x[:k*d]
	assign := make([]int32, n)
	for b.Loop() {
		assignPoints(assign, x, cent, n, d, k, InnerProduct, 0)
	}
	b.ReportMetric(float64(2*n*k*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
