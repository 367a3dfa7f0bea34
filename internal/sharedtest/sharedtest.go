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
	"sync"
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

// BuiltDir is a folder a test binary builds once, on first use, and removes
// when it ends (Main): an index over a shared corpus that several tests
// read.
type BuiltDir struct {
	once sync.Once
	dir  string
	err  error
}

// Get returns the folder, built the first time by build on a fresh
// temporary folder named after pattern (os.MkdirTemp). A build error fails
// this and every later caller.
func (b *BuiltDir) Get(tb testing.TB, pattern string, build func(dir string) error) string {
	tb.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", pattern); b.err == nil {
			b.err = build(b.dir)
		}
	})
	if b.err != nil {
		tb.Fatalf("build %s folder: %v", pattern, b.err)
	}
	return b.dir
}

// Main is a TestMain: it runs the tests, removes the folders they built and
// exits with the tests' status.
func Main(m *testing.M, dirs ...*BuiltDir) {
	code := m.Run()
	for _, b := range dirs {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
	os.Exit(code)
}
