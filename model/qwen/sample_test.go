package qwen

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSamplerFilters checks which tokens each filter can return and that
// sampling frequencies follow the renormalised probabilities.
func TestSamplerFilters(t *testing.T) {
	// probabilities ∝ 8, 4, 2, 1, 1 (logits are their logs)
	logits := []float32{float32(math.Log(8)), float32(math.Log(4)), float32(math.Log(2)), 0, 0}
	for _, tc := range []struct {
		name string
		opts GenerateOptions
		want []float64 // expected frequency per token
	}{
		{"greedy", GenerateOptions{}, []float64{1, 0, 0, 0, 0}},
		{"full", GenerateOptions{Temperature: 1}, []float64{8.0 / 16, 4.0 / 16, 2.0 / 16, 1.0 / 16, 1.0 / 16}},
		{"top-k 2", GenerateOptions{Temperature: 1, TopK: 2}, []float64{8.0 / 12, 4.0 / 12, 0, 0, 0}},
		{"top-k 4 keeps ties", GenerateOptions{Temperature: 1, TopK: 4}, []float64{8.0 / 16, 4.0 / 16, 2.0 / 16, 1.0 / 16, 1.0 / 16}},
		// mass 0.5, 0.75, 0.875: p = 0.7 keeps the first two
		{"top-p 0.7", GenerateOptions{Temperature: 1, TopP: 0.7}, []float64{8.0 / 12, 4.0 / 12, 0, 0, 0}},
		{"top-p 0.5 keeps one", GenerateOptions{Temperature: 1, TopP: 0.5}, []float64{1, 0, 0, 0, 0}},
		// temperature 0.5 squares the probabilities: 64, 16, 4, 1, 1
		{"temperature", GenerateOptions{Temperature: 0.5}, []float64{64.0 / 86, 16.0 / 86, 4.0 / 86, 1.0 / 86, 1.0 / 86}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSampler(tc.opts)
			rng := rand.New(rand.NewPCG(3, 4))
			const n = 20000
			counts := make([]float64, len(logits))
			for range n {
				id, lp := s.sample(logits, rng)
				counts[id]++
				want := math.Log(float64([]float64{8, 4, 2, 1, 1}[id]) / 16)
				if math.Abs(float64(lp)-want) > 1e-6 {
					t.Fatalf("token %d log-prob %g, want %g (unfiltered model distribution)", id, lp, want)
				}
			}
			for i, p := range tc.want {
				got := counts[i] / n
				// 5 standard errors of a binomial proportion
				if tol := 5*math.Sqrt(p*(1-p)/n) + 1e-9; math.Abs(got-p) > tol {
					t.Errorf("token %d frequency %.4f, want %.4f ± %.4f", i, got, p, tol)
				}
			}
		})
	}
}

// BenchmarkSampleTopP samples from a Qwen-sized vocabulary with Zipf-like
// logits (−1.5·log rank, shuffled): a flat-tailed next-token distribution
// that keeps ~40 tokens at top-p 0.95.
func BenchmarkSampleTopP(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(-1.5 * math.Log(float64(i+1)))
	}
	rng.Shuffle(len(logits), func(i, j int) { logits[i], logits[j] = logits[j], logits[i] })
	s := newSampler(GenerateOptions{Temperature: 1, TopP: 0.95, TopK: 0})
	for b.Loop() {
		s.sample(logits, rng)
	}
}

// TestLogSoftmaxAt checks the log-probability Generate reports for a
// sampled token (tensor.LogSumExp's float32 exponentials) against the
// all-float64 value, over Qwen-sized vocabularies of logits at the scales
// models produce.
func TestLogSoftmaxAt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	worst := 0.0
	for _, v := range []int{1, 7, 4096, 16384, 151936} {
		for _, scale := range []float64{0.1, 3, 30} {
			logits := make([]float32, v)
			for i := range logits {
				logits[i] = float32(r.NormFloat64() * scale)
			}
			m := math.Inf(-1)
			for _, x := range logits {
				m = math.Max(m, float64(x))
			}
			s := 0.0
			for _, x := range logits {
				s += math.Exp(float64(x) - m)
			}
			lse := m + math.Log(s)
			for _, i := range []int{0, v / 2, v - 1} {
				want := float64(logits[i]) - lse
				got := float64(logSoftmaxAt(logits, i))
				d := math.Abs(got - want)
				worst = max(worst, d/math.Max(1, math.Abs(want)))
				if !(d <= 4e-7*math.Max(1, math.Abs(want))) {
					t.Fatalf("V=%d scale %g: log p[%d] = %.9g, want %.9g", v, scale, i, got, want)
				}
			}
		}
	}
	t.Logf("largest relative difference from float64: %.2g", worst)
}

// argmaxRef is the plain scan argmax must match.
func argmaxRef(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// TestArgmax compares argmax with the scan over random rows of odd sizes,
// with ties, ±0, ±Inf and NaN anywhere (x[0] included).
func TestArgmax(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 100, 1000, 16384} {
		for trial := range 200 {
			x := make([]float32, n)
			for i := range x {
				switch r.IntN(12) {
				case 0:
					x[i] = nan
				case 1:
					x[i] = inf
				case 2:
					x[i] = -inf
				case 3:
					x[i] = float32(math.Copysign(0, -1))
				case 4:
					x[i] = 0
				default:
					x[i] = float32(r.IntN(5)) // ties
				}
				if trial%3 == 0 {
					x[i] = r.Float32()
				}
			}
			if got, want := argmax(x), argmaxRef(x); got != want {
				t.Fatalf("n=%d trial %d: argmax %d, scan %d (%v)", n, trial, got, want, x)
			}
		}
	}
}

// BenchmarkArgmax times argmax and the scan over a vocabulary of logits.
func BenchmarkArgmax(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 16384)
	for i := range x {
		x[i] = r.Float32()*20 - 10
	}
	for _, f := range []struct {
		name string
		f    func([]float32) int
	}{{"argmax", argmax}, {"scan", argmaxRef}} {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				f.f(x)
			}
		})
	}
}
