package blascore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/cpu"
)

// Features are the CPU capabilities that decide which OpenBLAS kernel set a
// peer should run.
type Features struct {
	AVX512 bool // AVX-512 F, BW, DQ and VL: OpenBLAS's SkylakeX kernels
	AVX2   bool // AVX2 and FMA: its Haswell kernels
}

// HostFeatures are this CPU's.
func HostFeatures() Features {
	x := cpu.X86
	return Features{
		AVX512: x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL,
		AVX2:   x.HasAVX2 && x.HasFMA,
	}
}

// Decide returns the OpenBLAS core a peer must be forced to, and why, given
// the core OpenBLAS detected under peer_env.py: the newest kernel set the
// CPU supports (SkylakeX with AVX-512, Haswell with AVX2) when OpenBLAS fell
// back to a pre-AVX one; "" when the detected core is already a proper one,
// unknown, or the CPU has nothing better.
func Decide(detected string, f Features) (core, why string) {
	if !Generic(detected) {
		return "", ""
	}
	switch {
	case f.AVX512:
		core = "SkylakeX"
		why = "the CPU has AVX-512"
	case f.AVX2:
		core = "Haswell"
		why = "the CPU has AVX2 and FMA"
	default:
		return "", ""
	}
	return core, fmt.Sprintf("OpenBLAS detected %s (pre-AVX kernels: it does not recognise this CPU) and %s; peer_env.py drops OPENBLAS_CORETYPE, so cas sets OPENBLAS_CORETYPE=%s from a sitecustomize.py on the peer's PYTHONPATH before numpy/torch/faiss load OpenBLAS", detected, why, core)
}

// Setup is how a peer's Python is launched so that its OpenBLAS runs the
// kernels the CPU supports (see Prepare).
type Setup struct {
	// Detected is the core OpenBLAS picks under peer_env.py's environment
	// ("" when it could not be probed).
	Detected string
	// Forced is the core set through the sitecustomize.py ("" when nothing
	// was forced), Why the sentence saying what was done and why.
	Forced, Why string
	// dir holds the sitecustomize.py; PYTHONPATH gets it first.
	dir string
}

// sitecustomize runs the interpreter's own sitecustomize (which this file
// shadows), then sets OPENBLAS_CORETYPE and imports numpy, which loads
// OpenBLAS: OpenBLAS reads the variable once, when it is loaded, and
// torch and faiss use that same library (Debian's libblas.so.3 and
// libopenblas.so.0 are one libopenblasp). The variable is removed again
// at once, because peer_env.fair() re-executes the interpreter whenever
// it is set — the re-executed interpreter runs this file again, so the
// kernels stay forced, and without the removal it would re-execute
// forever.
const sitecustomize = `# Written by cas (internal/blascore): forces OpenBLAS's kernel set for a fair peer.
import os, sys
_here = os.path.dirname(os.path.abspath(__file__))
for _p in sys.path:
    _f = os.path.join(os.path.abspath(_p or "."), "sitecustomize.py")
    if os.path.dirname(_f) != _here and os.path.isfile(_f):
        exec(compile(open(_f).read(), _f, "exec"), {"__name__": "sitecustomize", "__file__": _f})
        break
os.environ["OPENBLAS_CORETYPE"] = %q
try:
    import numpy
except Exception:
    pass
finally:
    os.environ.pop("OPENBLAS_CORETYPE", None)
`

// Prepare probes python's OpenBLAS core as peer_env.py leaves it and, when
// Decide says so, writes a sitecustomize.py forcing the better core into a
// temporary folder and probes again through it: the forced core is used
// only if OpenBLAS then reports it (otherwise Why says what went wrong and
// the peer keeps the detected core). Close removes the folder.
func Prepare(python string, f Features) *Setup {
	s := &Setup{}
	detected, err := Probe(python)
	if err != nil {
		return s
	}
	s.Detected = detected
	core, why := Decide(detected, f)
	if core == "" {
		return s
	}
	dir, err := os.MkdirTemp("", "cas-blascore-")
	if err != nil {
		s.Why = "could not force OPENBLAS_CORETYPE=" + core + ": " + err.Error()
		return s
	}
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), []byte(fmt.Sprintf(sitecustomize, core)), 0o644); err != nil {
		os.RemoveAll(dir)
		s.Why = "could not force OPENBLAS_CORETYPE=" + core + ": " + err.Error()
		return s
	}
	s.dir = dir
	got, err := probe(python, s.pythonPath())
	if err != nil || !strings.EqualFold(got, core) {
		s.Close()
		s.Why = fmt.Sprintf("setting OPENBLAS_CORETYPE=%s through sitecustomize.py did not take effect (OpenBLAS reports %q)", core, got)
		return s
	}
	s.Forced, s.Why = core, why
	return s
}

// pythonPath is the PYTHONPATH entry the peer needs ("" when none).
func (s *Setup) pythonPath() []string {
	if s == nil || s.dir == "" {
		return nil
	}
	pp := s.dir
	if old := os.Getenv("PYTHONPATH"); old != "" {
		pp += string(os.PathListSeparator) + old
	}
	return []string{"PYTHONPATH=" + pp}
}

// Env returns the environment for the peer's process: this process's,
// with the sitecustomize folder first on PYTHONPATH when a core is forced
// (nil, meaning "inherit", otherwise).
func (s *Setup) Env() []string {
	extra := s.pythonPath()
	if extra == nil {
		return nil
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHONPATH=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// ForcedMarker starts the note Describe appends when a core was forced.
const ForcedMarker = "; OpenBLAS forced to core "

// Describe appends to the peer's BLAS description what was done: the
// forced core and why, or the pre-AVX core (Marker's note, which marks
// the peer unfair) when it still runs one.
func (s *Setup) Describe(blas string) string {
	switch {
	case s == nil:
		return blas
	case s.Forced != "":
		return blas + ForcedMarker + s.Forced + " (" + s.Why + ")"
	case Generic(s.Detected):
		note := blas + Marker + s.Detected + " (pre-AVX kernels: OpenBLAS does not recognise this CPU"
		if s.Why != "" {
			note += "; " + s.Why
		}
		return note + ")"
	}
	return blas
}

// Close removes the sitecustomize folder.
func (s *Setup) Close() {
	if s != nil && s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}
