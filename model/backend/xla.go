//go:build xla

package backend

// With the build tag xla, the XLA/PJRT backend registers itself as "xla"
// (aliases "stablehlo", "hlo", "shlo"). Select it with GOMLX_BACKEND=xla:cuda
// or GOMLX_BACKEND=xla:/abs/path/to/pjrt_plugin.so; GOMLX_NO_AUTO_INSTALL=1
// disables plugin downloads.
import _ "github.com/gomlx/gomlx/backends/xla"

// XLACompiled reports whether the XLA backend is compiled into this binary.
const XLACompiled = true
