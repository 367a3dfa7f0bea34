package blascore

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cas-engine/cas/internal/sharedtest"
)

func TestDecideForcesNewestSupportedCore(t *testing.T) {
	for _, tc := range []struct {
		detected string
		f        Features
		want     string
	}{
		{"Prescott", Features{AVX512: true, AVX2: true}, "SkylakeX"},
		{"prescott", Features{AVX2: true}, "Haswell"},
		{"Nehalem", Features{AVX512: true, AVX2: true}, "SkylakeX"},
		{"Prescott", Features{}, ""},                         // nothing better to run
		{"SkylakeX", Features{AVX512: true, AVX2: true}, ""}, // already fair
		{"Haswell", Features{AVX512: true, AVX2: true}, ""},  // a proper core OpenBLAS chose itself
		{"", Features{AVX512: true, AVX2: true}, ""},         // not probed
	} {
		core, why := Decide(tc.detected, tc.f)
		if core != tc.want {
			t.Errorf("Decide(%q, %+v) = %q, want %q", tc.detected, tc.f, core, tc.want)
		}
		if core != "" && (!strings.Contains(why, tc.detected) || !strings.Contains(why, "OPENBLAS_CORETYPE="+core)) {
			t.Errorf("Decide(%q): reason %q does not say what was detected and done", tc.detected, why)
		}
	}
}

// fakePython writes a shell script standing in for python: it prints
// OpenBLAS's "Core:" line as a python with the given behaviour would —
// Prescott unless a sitecustomize.py on PYTHONPATH sets the core (honour)
// or regardless (ignore).
func fakePython(t *testing.T, honour bool) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n"
	if honour {
		script += `for d in $(echo "$PYTHONPATH" | tr ':' ' '); do
  if [ -f "$d/sitecustomize.py" ]; then
    core=$(sed -n 's/^os.environ\["OPENBLAS_CORETYPE"\] = "\(.*\)"$/\1/p' "$d/sitecustomize.py")
    echo "Core: $core"; exit 0
  fi
done
`
	}
	script += "echo 'Core: Prescott'\n"
	p := filepath.Join(dir, "python3")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrepareForcesAndChecks(t *testing.T) {
	avx := Features{AVX512: true, AVX2: true}
	s := Prepare(fakePython(t, true), avx)
	t.Cleanup(s.Close)
	if s.Detected != "Prescott" || s.Forced != "SkylakeX" {
		t.Fatalf("Prepare = %+v, want Prescott forced to SkylakeX", s)
	}
	env := strings.Join(s.Env(), "\n")
	if !strings.Contains(env, "PYTHONPATH="+s.dir) {
		t.Fatalf("peer environment lacks the sitecustomize folder: %q", s.dir)
	}
	desc := s.Describe("openblas-pthread/libopenblasp-r0.3.21.so")
	if GenericIn(desc) != "" || !strings.Contains(desc, ForcedMarker+"SkylakeX") {
		t.Fatalf("Describe = %q: want a forced, fair peer", desc)
	}
	dir := s.dir
	s.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Close left %s", dir)
	}

	// A python whose OpenBLAS ignores the variable stays flagged unfair,
	// with the reason.
	s = Prepare(fakePython(t, false), avx)
	defer s.Close()
	if s.Forced != "" || s.Env() != nil {
		t.Fatalf("Prepare forced %q although it did not take effect", s.Forced)
	}
	desc = s.Describe("openblas")
	if GenericIn(desc) != "Prescott" || !strings.Contains(desc, "did not take effect") {
		t.Fatalf("Describe = %q: want the Prescott flag and the failed attempt", desc)
	}
	// Without AVX there is nothing to force: flagged, no reason needed.
	s = Prepare(fakePython(t, true), Features{})
	if s.Forced != "" || GenericIn(s.Describe("openblas")) != "Prescott" {
		t.Fatalf("Prepare without AVX = %+v", s)
	}
}

// TestPrepareRealPeer checks on this machine's peer python (when it has
// numpy on OpenBLAS) that the forced core really is the one OpenBLAS loads.
func TestPrepareRealPeer(t *testing.T) {
	const python = "/usr/bin/python3"
	core, err := Probe(python)
	if err != nil || core == "" {
		t.Skipf("no numpy on OpenBLAS under %s (%v)", python, err)
	}
	s := Prepare(python, HostFeatures())
	defer s.Close()
	want, _ := Decide(core, HostFeatures())
	if s.Forced != want {
		t.Fatalf("detected %s: forced %q (%s), want %q", core, s.Forced, s.Why, want)
	}
	if want == "" {
		return
	}
	got, err := probe(python, s.pythonPath())
	if err != nil || !strings.EqualFold(got, want) {
		t.Fatalf("through the sitecustomize OpenBLAS reports %q (%v), want %s", got, err, want)
	}
	// The peers call peer_env.fair(), which re-executes the interpreter
	// while OPENBLAS_CORETYPE is set: it must run once more at most, with
	// the forced kernels, and end.
	peerEnv := filepath.Join(sharedtest.Root(), "bench", "peer_env.py")
	if _, err := os.Stat(peerEnv); err != nil {
		t.Skipf("no %s: %v", peerEnv, err)
	}
	script := filepath.Join(t.TempDir(), "peer.py")
	os.WriteFile(script, []byte("import sys\nsys.path.insert(0, sys.argv[1])\nimport peer_env, numpy\npeer_env.fair(1)\nprint('fair done')\n"), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, script, filepath.Dir(peerEnv))
	cmd.Env = append(s.Env(), "OPENBLAS_VERBOSE=2")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fair done") {
		t.Fatalf("peer_env.fair through the sitecustomize: %v\n%s", err, out)
	}
	if c := Parse(string(out)); !strings.EqualFold(c, want) {
		t.Fatalf("after peer_env.fair OpenBLAS runs %q, want %s:\n%s", c, want, out)
	}
}
