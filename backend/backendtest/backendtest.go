// Package backendtest shares one compute backend (backend.New: $GOMLX_BACKEND
// or gocpu) among all the tests of a test binary: on XLA each backend is a
// PJRT client with its own device state, too costly per test.
package backendtest

import (
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/cas-engine/cas/backend"
)

var shared = sync.OnceValues(backend.New)

// Shared returns the test binary's backend, created on first use; a
// creation error fails tb (and every later caller).
func Shared(tb testing.TB) backends.Backend {
	tb.Helper()
	b, err := shared()
	if err != nil {
		tb.Fatalf("backend: %v", err)
	}
	return b
}
