package safetensors

import "fmt"

// DType is a safetensors element type, spelled as in the header ("F32",
// "BF16", …).
type DType string

// The element types this package understands.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U8   DType = "U8"
	Bool DType = "BOOL"
)

// Size returns the number of bytes of one element, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case F64, I64:
		return 8
	case F32, I32:
		return 4
	case F16, BF16, I16:
		return 2
	case I8, U8, Bool:
		return 1
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	switch d {
	case F64, F32, F16, BF16:
		return true
	}
	return false
}

func (d DType) valid() error {
	if d.Size() == 0 {
		return fmt.Errorf("unsupported dtype %q", string(d))
	}
	return nil
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	DType DType
	Shape []int
	// Begin and End are byte offsets into the data buffer (after the header).
	Begin, End int64
}

// NumElements returns the product of the shape (1 for a scalar).
func (ti TensorInfo) NumElements() int {
	n := 1
	for _, d := range ti.Shape {
		n *= d
	}
	return n
}
