package gocpu

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
)

// TestBinaryFoldsBroadcast: a float32 binary op with a broadcast operand
// (a scalar, or a reduced tensor, broadcast to the other operand's shape)
// reads the broadcast's source with zero strides: the results equal
// simplego's bit for bit, and the broadcast is not executed unless
// something else reads it.
func TestBinaryFoldsBroadcast(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 25))
	x, s, c := randTensor(r, dtypes.Float32, 4, 5, 6), randTensor(r, dtypes.Float32, 4, 5), randTensor(r, dtypes.Float32)
	cases := []struct {
		name   string
		fn     func(x, s, c *graph.Node) *graph.Node
		bcasts int // broadcasts still executed
	}{
		{"reduced adjoint times x", func(x, s, c *graph.Node) *graph.Node {
			return graph.Mul(graph.BroadcastToDims(graph.ExpandAxes(s, -1), 4, 5, 6), x)
		}, 0},
		{"x over a broadcast scalar", func(x, s, c *graph.Node) *graph.Node {
			return graph.Div(x, graph.BroadcastToDims(c, 4, 5, 6))
		}, 0},
		{"broadcast minus x", func(x, s, c *graph.Node) *graph.Node {
			return graph.Sub(graph.BroadcastToDims(graph.ExpandAxes(s, -1), 4, 5, 6), x)
		}, 0},
		{"broadcast also returned", func(x, s, c *graph.Node) *graph.Node {
			b := graph.BroadcastToDims(graph.ExpandAxes(s, -1), 4, 5, 6)
			return graph.Add(graph.Add(b, x), graph.Mul(b, b))
		}, 1},
	}
	be, err := New("profile")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Finalize()
	prof := be.(*Backend)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fn := func(in []*graph.Node) []*graph.Node { return []*graph.Node{tc.fn(in[0], in[1], in[2])} }
			prof.Profile(true)
			got, gs, err := run(t, be, fn, x, s, c)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, p := range prof.Profile(true) {
				if p.Op == "BroadcastInDim" {
					n += p.Calls
				}
			}
			if n != tc.bcasts {
				t.Errorf("%d broadcasts executed, want %d", n, tc.bcasts)
			}
			want, ws, err := run(t, plainOnce(), fn, x, s, c)
			if err != nil {
				t.Fatal(err)
			}
			if !gs[0].Equal(ws[0]) {
				t.Fatalf("shape %s, want %s", gs[0], ws[0])
			}
			for i := range want[0] {
				if got[0][i] != want[0][i] {
					t.Fatalf("[%d] = %v, simplego %v", i, got[0][i], want[0][i])
				}
			}
		})
	}
}
