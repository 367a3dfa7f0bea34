//go:build !xla

package backend

// XLACompiled reports whether the XLA backend is compiled into this binary.
const XLACompiled = false
