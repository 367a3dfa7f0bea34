package tensor

import "math"

// F16ToF32 converts an IEEE 754 binary16 bit pattern to float32 exactly
// (subnormals, ±Inf and NaN included; NaNs come back quiet).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		if mant != 0 {
			return math.Float32frombits(sign | 0x7fc00000 | mant<<13)
		}
		return math.Float32frombits(sign | 0x7f800000)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
}

// F32ToF16 converts a float32 to the nearest binary16, ties to even, as the
// F16C instruction VCVTPS2PH does with rounding mode 0: magnitudes from
// 65520 up become ±Inf, values below 2⁻²⁵ flush to ±0 through the
// subnormal range, NaNs stay (quiet) NaNs.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(mant>>13)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++
	}
	return sign | uint16(half)
}

// BF16ToF32 converts a bfloat16 bit pattern (the high half of a float32) to
// float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds a float32 to the nearest bfloat16, ties to even; NaNs
// stay quiet NaNs.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7f800000 == 0x7f800000 && b&0x7fffff != 0 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// DecodeF16 converts len(dst) binary16 values of src to float32 (F16C when
// available).
func DecodeF16(dst []float32, src []uint16) {
	checkLen("src", len(src), len(dst))
	kernels.f16to32(dst, src)
}

// EncodeF16 rounds len(dst) float32 values of src to binary16 (nearest,
// ties to even).
func EncodeF16(dst []uint16, src []float32) {
	checkLen("src", len(src), len(dst))
	kernels.f32to16(dst, src)
}

// DecodeBF16 converts len(dst) bfloat16 values of src to float32 (AVX2
// when available).
func DecodeBF16(dst []float32, src []uint16) {
	checkLen("src", len(src), len(dst))
	kernels.bf16to32(dst, src)
}

// EncodeBF16 rounds len(dst) float32 values of src to bfloat16.
func EncodeBF16(dst []uint16, src []float32) {
	src = src[:len(dst)]
	for i, f := range src {
		dst[i] = F32ToBF16(f)
	}
}

// DecodeU8 converts len(dst) bytes of src to float32 (0…255).
func DecodeU8(dst []float32, src []uint8) {
	checkLen("src", len(src), len(dst))
	kernels.u8to32(dst, src)
}
