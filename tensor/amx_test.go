package tensor

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestDotBF16Panels checks the packed bfloat16 products, on AMX where this
// CPU and kernel allow it and on the plain loop, against a float64
// reference over odd shapes (rows, queries and components below, at and
// past the 16/32 tile edges), and that the padding scores zero.
func TestDotBF16Panels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	sets := map[string]amxBlockFunc{"plain": nil}
	if amxKernel != nil {
		sets["amx"] = amxKernel
	} else {
		t.Log("no AMX-BF16 here: only the plain loop is tested")
	}
	var p BF16Panels
	var scratch []float32
	for name, ks := range sets {
		for _, m := range []int{1, 17, 32, 33, 70} {
			for _, n := range []int{1, 15, 16, 33, 64, 100} {
				for _, k := range []int{1, 7, 32, 40, 64, 768} {
					q := randF32(rng, m*k)
					x := randF32(rng, n*k)
					h := make([]uint16, n*k)
					EncodeF16(h, x)
					// Half the cases pack F16 codes, half float32.
					if (m+n+k)%2 == 0 {
						scratch = p.PackF16(h, n, k, scratch)
						DecodeF16(x, h)
					} else {
						p.PackF32(x, n, k)
					}
					qb := PadBF16Queries(nil, q, m, k)
					ldo := p.NPad + 5
					out := make([]float32, (roundUp32(m)-1)*ldo+p.NPad)
					dotBF16Panels(ks, out, ldo, qb, m, &p)
					for i := range roundUp32(m) {
						for j := range p.NPad {
							var ref, mag float64
							if i < m && j < n {
								for c := range k {
									v := float64(BF16ToF32(F32ToBF16(q[i*k+c]))) * float64(BF16ToF32(F32ToBF16(x[j*k+c])))
									ref += v
									mag += math.Abs(v)
								}
							}
							if got := float64(out[i*ldo+j]); math.Abs(got-ref) > 1e-5*mag+1e-6 {
								t.Fatalf("%s m=%d n=%d k=%d: out[%d][%d] = %v, reference %v", name, m, n, k, i, j, got, ref)
							}
						}
					}
				}
			}
		}
	}
}

// TestAMXAcrossGoroutines runs AMX products on many goroutines at once
// (each call configures, uses and releases the tiles itself): results stay
// exact under preemption and thread switches.
func TestAMXAcrossGoroutines(t *testing.T) {
	if amxKernel == nil {
		t.Skip("no AMX-BF16")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	const m, n, k = 64, 96, 256
	q, x := randF32(rng, m*k), randF32(rng, n*k)
	var p BF16Panels
	p.PackF32(x, n, k)
	qb := PadBF16Queries(nil, q, m, k)
	want := make([]float32, m*p.NPad)
	dotBF16Panels(nil, want, p.NPad, qb, m, &p)
	done := make(chan string, 8)
	for g := range 8 {
		go func() {
			out := make([]float32, m*p.NPad)
			for it := range 200 {
				DotBF16Panels(out, p.NPad, qb, m, &p)
				for i, v := range out {
					if math.Abs(float64(v-want[i])) > 1e-3 {
						done <- "goroutine mismatch"
						return
					}
				}
				if it%16 == g%16 {
					runtime.Gosched()
				}
			}
			done <- ""
		}()
	}
	for range 8 {
		if msg := <-done; msg != "" {
			t.Fatal(msg)
		}
	}
}

// TestPackF16MatchesRows: the panel path of PackF16 (rows converted in
// bulk, then a word transpose) packs the same bits as row-by-row packing,
// for row counts around the 16-row panels and odd widths, reusing storage
// from a larger pack.
func TestPackF16MatchesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var got, want BF16Panels
	var scratch []float32
	for _, n := range []int{1, 15, 16, 17, 33, 48, 100} {
		for _, k := range []int{1, 7, 31, 32, 33, 768} {
			x := randF32(rng, n*k)
			h := make([]uint16, n*k)
			EncodeF16(h, x)
			h[0] = 0x7e01 // a NaN code keeps its bits through the transpose
			scratch = got.PackF16(h, n, k, scratch)
			want.packF16Rows(h, n, k)
			if got.N != want.N || got.KPad != want.KPad || len(got.Data) != len(want.Data) {
				t.Fatalf("n=%d k=%d: shape %d×%d (%d), want %d×%d (%d)", n, k, got.N, got.KPad, len(got.Data), want.N, want.KPad, len(want.Data))
			}
			for i := range got.Data {
				if got.Data[i] != want.Data[i] {
					t.Fatalf("n=%d k=%d: Data[%d] = %#04x, want %#04x", n, k, i, got.Data[i], want.Data[i])
				}
			}
		}
	}
}
