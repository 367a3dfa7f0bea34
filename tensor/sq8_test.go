package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSQ8RoundTripAndDot(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{1, 3, 8, 17, 768} {
		n := 50
		x := randVec(r, n*d)
		sq, err := TrainSQ8(x, d)
		if err != nil {
			t.Fatal(err)
		}
		codes := make([]uint8, len(x))
		sq.Encode(codes, x)
		dec := make([]float32, len(x))
		sq.Decode(dec, codes)
		for i := range x {
			dim := i % d
			if err := math.Abs(float64(dec[i] - x[i])); err > float64(sq.Scale[dim])/2*1.0001+1e-7 {
				t.Fatalf("d=%d: |x̂−x| = %v > scale/2 = %v", d, err, sq.Scale[dim]/2)
			}
		}
		// ⟨q, x̂⟩ through the prepared query equals the decoded dot product.
		q := randVec(r, d)
		qs := make([]float32, d)
		bias := sq.PrepareQuery(qs, q)
		got := make([]float32, n)
		DotRowsU8(got, qs, codes)
		for j := range n {
			want := refDot(q, dec[j*d:(j+1)*d])
			if math.Abs(float64(bias+got[j])-want) > 1e-4*math.Sqrt(float64(d)) {
				t.Fatalf("d=%d row %d: %v want %v", d, j, bias+got[j], want)
			}
		}
	}
}

func TestSQ8EdgeCases(t *testing.T) {
	cases := []struct {
		name string
		x    []float32
		d    int
		ok   bool
	}{
		{"empty", nil, 4, false},
		{"zero dim", []float32{1}, 0, false},
		{"ragged", []float32{1, 2, 3}, 2, false},
		{"nan", []float32{1, float32(math.NaN())}, 2, false},
		{"constant", []float32{2, 2, 2, 2}, 2, true},
	}
	for _, c := range cases {
		sq, err := TrainSQ8(c.x, c.d)
		if (err == nil) != c.ok {
			t.Fatalf("%s: err = %v", c.name, err)
		}
		if err == nil {
			if err := sq.Validate(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			codes := make([]uint8, 2)
			sq.Encode(codes, []float32{2, 5})
			dec := make([]float32, 2)
			sq.Decode(dec, codes)
			if dec[0] != 2 || dec[1] != 2 {
				t.Fatalf("%s: constant dims decode to %v", c.name, dec)
			}
		}
	}
	bad := &SQ8{Min: []float32{0, 0}, Scale: []float32{1}}
	if bad.Validate() == nil {
		t.Fatal("mismatched SQ8 validated")
	}
	// Out-of-range and NaN inputs clamp instead of wrapping.
	sq := &SQ8{Min: []float32{0}, Scale: []float32{1}}
	codes := make([]uint8, 3)
	sq.Encode(codes, []float32{-5, 1e9, float32(math.NaN())})
	if codes[0] != 0 || codes[1] != 255 || codes[2] != 0 {
		t.Fatalf("clamping: %v", codes)
	}
}

func BenchmarkDotRowsU8(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	n, d := 100_000, 768
	q := randVec(r, d)
	x := make([]uint8, n*d)
	for i := range x {
		x[i] = uint8(r.IntN(256))
	}
	out := make([]float32, n)
	b.SetBytes(int64(len(x)))
	for b.Loop() {
		ParallelFor(n, 0, 256, func(_, lo, hi int) { DotRowsU8(out[lo:hi], q, x[lo*d:]) })
	}
}

func BenchmarkSQ8Encode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	d := 768
	x := randVec(r, 256*d)
	sq, _ := TrainSQ8(x, d)
	codes := make([]uint8, len(x))
	b.SetBytes(int64(len(x) * 4))
	for b.Loop() {
		sq.Encode(codes, x)
	}
}
