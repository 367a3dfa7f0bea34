package gocpu

import (
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cas-engine/cas/internal/cputime"
)

// BenchmarkStepOverhead runs a chain of 100 tiny (8-element) Add + Reshape
// pairs: it measures the per-op cost of the executor (segments and custom
// steps) against simplego's, which matters for decoding small models.
func BenchmarkStepOverhead(b *testing.B) {
	for _, c := range []struct {
		name string
		be   func() backends.Backend
	}{{"gocpu", fastOnce}, {"go", plainOnce}} {
		b.Run(c.name, func(b *testing.B) {
			exec, err := graph.NewExec(c.be(), func(x *graph.Node) *graph.Node {
				for i := range 100 {
					x = graph.AddScalar(x, 1)
					if i%2 == 0 {
						x = graph.Reshape(x, 2, 4)
					} else {
						x = graph.Reshape(x, 8)
					}
				}
				return x
			})
			if err != nil {
				b.Fatal(err)
			}
			x := tensors.FromFlatDataAndDimensions(make([]float32, 8), 8)
			cpu0 := cputime.Process()
			for b.Loop() {
				out, err := exec.Exec(x)
				if err != nil {
					b.Fatal(err)
				}
				out[0].FinalizeAll()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200, "ns/op-node")
			// CPU time, which other processes on a shared machine inflate
			// less than wall time.
			b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N)/200, "cpu-ns/op-node")
		})
	}
}
