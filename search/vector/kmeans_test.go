package vector

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

// TestKMeansMatchesFAISS runs only where python3 with faiss is installed
// (the peer; CI does not require it): FAISS's Clustering (10 iterations,
// seed 1234, spherical with inner-product assignment as IndexIVFFlat
// trains its quantizer; then plain L2 as ProductQuantizer does, with a
// subsample) and our KMeans on the same points draw the same subsample,
// initial centroids and splits, so they end on the same centroids up to
// float rounding (L2: bit for bit here), and the same assignment for
// almost every point.
func TestKMeansMatchesFAISS(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import faiss, numpy").Run(); err != nil {
		t.Skip("python3 with faiss and numpy not available")
	}
	dir := t.TempDir()
	x := vectest.LowRank(6000, 32, 6, 17)
	if err := WriteVectorFile(filepath.Join(dir, "x.f32"), x); err != nil {
		t.Fatal(err)
	}
	script := `
import sys, numpy as np, faiss
d = sys.argv[1]
x = np.fromfile(d + "/x.f32", dtype="float32").reshape(-1, 32)
for name, k, sph, ip, maxp in [("ip", 64, True, True, 256), ("l2", 100, False, False, 40)]:
    cp = faiss.ClusteringParameters(); cp.niter = 10; cp.seed = 1234; cp.spherical = sph; cp.max_points_per_centroid = maxp
    c = faiss.Clustering(32, k, cp)
    c.train(x, faiss.IndexFlatIP(32) if ip else faiss.IndexFlatL2(32))
    faiss.vector_to_array(c.centroids).astype("float32").tofile(d + "/" + name + ".f32")
`
	cmd := exec.Command(py, "-c", script, dir)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("faiss: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name    string
		k       int
		opt     KMeansOptions
		minSame int
	}{
		// Spherical: renormalising each centroid rounds differently from
		// FAISS's SIMD norm in the last bit, which moves a few
		// near-boundary points and lets the runs drift apart slightly.
		{"ip", 64, KMeansOptions{Seed: 1234, Metric: InnerProduct, Spherical: true}, 5700},
		{"l2", 100, KMeansOptions{Seed: 1234, Metric: L2, MaxPointsPerCentroid: 40}, 5990},
	} {
		want, err := ReadVectorFile(filepath.Join(dir, c.name+".f32"), 32)
		if err != nil {
			t.Fatal(err)
		}
		got, err := KMeans(x, 32, c.k, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		var maxDiff float64
		for i := range got.Centroids {
			maxDiff = max(maxDiff, math.Abs(float64(got.Centroids[i]-want[i])))
		}
		// The same points in the same clusters (by index).
		ours, theirs := make([]int32, 6000), make([]int32, 6000)
		assignPoints(ours, x, got.Centroids, 6000, 32, c.k, c.opt.Metric, 1)
		assignPoints(theirs, x, want, 6000, 32, c.k, c.opt.Metric, 1)
		same := 0
		for i := range ours {
			if ours[i] == theirs[i] {
				same++
			}
		}
		t.Logf("%s: largest centroid component difference %.2g; %d/6000 points in the same cluster", c.name, maxDiff, same)
		if same < c.minSame {
			t.Errorf("%s: %d/6000 points in the same cluster as FAISS's, want ≥ %d", c.name, same, c.minSame)
		}
	}
}

// BenchmarkKMeansAssignCPUTime compares, in process CPU time (best of the
// iterations, interleaved), the assignment of 9,600 points of E5's width
// to 1,024 centroids on the F32 GEMM and screened on AMX-BF16 (where the
// CPU has it).
//
//	go test -run '^$' -bench KMeansAssignCPUTime -benchtime 5x ./search/vector/
func BenchmarkKMeansAssignCPUTime(b *testing.B) {
	d, n, k := 768, 9600, 1024
	x := vectest.LowRank(n, d, 48, 1)
	cent := x[:k*d]
	assign := make([]int32, n)
	flops := float64(2 * n * k * d)
	for _, th := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads%d", th), func(b *testing.B) {
			bestG, bestS := time.Duration(1<<62), time.Duration(1<<62)
			for b.Loop() {
				bestG = min(bestG, cpuTime(func() { assignGEMM(assign, x, cent, nil, n, d, k, InnerProduct, th) }))
				if useScreenAssign(k) {
					bestS = min(bestS, cpuTime(func() { assignScreened(assign, x, cent, nil, n, d, k, InnerProduct, th) }))
				}
			}
			b.ReportMetric(flops/bestG.Seconds()/1e9, "gemm-GFLOP/cpu-s")
			if useScreenAssign(k) {
				b.ReportMetric(flops/bestS.Seconds()/1e9, "screened-GFLOP/cpu-s")
			}
		})
	}
}
