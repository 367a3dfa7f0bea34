package gocpu

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
)

// scratchPool recycles the float32 temporaries of the custom ops (BF16
// accumulation, operands copied into GEMM order).
var scratchPool = sync.Pool{New: func() any { return new([]float32) }}

func getScratch(n int) *[]float32 {
	s := scratchPool.Get().(*[]float32)
	if cap(*s) < n {
		*s = make([]float32, n)
	}
	*s = (*s)[:n]
	return s
}

func putScratch(s *[]float32) { scratchPool.Put(s) }

// bf16Bits views a []bfloat16.BFloat16 as its bit patterns.
func bf16Bits(flat any) []uint16 {
	x := flat.([]bfloat16.BFloat16)
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
}

// rawBytes views the storage of a flat slice of any element type as bytes,
// and returns the element size.
func rawBytes(flat any) ([]byte, int) {
	v := reflect.ValueOf(flat)
	esz := int(v.Type().Elem().Size())
	if v.Len() == 0 {
		return nil, esz
	}
	return unsafe.Slice((*byte)(v.UnsafePointer()), v.Len()*esz), esz
}

// scalarIndex reads an integer scalar (a start index of the dynamic ops).
func scalarIndex(flat any) (int, error) {
	switch x := flat.(type) {
	case []int32:
		return int(x[0]), nil
	case []int64:
		return clampInt64(x[0]), nil
	case []int16:
		return int(x[0]), nil
	case []int8:
		return int(x[0]), nil
	case []uint8:
		return int(x[0]), nil
	case []uint16:
		return int(x[0]), nil
	case []uint32:
		return clampInt64(int64(x[0])), nil
	case []uint64:
		if x[0] > 1<<62 {
			return 1 << 62, nil
		}
		return int(x[0]), nil
	}
	return 0, fmt.Errorf("start index of type %T is not an integer scalar", flat)
}

func clampInt64(v int64) int {
	const lim = 1 << 62
	return int(max(-lim, min(lim, v)))
}

// copyBlock copies the hyper-rectangle of sizes count from src (dimensions
// sdims, at corner sstart) to dst (dimensions ddims, at corner dstart);
// elements are esz bytes, arrays row-major.
func copyBlock(dst []byte, ddims, dstart []int, src []byte, sdims, sstart, count []int, esz int) {
	n := len(count)
	for _, c := range count {
		if c == 0 {
			return
		}
	}
	if n == 0 {
		copy(dst[:esz], src[:esz])
		return
	}
	ds, ss := rowMajorStrides(ddims), rowMajorStrides(sdims)
	doff, soff := 0, 0
	for a := range n {
		doff += dstart[a] * ds[a]
		soff += sstart[a] * ss[a]
	}
	run := count[n-1] * esz
	idx := make([]int, n-1)
	for {
		copy(dst[doff*esz:doff*esz+run], src[soff*esz:soff*esz+run])
		a := n - 2
		for ; a >= 0; a-- {
			idx[a]++
			doff += ds[a]
			soff += ss[a]
			if idx[a] < count[a] {
				break
			}
			doff -= ds[a] * count[a]
			soff -= ss[a] * count[a]
			idx[a] = 0
		}
		if a < 0 {
			return
		}
	}
}

// asWords views bytes as a slice of a fixed-size element type.
func asWords[T uint16 | uint32 | uint64](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// gatherStridedPar is gatherStrided with the leading axis split over the
// backend's workers when dst is large (each worker fills a contiguous
// block of dst; the bytes written are the same).
func (be *Backend) gatherStridedPar(dst, src []byte, dims, strides []int, esz int) {
	if len(dims) == 0 || dims[0] <= 1 || len(dst) < 4*parallelMin {
		gatherStrided(dst, src, dims, strides, esz)
		return
	}
	block := len(dst) / dims[0] // bytes per index of the leading axis
	be.forRange(dims[0], block/esz, func(lo, hi int) {
		sub := append([]int{hi - lo}, dims[1:]...)
		gatherStrided(dst[lo*block:hi*block], src[lo*strides[0]*esz:], sub, strides, esz)
	})
}

// gatherStrided fills dst (dimensions dims, row-major, esz-byte elements)
// with src elements at Σ idx[a]·strides[a] (strides in elements, 0 to
// repeat along an axis).
func gatherStrided(dst, src []byte, dims, strides []int, esz int) {
	n := len(dims)
	if n == 0 {
		copy(dst[:esz], src[:esz])
		return
	}
	inner, is := dims[n-1], strides[n-1]
	run := inner * esz
	idx := make([]int, n-1)
	off, o := 0, 0
	for {
		d := dst[o : o+run]
		switch is {
		case 1:
			copy(d, src[off*esz:off*esz+run])
		case 0:
			copy(d, src[off*esz:off*esz+esz])
			for k := esz; k < run; k *= 2 {
				copy(d[k:], d[:k])
			}
		default:
			s := off * esz
			for j := 0; j < run; j += esz {
				copy(d[j:j+esz], src[s:s+esz])
				s += is * esz
			}
		}
		o += run
		var more bool
		if off, more = nextIndex(idx, dims, strides, off); !more {
			return
		}
	}
}
