//go:build !linux

package vector

// ReleaseMapped is a no-op where the source is not released page by page.
func ReleaseMapped([]float32) {}
