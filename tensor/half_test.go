package tensor

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// refF16ToF32 decodes binary16 by its definition: (−1)^s · 2^(e−15) · 1.m, or
// 2^−14 · 0.m for subnormals.
func refF16ToF32(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return s * math.Inf(1)
	case 0:
		return s * math.Ldexp(m/1024, -14)
	}
	return s * math.Ldexp(1+m/1024, e-15)
}

// refF32ToF16 rounds by exhaustive comparison with the neighbouring
// representable halves, using exact big.Float arithmetic (ties to even).
func refF32ToF16(f float32) uint16 {
	v := float64(f)
	if math.IsNaN(v) {
		return 0x7e00
	}
	sign := uint16(0)
	if math.Signbit(v) {
		sign = 0x8000
		v = -v
	}
	if v >= 65520 { // halfway between 65504 and 2^16 rounds up to Inf
		return sign | 0x7c00
	}
	// Halves are monotone in their bit pattern for positive values: binary
	// search the largest pattern ≤ v.
	lo, hi := uint16(0), uint16(0x7bff)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if refF16ToF32(mid) <= v {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	a := refF16ToF32(lo)
	if a == v || lo == 0x7bff {
		return sign | lo
	}
	b := refF16ToF32(lo + 1)
	da := new(big.Float).Sub(big.NewFloat(v), big.NewFloat(a))
	db := new(big.Float).Sub(big.NewFloat(b), big.NewFloat(v))
	switch da.Cmp(db) {
	case -1:
		return sign | lo
	case 1:
		return sign | (lo + 1)
	}
	if lo&1 == 0 {
		return sign | lo
	}
	return sign | (lo + 1)
}

func TestF16DecodeAllPatterns(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	for _, ks := range kernelSets() {
		dst := make([]float32, len(src))
		ks.f16to32(dst, src)
		for i, h := range src {
			want := refF16ToF32(h)
			got := dst[i]
			if math.IsNaN(want) {
				if !math.IsNaN(float64(got)) {
					t.Fatalf("%s: %#04x -> %v, want NaN", ks.name, h, got)
				}
				continue
			}
			if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
				t.Fatalf("%s: %#04x -> %v, want %v", ks.name, h, got, want)
			}
			if got != F16ToF32(h) {
				t.Fatalf("%s: %#04x -> %v, scalar %v", ks.name, h, got, F16ToF32(h))
			}
		}
	}
}

func TestF16EncodeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var src []float32
	// Every half, every midpoint between neighbours (ties), ±1 ulp of each,
	// specials, and random float32s across the exponent range.
	for h := range uint16(0x7c00) {
		a := refF16ToF32(h)
		b := refF16ToF32(h + 1)
		mid := float32((a + b) / 2)
		src = append(src, float32(a), mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9), -mid)
	}
	src = append(src, 0, float32(math.Copysign(0, -1)), 65504, 65519.99, 65520, 1e9, -1e9,
		float32(math.Inf(1)), float32(math.Inf(-1)), 1e-8, 2.98e-8, 5.96e-8, -3e-8, math.SmallestNonzeroFloat32)
	for range 20000 {
		src = append(src, math.Float32frombits(r.Uint32()&0x7fffffff|r.Uint32()&0x80000000))
	}
	for _, ks := range kernelSets() {
		// Odd length so the tail path runs too.
		for _, n := range []int{len(src), len(src) - 3, 5, 0} {
			dst := make([]uint16, n)
			ks.f32to16(dst, src[:n])
			for i := range n {
				f := src[i]
				want := refF32ToF16(f)
				got := dst[i]
				if math.IsNaN(float64(f)) {
					if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
						t.Fatalf("%s: NaN %#08x -> %#04x", ks.name, math.Float32bits(f), got)
					}
					continue
				}
				if got != want {
					t.Fatalf("%s: %v (%#08x) -> %#04x, want %#04x", ks.name, f, math.Float32bits(f), got, want)
				}
			}
		}
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {0, 0}, {float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81},
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // rounds to Inf
	}
	for _, c := range cases {
		if got := F32ToBF16(c.in); got != c.want {
			t.Errorf("F32ToBF16(%v) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	if got := F32ToBF16(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("NaN -> %#04x", got)
	}
	for h := range uint32(1 << 16) {
		f := BF16ToF32(uint16(h))
		if uint16(h)&0x7f80 == 0x7f80 && uint16(h)&0x7f != 0 {
			continue
		}
		if back := F32ToBF16(f); back != uint16(h) {
			t.Fatalf("bf16 round trip %#04x -> %v -> %#04x", h, f, back)
		}
	}
	src := []float32{1.5, -3.25, 1e-3}
	enc := make([]uint16, 3)
	EncodeBF16(enc, src)
	dec := make([]float32, 3)
	DecodeBF16(dec, enc)
	for i := range src {
		if math.Abs(float64(dec[i]-src[i])) > math.Abs(float64(src[i]))/128 {
			t.Errorf("bf16 %v -> %v", src[i], dec[i])
		}
	}
}

func TestDecodeBF16AllPatterns(t *testing.T) {
	src := make([]uint16, 1<<16+3)
	for i := range src {
		src[i] = uint16(i)
	}
	for _, ks := range kernelSets() {
		for _, n := range []int{0, 5, len(src)} {
			dst := make([]float32, n)
			ks.bf16to32(dst, src[:n])
			for i := range n {
				if want := math.Float32frombits(uint32(src[i]) << 16); math.Float32bits(dst[i]) != math.Float32bits(want) {
					t.Fatalf("%s: %#04x -> %#08x, want %#08x", ks.name, src[i], math.Float32bits(dst[i]), math.Float32bits(want))
				}
			}
		}
	}
}

func TestDecodeU8(t *testing.T) {
	for _, ks := range kernelSets() {
		for _, n := range []int{0, 1, 7, 8, 9, 300} {
			src := make([]uint8, n)
			for i := range src {
				src[i] = uint8(i * 37)
			}
			dst := make([]float32, n)
			ks.u8to32(dst, src)
			for i := range n {
				if dst[i] != float32(src[i]) {
					t.Fatalf("%s n=%d: %d -> %v", ks.name, n, src[i], dst[i])
				}
			}
		}
	}
}

// BenchmarkHalf measures the float32 ↔ float16/bfloat16 conversions of
// 64 Ki elements (bytes/s of the source).
func BenchmarkHalf(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	f32 := randVec(r, 1<<16)
	f16 := make([]uint16, len(f32))
	EncodeF16(f16, f32)
	bf16 := make([]uint16, len(f32))
	for i := range bf16 {
		bf16[i] = uint16(i)
	}
	dst16, dst32 := make([]uint16, len(f32)), make([]float32, len(f32))
	for _, bc := range []struct {
		name     string
		srcBytes int
		run      func()
	}{
		{"EncodeF16", 4, func() { EncodeF16(dst16, f32) }},
		{"DecodeF16", 2, func() { DecodeF16(dst32, f16) }},
		{"EncodeBF16", 4, func() { EncodeBF16(dst16, f32) }},
		{"DecodeBF16", 2, func() { DecodeBF16(dst32, bf16) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(f32) * bc.srcBytes))
			for b.Loop() {
				bc.run()
			}
		})
	}
}
