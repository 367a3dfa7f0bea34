package safetensors

import (
	"fmt"
	"os"

	"github.com/edsrzf/mmap-go"
)

// Reader is what both a single file (*File) and a model folder (*Dir)
// provide: named tensors converted on demand.
type Reader interface {
	// Names returns the tensor names, sorted.
	Names() []string
	// Info returns a tensor's dtype and shape.
	Info(name string) (TensorInfo, bool)
	// Float32 converts a floating-point tensor to a new float32 slice and
	// returns it with its shape.
	Float32(name string) ([]float32, []int, error)
	// Float32Into converts a floating-point tensor into dst, which must have
	// exactly the tensor's element count.
	Float32Into(name string, dst []float32) error
	// Int64 converts an integer or bool tensor to a new int64 slice.
	Int64(name string) ([]int64, []int, error)
	// Metadata returns the __metadata__ entries (nil when absent).
	Metadata() map[string]string
	Close() error
}

// File is an open safetensors file. It is safe for concurrent reads.
type File struct {
	path string
	f    *os.File
	size int64
	data mmap.MMap // the whole file when memory-mapped, else nil
	h    *header
}

var _ Reader = (*File)(nil)

// Open opens and validates a safetensors file. Tensor data is not read until
// asked for.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors %s: %w", path, err)
	}
	sf := &File{path: path, f: f, size: st.Size()}
	if err := sf.init(); err != nil {
		sf.Close()
		return nil, fmt.Errorf("safetensors %s: %w", path, err)
	}
	return sf, nil
}

func (sf *File) init() error {
	if sf.size < 8 {
		return fmt.Errorf("file too short (%d bytes) for the 8-byte header length", sf.size)
	}
	var prefix [8]byte
	if _, err := sf.f.ReadAt(prefix[:], 0); err != nil {
		return fmt.Errorf("read header length: %w", err)
	}
	n, err := headerLen(prefix[:], sf.size)
	if err != nil {
		return err
	}
	js := make([]byte, n)
	if _, err := sf.f.ReadAt(js, 8); err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	h, err := parseHeader(js, sf.size-8-n)
	if err != nil {
		return err
	}
	h.dataOff = 8 + n
	sf.h = h
	if sf.size > 0 && int64(int(sf.size)) == sf.size {
		// Where mapping fails (or is unsupported) tensors are read with ReadAt.
		if m, err := mmap.Map(sf.f, mmap.RDONLY, 0); err == nil {
			sf.data = m
		}
	}
	return nil
}

// Path returns the file name given to Open.
func (sf *File) Path() string { return sf.path }

// Names returns the tensor names, sorted.
func (sf *File) Names() []string { return append([]string(nil), sf.h.names...) }

// Info returns a tensor's dtype, shape and offsets.
func (sf *File) Info(name string) (TensorInfo, bool) {
	ti, ok := sf.h.tensors[name]
	if ok {
		ti.Shape = append([]int(nil), ti.Shape...)
	}
	return ti, ok
}

// Metadata returns the __metadata__ entries (nil when absent).
func (sf *File) Metadata() map[string]string { return sf.h.metadata }

// Raw returns the little-endian bytes of a tensor. When the file is
// memory-mapped the slice aliases the mapping and must not be modified or used
// after Close.
func (sf *File) Raw(name string) ([]byte, TensorInfo, error) {
	ti, ok := sf.h.tensors[name]
	if !ok {
		return nil, TensorInfo{}, fmt.Errorf("safetensors %s: no tensor %q", sf.path, name)
	}
	if sf.f == nil {
		return nil, ti, fmt.Errorf("safetensors %s: file is closed", sf.path)
	}
	off := sf.h.dataOff + ti.Begin
	n := ti.End - ti.Begin
	if sf.data != nil {
		return sf.data[off : off+n], ti, nil
	}
	buf := make([]byte, n)
	if _, err := sf.f.ReadAt(buf, off); err != nil {
		return nil, ti, fmt.Errorf("safetensors %s: tensor %q: %w", sf.path, name, err)
	}
	return buf, ti, nil
}

// Float32 converts a floating-point tensor (F32, F16, BF16, F64) to float32.
func (sf *File) Float32(name string) ([]float32, []int, error) {
	ti, ok := sf.h.tensors[name]
	if !ok {
		return nil, nil, fmt.Errorf("safetensors %s: no tensor %q", sf.path, name)
	}
	dst := make([]float32, ti.NumElements())
	if err := sf.Float32Into(name, dst); err != nil {
		return nil, nil, err
	}
	return dst, append([]int(nil), ti.Shape...), nil
}

// Float32Into converts a floating-point tensor into dst, which must have
// exactly the tensor's element count.
func (sf *File) Float32Into(name string, dst []float32) error {
	raw, ti, err := sf.Raw(name)
	if err != nil {
		return err
	}
	if len(dst) != ti.NumElements() {
		return fmt.Errorf("safetensors %s: tensor %q has %d elements %v, destination %d", sf.path, name, ti.NumElements(), ti.Shape, len(dst))
	}
	if err := decodeFloat32(ti.DType, raw, dst); err != nil {
		return fmt.Errorf("safetensors %s: tensor %q: %w", sf.path, name, err)
	}
	return nil
}

// Int64 converts an integer or bool tensor (I64, I32, I16, I8, U8, BOOL) to int64.
func (sf *File) Int64(name string) ([]int64, []int, error) {
	raw, ti, err := sf.Raw(name)
	if err != nil {
		return nil, nil, err
	}
	dst := make([]int64, ti.NumElements())
	if err := decodeInt64(ti.DType, raw, dst); err != nil {
		return nil, nil, fmt.Errorf("safetensors %s: tensor %q: %w", sf.path, name, err)
	}
	return dst, append([]int(nil), ti.Shape...), nil
}

// Close unmaps and closes the file. Slices returned by Raw become invalid.
func (sf *File) Close() error {
	var err error
	if sf.data != nil {
		err = sf.data.Unmap()
		sf.data = nil
	}
	if sf.f != nil {
		if cerr := sf.f.Close(); err == nil {
			err = cerr
		}
		sf.f = nil
	}
	return err
}
