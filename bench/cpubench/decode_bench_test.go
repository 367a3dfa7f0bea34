package cpubench

import (
	"os"
	"testing"
	"time"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/backend/gocpu"
	"github.com/cas-engine/cas/internal/cputime"
	"github.com/cas-engine/cas/model/qwen"
)

// BenchmarkDecodeWeights times batch-1 decoding of the 4M model (the 25M
// one with CAS_BENCH_25M=1) with float32 weights and with bfloat16 weights
// (NewBF16WeightModel), in tokens/s and in CPU milliseconds per token,
// which other processes on a shared machine inflate less than wall time.
//
//	go test -run '^$' -bench DecodeWeights -count 3 ./bench/cpubench/
func BenchmarkDecodeWeights(b *testing.B) {
	ms := DefaultModels()[0]
	if os.Getenv("CAS_BENCH_25M") == "1" {
		ms = DefaultModels()[1]
	}
	be, err := backend.NewWithConfig(gocpu.BackendName)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Finalize()
	m32, err := qwen.NewRandom(ms.Config, be, 1)
	if err != nil {
		b.Fatal(err)
	}
	m16, err := NewBF16WeightModel(ms.Config, be, 1)
	if err != nil {
		b.Fatal(err)
	}
	const tokens = 32
	for _, c := range []struct {
		name string
		m    *qwen.Model
	}{{"f32", m32}, {"bf16", m16}} {
		b.Run(ms.Name+"/"+c.name, func(b *testing.B) {
			if _, err := DecodeSpeed(c.m, 1, 64, 2); err != nil { // compile
				b.Fatal(err)
			}
			var cpu time.Duration
			var tps float64
			for b.Loop() {
				var t0 time.Duration
				v, err := decodeSpeed(c.m, 1, 64, tokens, func() { t0 = cputime.Process() })
				if err != nil {
					b.Fatal(err)
				}
				cpu += cputime.Process() - t0
				tps = max(tps, v)
			}
			b.ReportMetric(tps, "tok/s")
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N*tokens), "cpu-ms/token")
		})
	}
}
