package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cas-engine/cas/tensor"
)

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
			dst[i] = tensor.BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = tensor.F16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
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
