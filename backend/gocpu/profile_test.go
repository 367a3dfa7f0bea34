package gocpu

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestProfileTimesEveryOpKind: with the "profile" option the results are
// the same as without (every delegated op then runs as a segment of its
// own), and the profile names both the ops gocpu runs and the delegated
// ones, with one call per op per execution.
func TestProfileTimesEveryOpKind(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 19))
	x, w := randTensor(r, dtypes.Float32, 4, 6, 32), randTensor(r, dtypes.Float32, 48, 32)
	fn := func(in []*graph.Node) []*graph.Node {
		h := graph.DotGeneral(in[0], []int{2}, nil, in[1], []int{1}, nil)
		h = graph.Mul(h, graph.Logistic(h))
		p := graph.Softmax(h, -1)
		loss := graph.ReduceAllSum(graph.Mul(graph.Log(graph.AddScalar(p, 1e-6)), p))
		return append([]*graph.Node{loss}, graph.Gradient(loss, in[1])...)
	}
	be := newProfiling(t)
	got, _, err := run(t, be, fn, x, w)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := run(t, fastOnce(), fn, x, w)
	if err != nil {
		t.Fatal(err)
	}
	for o := range want {
		for i := range want[o] {
			if got[o][i] != want[o][i] {
				t.Fatalf("output %d [%d]: profiled %v, unprofiled %v", o, i, got[o][i], want[o][i])
			}
		}
	}
	prof := be.Profile(true)
	byKey := map[string]OpTime{}
	for _, p := range prof {
		byKey[p.Op+"/"+p.Where] = p
		if p.Calls <= 0 || p.Time < 0 {
			t.Errorf("%+v", p)
		}
	}
	for _, k := range []string{"DotGeneral/gocpu", "Log/simplego"} {
		if p, ok := byKey[k]; !ok || p.Calls < 1 {
			t.Errorf("profile has no %s: %+v", k, prof)
		}
	}
	if p := byKey["Log/simplego"]; p.Calls != 1 {
		t.Errorf("Log ran %d times in one execution, want 1", p.Calls)
	}
	if again := be.Profile(false); len(again) != 0 {
		t.Errorf("after reset: %+v", again)
	}
	if fastOnce().(*Backend).Profile(false) != nil {
		t.Error("an unprofiled backend returned a profile")
	}
}

// opRuns returns the calls and elements written of op (on either side)
// in the profile of be since the last reset, and resets it.
func opRuns(be *Backend, op string) (calls int, elems int64) {
	for _, p := range be.Profile(true) {
		if p.Op == op {
			calls += p.Calls
			elems += p.Elements
		}
	}
	return calls, elems
}

// assertSame fails unless got equals want exactly, shape and values.
func assertSame(t *testing.T, got, want []float64, gs, ws shapes.Shape) {
	t.Helper()
	if !gs.Equal(ws) {
		t.Fatalf("shape %s, want %s", gs, ws)
	}
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

// TestProfileBySize: "profile=shapes" splits an op kind by output size
// (two products of different sizes are two rows, with their sizes, one
// of them within a fused group: fuse_elementwise.go), and
// any other profile value is refused.
func TestProfileBySize(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 20))
	x, y := randTensor(r, dtypes.Float32, 3, 40), randTensor(r, dtypes.Float32, 40)
	fn := func(in []*graph.Node) []*graph.Node {
		a := graph.Mul(in[0], in[0])                                 // 120 elements
		b := graph.Mul(in[1], graph.Exp(in[1]))                      // 40 elements
		return []*graph.Node{graph.Add(graph.ReduceSum(a, 0), b), a} // a is also an output
	}
	be, err := New("profile=shapes")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Finalize()
	if _, _, err := run(t, be, fn, x, y); err != nil {
		t.Fatal(err)
	}
	sizes := map[int]int{}
	for _, p := range be.(*Backend).Profile(true) {
		// Mul(in[1], Exp(in[1])) and the Add run as one fused group.
		if p.Op == "Mul" || strings.HasPrefix(p.Op, "Fused(") && strings.Contains(p.Op, "Mul") {
			sizes[p.Size] += p.Calls
		}
	}
	if len(sizes) != 2 || sizes[120] != 1 || sizes[40] != 1 {
		t.Errorf("Mul by size: %v, want one call of 120 and one of 40 elements", sizes)
	}
	if _, err := New("profile=bogus"); err == nil || !strings.Contains(err.Error(), "profile") {
		t.Errorf("profile=bogus: %v", err)
	}
}

// newProfiling returns a backend with the profile option, finalized when
// the test ends.
func newProfiling(t *testing.T) *Backend {
	t.Helper()
	be, err := New("profile")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.Finalize)
	return be.(*Backend)
}
