// Package backend chooses the GoMLX backend that runs the models.
//
// The default is "gocpu" (package backend/gocpu): GoMLX's pure-Go
// backend (simplego) with its matrix products on the blocked multi-core
// kernels of package tensor; like simplego it needs neither cgo nor a PJRT
// plugin. The environment variable GOMLX_BACKEND overrides it with
// "<name>[:<config>]":
//
//	GOMLX_BACKEND=gocpu                    pure Go, fast kernels (the default)
//	GOMLX_BACKEND=go                       GoMLX's plain pure-Go backend
//	GOMLX_BACKEND=xla:cuda                 XLA with the PJRT plugin named cuda
//	GOMLX_BACKEND=xla:/path/pjrt_c_api_cuda_plugin.so
//	GOMLX_BACKEND=xla:/path/xla_cuda_plugin.so,preallocate=false   PJRT client options (xla.go)
//
// The XLA backend is compiled in only with the build tag xla (it needs cgo:
// CGO_ENABLED=1 go build -tags xla ./cmd/cas). Set GOMLX_NO_AUTO_INSTALL=1 to
// stop it from downloading plugins; a machine without network access must
// name an installed plugin (by absolute path, or by name when it lies in
// PJRT_PLUGIN_LIBRARY_PATH).
//
// Training needs gocpu (or XLA): GoMLX v0.26 writes the gradient of
// DotGeneral as a broadcast product that the plain "go" backend
// materialises in full; gocpu rewrites it into matrix products
// (docs/upstream/gomlx-dotgeneral-grad.md).
//
// This package never imports backends/default, which would make XLA the
// default and fail on machines without a plugin.
package backend

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/backends"
	_ "github.com/gomlx/gomlx/backends/simplego" // registers "go"

	_ "github.com/cas-engine/cas/backend/gocpu" // registers "gocpu"
)

// Default is the backend configuration used when GOMLX_BACKEND is unset.
const Default = "gocpu"

// EnvVar is the environment variable that selects the backend.
const EnvVar = backends.ConfigEnvVar

// New returns the backend named by $GOMLX_BACKEND, or Default.
func New() (backends.Backend, error) {
	config := strings.TrimSpace(os.Getenv(EnvVar))
	if config == "" {
		config = Default
	}
	b, err := NewWithConfig(config)
	if err != nil {
		return nil, fmt.Errorf("$%s=%q: %w", EnvVar, config, err)
	}
	return b, nil
}

// NewWithConfig returns the backend for "<name>[:<config>]". An unknown name
// is an error listing the backends compiled into this binary; a panic inside
// GoMLX's constructor is returned as an error.
func NewWithConfig(config string) (b backends.Backend, err error) {
	name, _, _ := strings.Cut(config, ":")
	if name == "" {
		return nil, fmt.Errorf("empty backend name in %q", config)
	}
	avail := Available()
	if !slices.Contains(avail, name) {
		hint := ""
		if isXLAName(name) {
			hint = " (the XLA backend needs a binary built with CGO_ENABLED=1 -tags xla)"
		}
		return nil, fmt.Errorf("backend %q is not compiled in%s; available: %s", name, hint, strings.Join(avail, ", "))
	}
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("backend %q: %v", config, r)
		}
	}()
	if b, ok, err := newXLAWithClientOptions(config); ok {
		return b, err
	}
	b, err = backends.NewWithConfig(config)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", config, err)
	}
	return b, nil
}

// Available lists the backend names compiled into this binary, sorted.
func Available() []string {
	l := backends.List()
	slices.Sort(l)
	return l
}

func isXLAName(name string) bool {
	switch name {
	case "xla", "stablehlo", "hlo", "shlo":
		return true
	}
	return false
}
