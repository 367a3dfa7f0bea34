//go:build !amd64

package tensor

// gemvAsm is nil off amd64: the portable Go loop is used.
func gemvAsm() *gemvKernelSet { return nil }
