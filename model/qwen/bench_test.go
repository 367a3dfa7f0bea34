package qwen

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/backend/backendtest"
)

// benchConfigs are Qwen-shaped random models for benchmarks.
var benchConfigs = map[string]*Config{
	// ~25M parameters: 16k vocabulary (tied), 6 layers of width 512, GQA 8:2.
	"qwen-25M": {
		Architectures: []string{"Qwen2ForCausalLM"}, ModelType: "qwen2",
		VocabSize: 16384, HiddenSize: 512, IntermediateSize: 1408, NumHiddenLayers: 6,
		NumAttentionHeads: 8, NumKeyValueHeads: 2, HeadDim: 64, HiddenAct: "silu",
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, MaxPositionEmbeddings: 32768,
	},
	// Qwen2.5-0.5B's shape (494M parameters, 1.98 GB in float32).
	"qwen-0.5B": {
		Architectures: []string{"Qwen2ForCausalLM"}, ModelType: "qwen2",
		VocabSize: 151936, HiddenSize: 896, IntermediateSize: 4864, NumHiddenLayers: 24,
		NumAttentionHeads: 14, NumKeyValueHeads: 2, HeadDim: 64, HiddenAct: "silu",
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, MaxPositionEmbeddings: 32768,
	},
}

// benchModel returns a golden model by name or a random benchmark model.
func benchModel(b *testing.B, name string) *Model {
	b.Helper()
	if cfg, ok := benchConfigs[name]; ok {
		m, err := NewRandom(cfg, backendtest.Shared(b), 1)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	return loadGolden(b, name).model
}

// benchNames lists the models benchmarked on the current backend: the
// 0.5B one only off the pure-Go backend (the GPU check) or on request.
func benchNames() []string {
	names := []string{"qwen2-tiny", "qwen3-tiny", "qwen-25M"}
	if os.Getenv(backend.EnvVar) != "" && !strings.HasPrefix(os.Getenv(backend.EnvVar), "go") || os.Getenv("CAS_BENCH_LARGE") == "1" {
		names = append(names, "qwen-0.5B")
	}
	return names
}

func benchPrompt(m *Model, n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = (i*7919 + 13) % m.Config.VocabSize
	}
	return p
}

// BenchmarkPrefill measures prompt processing: one row of 128 tokens
// through the KV-cache step graph (compiled before timing).
func BenchmarkPrefill(b *testing.B) {
	const promptLen = 128
	for _, name := range benchNames() {
		b.Run(name, func(b *testing.B) {
			m := benchModel(b, name)
			prompt := [][]int{benchPrompt(m, promptLen)}
			run := func() {
				s, err := m.NewSession(1, promptLen, 0)
				if err != nil {
					b.Fatal(err)
				}
				s.MaxChunk = promptLen
				if err := s.Append(prompt); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			run() // compile
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64(b.N*promptLen)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkDecode measures single-token decoding (one T = 1 step plus
// greedy sampling per token) for batches of 1 and 8 rows, with a 512-slot
// cache holding a 64-token prompt.
func BenchmarkDecode(b *testing.B) {
	const promptLen, slots = 64, 512
	for _, name := range benchNames() {
		for _, batch := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/batch%d", name, batch), func(b *testing.B) {
				m := benchModel(b, name)
				prompts := make([][]int, batch)
				for i := range prompts {
					prompts[i] = benchPrompt(m, promptLen)
				}
				opts := GenerateOptions{MaxNewTokens: 1, EOS: []int{}}
				var s *Session
				start := func() {
					if s != nil {
						s.Close()
					}
					var err error
					if s, err = m.NewSession(batch, slots, 0); err != nil {
						b.Fatal(err)
					}
					if err := s.Append(prompts); err != nil {
						b.Fatal(err)
					}
					if _, err := s.Generate(opts, nil); err != nil { // leaves one token pending
						b.Fatal(err)
					}
				}
				start()
				if _, err := s.Generate(opts, nil); err != nil { // compile the T = 1 step
					b.Fatal(err)
				}
				for b.Loop() {
					if s.Len(0) >= slots-1 {
						b.StopTimer()
						start()
						b.StartTimer()
					}
					if _, err := s.Generate(opts, nil); err != nil { // one decode step + sample
						b.Fatal(err)
					}
				}
				s.Close()
				tokS := float64(b.N*batch) / b.Elapsed().Seconds()
				b.ReportMetric(tokS, "tok/s")
				weightBytes := float64(m.Config.NumParameters() * 4)
				if bw := hbmBandwidth(); bw > 0 && batch == 1 {
					bound := bw / weightBytes // each token streams every weight once
					b.ReportMetric(bound, "bound_tok/s")
					b.ReportMetric(tokS/bound, "of_bound")
				}
			})
		}
	}
}

// hbmBandwidth returns the GPU memory bandwidth in bytes/s: $CAS_HBM_GBPS
// when set, else the datasheet figure of the GPU nvidia-smi names, else 0.
func hbmBandwidth() float64 {
	v, _ := strconv.ParseFloat(os.Getenv("CAS_HBM_GBPS"), 64)
	return backend.HBMBandwidth(v, "")
}
