//go:build !xla

package backend

import "github.com/gomlx/gomlx/backends"

// XLACompiled reports whether the XLA backend is compiled into this binary.
const XLACompiled = false

// newXLAWithClientOptions is the XLA build's (see xla.go); without the
// xla tag there is no XLA backend to configure.
func newXLAWithClientOptions(string) (backends.Backend, bool, error) { return nil, false, nil }
