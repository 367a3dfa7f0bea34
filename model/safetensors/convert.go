package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// BF16ToFloat32 converts a bfloat16 bit pattern: the upper 16 bits of a float32.
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Float32ToBF16 rounds a float32 to bfloat16 (round to nearest even; NaN stays NaN).
func Float32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it quiet and a NaN
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// F16ToFloat32 converts an IEEE 754 half-precision bit pattern exactly.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value = mant × 2^-24.
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// Float32ToF16 rounds a float32 to half precision (round to nearest even,
// overflow to ±Inf).
func Float32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23) & 0xff
	mant := u & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, which rounds up correctly (even to Inf)
	}
	return sign | uint16(r)
}

// decodeFloat32 converts raw little-endian bytes of dtype dt into dst, which
// must hold exactly len(raw)/dt.Size() elements.
func decodeFloat32(dt DType, raw []byte, dst []float32) error {
	switch dt {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:])))
		}
	default:
		return fmt.Errorf("dtype %s is not a floating-point type", dt)
	}
	return nil
}

// decodeInt64 converts raw little-endian integer (or bool) bytes into dst.
func decodeInt64(dt DType, raw []byte, dst []int64) error {
	switch dt {
	case I64:
		for i := range dst {
			dst[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
		}
	case I32:
		for i := range dst {
			dst[i] = int64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	case I16:
		for i := range dst {
			dst[i] = int64(int16(binary.LittleEndian.Uint16(raw[2*i:])))
		}
	case I8:
		for i := range dst {
			dst[i] = int64(int8(raw[i]))
		}
	case U8, Bool:
		for i := range dst {
			dst[i] = int64(raw[i])
		}
	default:
		return fmt.Errorf("dtype %s is not an integer type", dt)
	}
	return nil
}
