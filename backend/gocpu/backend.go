package gocpu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/cas-engine/cas/tensor"
)

// BackendName selects this backend in GOMLX_BACKEND ("gocpu[:config]").
const BackendName = "gocpu"

func init() {
	backends.Register(BackendName, New)
}

// Backend implements backends.Backend. Buffers and everything about data
// transfer are simplego's (embedded); graphs are built by Builder.
type Backend struct {
	*simplego.Backend
	// workers bounds the goroutines of the matrix kernels (≤ 0:
	// GOMAXPROCS).
	workers int
	// plain routes every op to simplego (for comparisons and tests).
	plain bool
	// noFuse turns off the loop fusion of elementwise chains
	// (fuse_elementwise.go; for comparisons and tests).
	noFuse bool
	// prof, when set, times every op (see Profile).
	prof *profiler
}

var _ backends.Backend = (*Backend)(nil)

// New returns a backend for the configuration string (see the package
// documentation).
func New(config string) (backends.Backend, error) {
	b := &Backend{}
	var rest []string
	for part := range strings.SplitSeq(config, ",") {
		part = strings.TrimSpace(part)
		key, value, _ := strings.Cut(part, "=")
		switch key {
		case "":
		case "workers":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%s backend: workers=%q: want a non-negative integer", BackendName, value)
			}
			b.workers = n
		case "nofast":
			b.plain = true
		case "nofuse":
			b.noFuse = true
		case "profile":
			if value != "" && value != "shapes" {
				return nil, fmt.Errorf("%s backend: profile=%q: want profile or profile=shapes", BackendName, value)
			}
			b.prof = &profiler{ops: map[profKey]*OpTime{}, bySize: value == "shapes"}
		default:
			rest = append(rest, part)
		}
	}
	// simplego's segments run their ops one after another unless the
	// configuration says otherwise: here they hold only the small ops
	// between gocpu's multi-core kernels, and starting goroutines for
	// those (simplego's default when one graph runs) cost a batch-1 decode
	// step of the 4M model about a fifth of its time (same values).
	if !b.plain && !slices.ContainsFunc(rest, func(o string) bool { return strings.HasPrefix(o, "ops_") }) {
		rest = append(rest, "ops_sequential")
	}
	sg, err := simplego.New(strings.Join(rest, ","))
	if err != nil {
		return nil, fmt.Errorf("%s backend: %w", BackendName, err)
	}
	b.Backend = sg.(*simplego.Backend)
	return b, nil
}

// Name implements backends.Backend.
func (b *Backend) Name() string { return "GoCPU (gocpu)" }

// Workers returns the goroutines gocpu's kernels use (the workers= option,
// else GOMAXPROCS), or 0 when the backend is plain (nofast: every op on
// simplego). Model code that runs host kernels beside the graphs
// (model/qwen's host decode step) follows it.
func (b *Backend) Workers() int {
	if b.plain {
		return 0
	}
	return tensor.Workers(b.workers)
}

// String implements backends.Backend.
func (b *Backend) String() string { return BackendName }

// Description implements backends.Backend.
func (b *Backend) Description() string {
	return "Pure-Go CPU backend: simplego with blocked multi-core matrix kernels"
}

// Capabilities implements backends.Backend: simplego's plus the ops this
// backend adds.
func (b *Backend) Capabilities() backends.Capabilities {
	c := b.Backend.Capabilities().Clone()
	for _, op := range []backends.OpType{backends.OpTypeDynamicSlice, backends.OpTypeDynamicUpdateSlice, backends.OpTypePad,
		backends.OpTypeDotGeneral, backends.OpTypeDot} {
		c.Operations[op] = true
	}
	return c
}

// Builder implements backends.Backend.
func (b *Backend) Builder(name string) backends.Builder {
	return newBuilder(b, name)
}

// fastDType reports whether DotGeneral of this dtype runs on the tensor
// kernels.
func fastDType(dt dtypes.DType) bool {
	return dt == dtypes.Float32 || dt == dtypes.BFloat16
}
