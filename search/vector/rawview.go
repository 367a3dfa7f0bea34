package vector

import (
	"runtime"
	"unsafe"
)

// unalignedOK reports whether the CPU loads misaligned words (FAISS files
// put float32 data at odd offsets).
var unalignedOK = runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" || runtime.GOARCH == "386"

// littleEndian reports the host byte order: index files are little-endian
// and are used in place (memory-mapped) only on little-endian hosts.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// bytesOf views a slice of fixed-size numbers as its bytes (host order).
func bytesOf[T float32 | uint16 | uint8 | int64 | uint64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// viewAs views b (length a multiple of the element size) as numbers, in
// place. A misaligned start is viewed in place where the CPU allows it
// (amd64, arm64; none of these types holds pointers) and copied otherwise.
// The capacity equals the length, so append copies instead of writing into
// a read-only map.
func viewAs[T float32 | uint16 | uint8 | int64 | uint64](b []byte) []T {
	var z T
	size := int(unsafe.Sizeof(z))
	n := len(b) / size
	if n == 0 {
		return nil
	}
	if !unalignedOK && uintptr(unsafe.Pointer(&b[0]))%uintptr(size) != 0 {
		s := make([]T, n)
		copy(bytesOf(s), b)
		return s
	}
	s := unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
	return s[:n:n]
}

// offsetIn returns the byte offset of x's first element inside b, and
// false when x does not lie wholly inside b (a copied view).
func offsetIn(b []byte, x []float32) (int64, bool) {
	if len(b) == 0 || len(x) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(&b[0]))
	p := uintptr(unsafe.Pointer(&x[0]))
	if p < base || p+uintptr(4*len(x)) > base+uintptr(len(b)) {
		return 0, false
	}
	return int64(p - base), true
}
