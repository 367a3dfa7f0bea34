// Package blascore asks a peer's Python which kernels OpenBLAS chose.
//
// Debian's OpenBLAS is built with DYNAMIC_ARCH: at load time it reads the
// CPU's family and model and picks a kernel set. A CPU newer than the
// library (this project's development VM reports family 6, model 207, which
// OpenBLAS 0.3.21 does not know) falls back to "Prescott", the SSE3
// kernels, about 5× slower than the AVX-512 "SkylakeX" set on the same
// core (1000×768×4096 sgemm on one thread, measured 2026-12-02: 21.7
// against 112.1 GFLOP/s). The peer scripts run through peer_env.py, which
// drops OPENBLAS_CORETYPE, so setting the variable does not help; a ratio
// against such a peer is not a ratio against a fairly set-up one. Prepare
// therefore forces the newest kernel set the CPU supports through a
// sitecustomize.py on the peer's PYTHONPATH, which loads OpenBLAS at the
// interpreter's start-up with OPENBLAS_CORETYPE set and removes it again
// (peer_env.py's re-exec keeps PYTHONPATH, so it runs again there), checks
// with OpenBLAS's own report that it took effect, and says so next to the
// peer's BLAS; a peer still on pre-AVX kernels is flagged and gets no
// ratio.
package blascore

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// generic lists OpenBLAS's pre-AVX x86 kernel sets, chosen for CPUs it
// does not recognise (or that lack AVX).
var generic = []string{"prescott", "katmai", "coppermine", "northwood", "banias", "core2", "penryn", "dunnington", "nehalem", "atom"}

var coreLine = regexp.MustCompile(`(?m)^Core:\s*(\S+)`)

// Probe returns the OpenBLAS core name numpy loads under python, with the
// environment peer_env.py gives the peer (OPENBLAS_CORETYPE and
// OPENBLAS_L2_SIZE removed), or "" with the error when python, numpy or an
// OpenBLAS that reports its core is missing.
func Probe(python string) (string, error) { return probe(python, nil) }

// probe is Probe with extra environment entries (a PYTHONPATH).
func probe(python string, extra []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", "import numpy")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENBLAS_CORETYPE=") && !strings.HasPrefix(kv, "OPENBLAS_L2_SIZE=") && !strings.HasPrefix(kv, "OPENBLAS_VERBOSE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		cmd.Env = slices.DeleteFunc(cmd.Env, func(e string) bool { return strings.HasPrefix(e, name+"=") })
	}
	cmd.Env = append(append(cmd.Env, extra...), "OPENBLAS_VERBOSE=2")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", err
	}
	return Parse(out.String()), nil
}

// Parse returns the core name of OpenBLAS's "Core: X" line in out, or "".
func Parse(out string) string {
	if m := coreLine.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return ""
}

// Generic reports whether core is one of OpenBLAS's pre-AVX kernel sets.
func Generic(core string) bool {
	for _, g := range generic {
		if strings.EqualFold(core, g) {
			return true
		}
	}
	return false
}

// Marker starts the note Setup.Describe appends to a BLAS description
// when the peer still runs a generic (pre-AVX) core.
const Marker = "; OpenBLAS core "

// GenericIn returns the generic core named in a description
// Setup.Describe wrote, or "".
func GenericIn(blas string) string {
	_, after, ok := strings.Cut(blas, Marker)
	if !ok {
		return ""
	}
	core, _, _ := strings.Cut(after, " ")
	return core
}
