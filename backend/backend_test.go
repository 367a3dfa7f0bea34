package backend

import (
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

func TestNewDefault(t *testing.T) {
	t.Setenv(EnvVar, "")
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	if !strings.Contains(b.Name(), "(gocpu)") {
		t.Fatalf("default backend %q, want the pure-Go gocpu backend", b.Name())
	}
	// A tiny computation runs: [1,2,3]·[4,5,6] = 32.
	exec := graph.MustNewExec(b, func(x, y *graph.Node) *graph.Node {
		return graph.ReduceAllSum(graph.Mul(x, y))
	})
	out := exec.MustExec([]float32{1, 2, 3}, []float32{4, 5, 6})[0]
	if got := out.Value().(float32); got != 32 {
		t.Fatalf("dot = %v, want 32", got)
	}
}

func TestNewEnv(t *testing.T) {
	for _, tc := range []struct {
		env, want string
	}{
		{"go", ""},
		{"nosuch", `backend "nosuch" is not compiled in`},
		{":x", "empty backend name"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(EnvVar, tc.env)
			b, err := New()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				b.Finalize()
				return
			}
			if err == nil {
				b.Finalize()
				t.Fatalf("want error %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), EnvVar) {
				t.Fatalf("error %q must contain %q and %s", err, tc.want, EnvVar)
			}
		})
	}
}

func TestXLAAvailability(t *testing.T) {
	has := slices.Contains(Available(), "xla")
	if has != XLACompiled {
		t.Fatalf("xla registered=%v, XLACompiled=%v", has, XLACompiled)
	}
	if !XLACompiled {
		_, err := NewWithConfig("xla:cuda")
		if err == nil || !strings.Contains(err.Error(), "-tags xla") {
			t.Fatalf("error %v must explain the build tag", err)
		}
	}
}
