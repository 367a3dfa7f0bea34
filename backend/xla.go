//go:build xla

package backend

// With the build tag xla, the XLA/PJRT backend registers itself as "xla"
// (aliases "stablehlo", "hlo", "shlo"). Select it with GOMLX_BACKEND=xla:cuda
// or GOMLX_BACKEND=xla:/abs/path/to/pjrt_plugin.so; GOMLX_NO_AUTO_INSTALL=1
// disables plugin downloads.
import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/xla"
)

// XLACompiled reports whether the XLA backend is compiled into this binary.
const XLACompiled = true

// newXLAWithClientOptions creates an XLA backend whose configuration
// carries PJRT client options after the plugin, comma-separated:
//
//	xla:/path/xla_cuda_plugin.so,preallocate=false,memory_fraction=0.9,allocator=platform
//
// preallocate (bool), memory_fraction (float) and allocator (default, bfc,
// platform, cuda_async) are the GPU plugin's client options: by default it
// reserves 75% of the GPU memory at start, so nvidia-smi cannot show what
// a run needs; preallocate=false grows the pool on demand. Other options
// (GoMLX's own: tf32, shared_buffers) pass through. ok is false when the
// configuration is not XLA or has no client option.
func newXLAWithClientOptions(config string) (b backends.Backend, ok bool, err error) {
	name, rest, _ := strings.Cut(config, ":")
	if !isXLAName(name) {
		return nil, false, nil
	}
	parts := strings.Split(rest, ",")
	opts := pjrt.NamedValuesMap{}
	keep := []string{parts[0]}
	for _, p := range parts[1:] {
		k, v, isKV := strings.Cut(p, "=")
		switch {
		case isKV && k == "preallocate":
			on, err := strconv.ParseBool(v)
			if err != nil {
				return nil, true, fmt.Errorf("backend %q: preallocate=%q: want true or false", config, v)
			}
			opts[k] = on
		case isKV && k == "memory_fraction":
			f, err := strconv.ParseFloat(v, 32)
			if err != nil || f <= 0 || f > 1 {
				return nil, true, fmt.Errorf("backend %q: memory_fraction=%q: want a number in (0, 1]", config, v)
			}
			opts[k] = float32(f)
		case isKV && k == "allocator":
			opts[k] = v
		default:
			keep = append(keep, p)
		}
	}
	if len(opts) == 0 {
		return nil, false, nil
	}
	b, err = xla.NewWithOptions(strings.Join(keep, ","), opts)
	if err != nil {
		return nil, true, fmt.Errorf("backend %q: %w", config, err)
	}
	return b, true, nil
}
