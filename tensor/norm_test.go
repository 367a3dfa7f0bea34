package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestL2Normalize(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, d := range []int{1, 7, 768} {
		x := randVec(r, 3*d)
		copy(x[d:2*d], make([]float32, d)) // an all-zero row stays zero
		orig := append([]float32(nil), x...)
		L2Normalize(x, d)
		for j := range 3 {
			row, o := x[j*d:(j+1)*d], orig[j*d:(j+1)*d]
			n := math.Sqrt(refDot(o, o))
			for i := range row {
				want := 0.0
				if n > 0 {
					want = float64(o[i]) / n
				}
				if math.Abs(float64(row[i])-want) > 1e-6 {
					t.Fatalf("d=%d row %d[%d]: %v want %v", d, j, i, row[i], want)
				}
			}
		}
	}
	L2Normalize(nil, 4)
	L2Normalize([]float32{1, 2}, 0)
}

func TestSquaredNorms(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for _, d := range []int{0, 5, 768} {
		x := randVec(r, 4*d)
		got := make([]float32, 4)
		SquaredNorms(got, x, d)
		for j := range 4 {
			row := x[j*d : (j+1)*d]
			if want := refDot(row, row); math.Abs(float64(got[j])-want) > tol(row, row) {
				t.Fatalf("d=%d row %d: %v want %v", d, j, got[j], want)
			}
		}
	}
}

func refSoftmax(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	out := make([]float64, len(x))
	var s float64
	for i, v := range x {
		out[i] = math.Exp(float64(v) - m)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

func TestSoftmax(t *testing.T) {
	cases := [][]float32{
		{},
		{0},
		{1, 2, 3},
		{1000, 1000, -1000},
		{-1e30, 0, 1e-3, float32(math.Inf(-1))},
		{5, 5, 5, 5, 5, 5, 5},
		// Shifted values between −104 and −88, where vek's exp returns
		// large negative numbers, and around float32's underflow.
		{0, -90, -95, -100, -103, -87.2, -87.4, -88, -200},
	}
	r := rand.New(rand.NewPCG(35, 36))
	cases = append(cases, randVec(r, 1001))
	for _, c := range cases {
		want := refSoftmax(c)
		got := append([]float32(nil), c...)
		Softmax(got)
		var sum float64
		for i := range got {
			sum += float64(got[i])
			if math.Abs(float64(got[i])-want[i]) > 1e-6 {
				t.Fatalf("softmax(%v)[%d] = %v want %v", c, i, got[i], want[i])
			}
		}
		if len(c) > 0 && math.Abs(sum-1) > 1e-5 {
			t.Fatalf("softmax(%v) sums to %v", c, sum)
		}
		ls := append([]float32(nil), c...)
		LogSoftmax(ls)
		for i := range ls {
			if want[i] == 0 {
				if !math.IsInf(float64(ls[i]), -1) && ls[i] > -80 {
					t.Fatalf("logsoftmax(%v)[%d] = %v want -Inf", c, i, ls[i])
				}
				continue
			}
			if math.Abs(float64(ls[i])-math.Log(want[i])) > 1e-4 {
				t.Fatalf("logsoftmax(%v)[%d] = %v want %v", c, i, ls[i], math.Log(want[i]))
			}
		}
	}
	for _, c := range append(cases, []float32{float32(math.Inf(-1))}, randVec(r, 16384)) {
		m, s := math.Inf(-1), 0.0
		for _, v := range c {
			m = math.Max(m, float64(v))
		}
		for _, v := range c {
			s += math.Exp(float64(v) - m)
		}
		want := m + math.Log(s)
		got := LogSumExp(c)
		if math.IsInf(want, -1) || math.IsNaN(want) {
			if !math.IsInf(got, -1) {
				t.Fatalf("logsumexp(%v) = %v, want -Inf", c, got)
			}
			continue
		}
		if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Fatalf("logsumexp of %d values = %v, want %v", len(c), got, want)
		}
	}
	allNegInf := []float32{float32(math.Inf(-1)), float32(math.Inf(-1))}
	Softmax(allNegInf)
	if allNegInf[0] != 0.5 || allNegInf[1] != 0.5 {
		t.Fatalf("all −Inf: %v", allNegInf)
	}
}

func BenchmarkSoftmax(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	x := randVec(r, 151_936)
	y := make([]float32, len(x))
	for b.Loop() {
		copy(y, x)
		Softmax(y)
	}
}

func BenchmarkL2Normalize(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	x := randVec(r, 1024*768)
	for b.Loop() {
		L2Normalize(x, 768)
	}
}
