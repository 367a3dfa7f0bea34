// Package sharedtest locates the read-only shared data (golden outputs, real
// corpora, QA sets, tokenizers) that tests and benchmarks read in place.
//
// The root is $CAS_SHARED, or ../shared relative to the module root. When a
// file is missing the test is skipped on a developer machine, but fails when
// CI=true: CI must never pass by silently skipping a golden check.
package sharedtest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Root returns the shared directory: $CAS_SHARED or <module root>/../shared.
func Root() string {
	if s := os.Getenv("CAS_SHARED"); s != "" {
		return s
	}
	return filepath.Join(filepath.Dir(RepoRoot()), "shared")
}

// RepoRoot returns the module root (the folder of go.mod), found from this
// source file's path, so that tests run from any package folder can reach
// the repository's files (README.md, cmd/cas).
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ".."
	}
	// file = <module>/internal/sharedtest/sharedtest.go
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// Path joins rel onto the shared root and checks that it exists. A missing
// file fails the test when CI=true and skips it otherwise.
func Path(tb testing.TB, rel ...string) string {
	tb.Helper()
	p := filepath.Join(append([]string{Root()}, rel...)...)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("shared file missing (CI=true): %s: %v", p, err)
		}
		tb.Skipf("shared file missing: %s (set CAS_SHARED)", p)
	}
	return p
}
