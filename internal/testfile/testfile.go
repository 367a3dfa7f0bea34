// Package testfile writes the input files of tests (what a fuzz target or
// an error case feeds a reader) into a test's folder, and reads the JSON
// Lines files tests compare against (golden results, a run's records).
package testfile

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cas-engine/cas/internal/jsonl"
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

// Read returns the contents of the file path; a read error fails tb.
func Read(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// ReadJSONL decodes every non-blank line of the JSON Lines file path into
// a T, in order; an unreadable file or a bad line ("path:line: …") fails tb.
func ReadJSONL[T any](tb testing.TB, path string) []T {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	return DecodeJSONL[T](tb, f, path)
}

// DecodeJSONL is ReadJSONL for a stream r named name (command output).
func DecodeJSONL[T any](tb testing.TB, r io.Reader, name string) []T {
	tb.Helper()
	out, err := jsonl.Collect(r, name, nil, func(_ int, b []byte) (T, error) {
		var x T
		err := json.Unmarshal(b, &x)
		return x, err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
