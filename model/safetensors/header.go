package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// MaxHeaderSize bounds the JSON header (100 MB, the limit of the reference
// Rust implementation); a larger declared length is rejected before reading.
const MaxHeaderSize = 100 << 20

// metadataKey is the reserved header entry holding free-form string metadata.
const metadataKey = "__metadata__"

// header is a parsed, validated safetensors header.
type header struct {
	tensors  map[string]TensorInfo
	names    []string // sorted
	metadata map[string]string
	dataOff  int64 // 8 + N: where the data buffer starts in the file
}

// headerLen decodes the 8-byte prefix and checks it against the file size.
func headerLen(prefix []byte, fileSize int64) (int64, error) {
	if fileSize < 8 || len(prefix) < 8 {
		return 0, fmt.Errorf("file too short (%d bytes) for the 8-byte header length", fileSize)
	}
	n := binary.LittleEndian.Uint64(prefix[:8])
	if n > MaxHeaderSize {
		return 0, fmt.Errorf("header length %d exceeds the %d-byte limit", n, MaxHeaderSize)
	}
	if int64(n) > fileSize-8 {
		return 0, fmt.Errorf("truncated header: declares %d bytes, file has %d after the length prefix", n, fileSize-8)
	}
	if n < 2 {
		return 0, fmt.Errorf("header length %d is too small for a JSON object", n)
	}
	return int64(n), nil
}

type rawEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// parseHeader validates the JSON header js against a data buffer of dataLen
// bytes. It never panics on any input.
func parseHeader(js []byte, dataLen int64) (*header, error) {
	// The spec allows trailing spaces as padding.
	js = bytes.TrimRight(js, " ")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("header is not a JSON object: %w", err)
	}
	h := &header{tensors: make(map[string]TensorInfo, len(raw))}
	for name, msg := range raw {
		if name == metadataKey {
			var md map[string]string
			if err := json.Unmarshal(msg, &md); err != nil {
				return nil, fmt.Errorf("%s: must map strings to strings: %w", metadataKey, err)
			}
			h.metadata = md
			continue
		}
		ti, err := parseEntry(msg, dataLen)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		h.tensors[name] = ti
		h.names = append(h.names, name)
	}
	sort.Strings(h.names)
	// No two tensors may share bytes, and no tensor, empty ones included,
	// may start inside another: in (Begin, End) order every range must start
	// at or after the furthest end seen so far (not only the previous
	// range's end, which an empty range in between would hide).
	order := append([]string(nil), h.names...)
	sort.Slice(order, func(i, j int) bool {
		a, b := h.tensors[order[i]], h.tensors[order[j]]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	far := ""
	for _, name := range order {
		cur := h.tensors[name]
		if far != "" {
			if prev := h.tensors[far]; cur.Begin < prev.End {
				return nil, fmt.Errorf("tensor %q [%d,%d) overlaps tensor %q [%d,%d)",
					name, cur.Begin, cur.End, far, prev.Begin, prev.End)
			}
		}
		if far == "" || cur.End > h.tensors[far].End {
			far = name
		}
	}
	return h, nil
}

func parseEntry(msg json.RawMessage, dataLen int64) (TensorInfo, error) {
	var e rawEntry
	if err := json.Unmarshal(msg, &e); err != nil {
		return TensorInfo{}, fmt.Errorf("bad entry: %w", err)
	}
	if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
		return TensorInfo{}, fmt.Errorf("entry needs dtype, shape and data_offsets")
	}
	dt := DType(*e.DType)
	if err := dt.valid(); err != nil {
		return TensorInfo{}, err
	}
	if len(*e.DataOffsets) != 2 {
		return TensorInfo{}, fmt.Errorf("data_offsets must have 2 elements, got %d", len(*e.DataOffsets))
	}
	begin, end := (*e.DataOffsets)[0], (*e.DataOffsets)[1]
	if begin < 0 || end < begin {
		return TensorInfo{}, fmt.Errorf("bad data_offsets [%d, %d]", begin, end)
	}
	if end > dataLen {
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] outside the %d-byte data buffer", begin, end, dataLen)
	}
	shape := make([]int, len(*e.Shape))
	count := uint64(1)
	for i, d := range *e.Shape {
		if d < 0 || d > math.MaxInt32 {
			return TensorInfo{}, fmt.Errorf("bad dimension %d in shape %v", d, *e.Shape)
		}
		shape[i] = int(d)
		hi, lo := bits.Mul64(count, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return TensorInfo{}, fmt.Errorf("shape %v overflows", *e.Shape)
		}
		count = lo
	}
	hi, nbytes := bits.Mul64(count, uint64(dt.Size()))
	if hi != 0 || nbytes != uint64(end-begin) {
		return TensorInfo{}, fmt.Errorf("shape %v × %s (%d bytes each) ≠ data length %d", shape, dt, dt.Size(), end-begin)
	}
	return TensorInfo{DType: dt, Shape: shape, Begin: begin, End: end}, nil
}
