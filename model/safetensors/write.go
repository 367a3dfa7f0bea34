package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/tensor"
)

// Tensor is one named tensor to write: Data holds the little-endian bytes of
// Shape's elements of DType, row-major.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// F32Tensor packs float32 values.
func F32Tensor(name string, shape []int, v []float32) Tensor {
	return pack(name, F32, shape, v, 4, func(b []byte, x float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(x)) })
}

// BF16Tensor rounds float32 values to bfloat16 (nearest even).
func BF16Tensor(name string, shape []int, v []float32) Tensor {
	return pack(name, BF16, shape, v, 2, func(b []byte, x float32) { binary.LittleEndian.PutUint16(b, tensor.F32ToBF16(x)) })
}

// F16Tensor rounds float32 values to IEEE half precision (nearest even).
func F16Tensor(name string, shape []int, v []float32) Tensor {
	return pack(name, F16, shape, v, 2, func(b []byte, x float32) { binary.LittleEndian.PutUint16(b, tensor.F32ToF16(x)) })
}

// I64Tensor packs int64 values.
func I64Tensor(name string, shape []int, v []int64) Tensor {
	return pack(name, I64, shape, v, 8, func(b []byte, x int64) { binary.LittleEndian.PutUint64(b, uint64(x)) })
}

// pack encodes v as a tensor of dt, size bytes per element, put writing one
// element's little-endian bytes at the start of b.
func pack[T any](name string, dt DType, shape []int, v []T, size int, put func(b []byte, x T)) Tensor {
	b := make([]byte, size*len(v))
	for i, x := range v {
		put(b[size*i:], x)
	}
	return Tensor{Name: name, DType: dt, Shape: append([]int(nil), shape...), Data: b}
}

type headerEntry struct {
	DType       DType    `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// encodeHeader sorts tensors by name, validates them and returns them with
// the 8-byte length prefix plus JSON header. The header is padded with spaces
// to a multiple of 8 bytes so the data buffer is aligned.
func encodeHeader(tensors []Tensor, metadata map[string]string) ([]Tensor, []byte, error) {
	ts := append([]Tensor(nil), tensors...)
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	hdr := make(map[string]any, len(ts)+1)
	if len(metadata) > 0 {
		hdr[metadataKey] = metadata
	}
	var off int64
	for i, t := range ts {
		if t.Name == "" || t.Name == metadataKey {
			return nil, nil, fmt.Errorf("tensor %d: invalid name %q", i, t.Name)
		}
		if i > 0 && ts[i-1].Name == t.Name {
			return nil, nil, fmt.Errorf("duplicate tensor %q", t.Name)
		}
		if err := t.DType.valid(); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		n := 1
		for _, d := range t.Shape {
			if d < 0 {
				return nil, nil, fmt.Errorf("tensor %q: negative dimension in %v", t.Name, t.Shape)
			}
			n *= d
		}
		if n*t.DType.Size() != len(t.Data) {
			return nil, nil, fmt.Errorf("tensor %q: shape %v × %s needs %d bytes, have %d", t.Name, t.Shape, t.DType, n*t.DType.Size(), len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[t.Name] = headerEntry{DType: t.DType, Shape: shape, DataOffsets: [2]int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return nil, nil, err
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte(" "), pad)...)
	}
	out := make([]byte, 8, 8+len(js))
	binary.LittleEndian.PutUint64(out, uint64(len(js)))
	return ts, append(out, js...), nil
}

// Encode serialises tensors (sorted by name) and metadata into the
// safetensors layout, in memory.
func Encode(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	ts, out, err := encodeHeader(tensors, metadata)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		out = append(out, t.Data...)
	}
	return out, nil
}

// Write writes tensors and metadata to path atomically: the bytes stream to a
// temporary file in the same directory, which is synced and renamed over path,
// so a reader never sees a half-written file. Tensor data is not copied into
// one buffer first.
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	ts, hdr, err := encodeHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		if _, err := w.Write(hdr); err != nil {
			return err
		}
		for _, t := range ts {
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
		}
		return nil
	})
}
