package vector

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/cas-engine/cas/internal/atomicfile"
)

// Vector files are raw little-endian float32, row-major, no header (the
// layout numpy's tofile writes and FAISS's benchmarks use): a file of n
// vectors of dimension d is exactly 4·n·d bytes.

// VectorFile reads a raw float32 vector file in chunks, so that files
// larger than memory can be indexed.
type VectorFile struct {
	f    *os.File
	path string
	d    int
	n    int
}

// OpenVectorFile opens a raw float32 file of d-dimensional vectors.
func OpenVectorFile(path string, d int) (*VectorFile, error) {
	if d <= 0 || d > maxDim {
		return nil, fmt.Errorf("vectors %s: dimension %d outside 1…%d", path, d, maxDim)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("vectors: %w", err)
	}
	row := int64(4 * d)
	if st.Size()%row != 0 {
		f.Close()
		return nil, fmt.Errorf("vectors %s: %d bytes are not a whole number of %d-d float32 vectors (%d bytes each)", path, st.Size(), d, row)
	}
	return &VectorFile{f: f, path: path, d: d, n: int(st.Size() / row)}, nil
}

// Len is the number of vectors; Dim their dimension; Path the file.
func (v *VectorFile) Len() int     { return v.n }
func (v *VectorFile) Dim() int     { return v.d }
func (v *VectorFile) Path() string { return v.path }

// Close closes the file.
func (v *VectorFile) Close() error { return v.f.Close() }

// ReadRows reads vectors [lo, lo+len(dst)/d) into dst.
func (v *VectorFile) ReadRows(dst []float32, lo int) error {
	n := len(dst) / v.d
	if lo < 0 || lo+n > v.n {
		return fmt.Errorf("vectors %s: rows %d…%d outside 0…%d", v.path, lo, lo+n-1, v.n-1)
	}
	if n == 0 {
		return nil
	}
	off := int64(lo) * int64(4*v.d)
	buf := bytesOf(dst[:n*v.d])
	if _, err := v.f.ReadAt(buf, off); err != nil {
		return fmt.Errorf("vectors %s: read rows %d…%d: %w", v.path, lo, lo+n-1, err)
	}
	if !littleEndian {
		for i := range dst[:n*v.d] {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
	}
	for i, x := range dst[:n*v.d] {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("vectors %s: vector %d component %d is %v", v.path, lo+i/v.d, i%v.d, x)
		}
	}
	return nil
}

// ReadVectorFile reads a whole raw float32 file of d-dimensional vectors.
func ReadVectorFile(path string, d int) ([]float32, error) {
	v, err := OpenVectorFile(path, d)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	x := make([]float32, v.n*d)
	if err := v.ReadRows(x, 0); err != nil {
		return nil, err
	}
	return x, nil
}

// WriteVectorFile writes vectors as raw little-endian float32 (temporary
// file renamed into place).
func WriteVectorFile(path string, x []float32) error {
	buf := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
	}
	return atomicfile.WriteFile(path, buf)
}

// ReadIDsFile reads vector ids: raw little-endian int64 for a ".i64"
// file, raw int32 for ".i32", otherwise text with one decimal id per line
// (blank lines skipped).
func ReadIDsFile(path string) ([]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ids: %w", err)
	}
	var ids []int64
	switch {
	case strings.HasSuffix(path, ".i64"):
		ids, err = decodeIDsBinary(b, 8)
	case strings.HasSuffix(path, ".i32"):
		ids, err = decodeIDsBinary(b, 4)
	default:
		ids, err = ParseIDs(bytes.NewReader(b))
	}
	if err != nil {
		return nil, fmt.Errorf("ids %s: %w", path, err)
	}
	return ids, nil
}

func decodeIDsBinary(b []byte, size int) ([]int64, error) {
	if len(b)%size != 0 {
		return nil, fmt.Errorf("%d bytes are not a whole number of %d-byte ids", len(b), size)
	}
	ids := make([]int64, len(b)/size)
	for i := range ids {
		if size == 8 {
			ids[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		} else {
			ids[i] = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	}
	return ids, nil
}

// ParseIDs reads one decimal int64 id per line (surrounding spaces and
// blank lines ignored).
func ParseIDs(r io.Reader) ([]int64, error) {
	var ids []int64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		ids = append(ids, v)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: too long", line+1)
		}
		return nil, err
	}
	return ids, nil
}
