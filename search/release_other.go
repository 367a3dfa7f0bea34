//go:build !linux

package search

// releaseMapped is a no-op where the source is not released page by page.
func releaseMapped([]float32) {}
