// Package testfile writes the input files of tests (what a fuzz target or
// an error case feeds a reader) into a test's folder.
package testfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes data to dir/name (mode 0644) and returns the path; a write
// error fails tb.
func Write(tb testing.TB, dir, name string, data []byte) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}
