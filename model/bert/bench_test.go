package bert

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cas-engine/cas/model/safetensors"
)

// memReader is an in-memory safetensors.Reader of float32 tensors, so
// benchmarks can build larger random models without touching the disk.
type memReader map[string]memTensor

type memTensor struct {
	shape []int
	data  []float32
}

func (m memReader) Names() []string { return slices.Sorted(maps.Keys(m)) }

func (m memReader) Info(name string) (safetensors.TensorInfo, bool) {
	t, ok := m[name]
	return safetensors.TensorInfo{DType: safetensors.F32, Shape: t.shape, End: int64(4 * len(t.data))}, ok
}

func (m memReader) Float32(name string) ([]float32, []int, error) {
	t, ok := m[name]
	if !ok {
		return nil, nil, fmt.Errorf("no tensor %q", name)
	}
	return slices.Clone(t.data), slices.Clone(t.shape), nil
}

func (m memReader) Float32Into(name string, dst []float32) error {
	t, ok := m[name]
	if !ok || len(dst) != len(t.data) {
		return fmt.Errorf("tensor %q: bad destination", name)
	}
	copy(dst, t.data)
	return nil
}

func (m memReader) Int64(name string) ([]int64, []int, error) {
	return nil, nil, fmt.Errorf("tensor %q: not an integer tensor", name)
}

func (m memReader) Metadata() map[string]string { return nil }
func (m memReader) Close() error                { return nil }

// randomReader returns random weights for c.
func randomReader(c Config, seed uint64) memReader {
	m := memReader{}
	randomWeights(c, rand.New(rand.NewPCG(seed, 11)), 0.05, func(name string, shape []int, v []float32) {
		m[name] = memTensor{shape: shape, data: v}
	})
	return m
}

// BenchmarkEmbedSmall measures an e5-small-v2-shaped encoder (hidden 384,
// 12 layers, 12 heads, intermediate 1536; vocabulary cut to 1,000 to save
// memory, which does not change the compute): 4 passages × 128 tokens per
// op. Also reports tokens/s and the matmul GFLOP/s it implies.
func BenchmarkEmbedSmall(b *testing.B) {
	c := DefaultConfig()
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = 1000, 384, 12, 12, 1536
	enc, err := FromReader(c, randomReader(c, 1), "random e5-small", newBackend(b), Options{BatchSize: 4, MaxLen: 128})
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	const B, T = 4, 128
	rng := rand.New(rand.NewPCG(3, 4))
	seqs := make([][]int, B)
	for i := range seqs {
		seqs[i] = make([]int, T)
		for j := range seqs[i] {
			seqs[i][j] = rng.IntN(c.VocabSize)
		}
	}
	if _, err := enc.Embed(seqs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := enc.Embed(seqs); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	H, I, L := float64(c.HiddenSize), float64(c.IntermediateSize), float64(c.NumHiddenLayers)
	flopsPerToken := L * (2*4*H*H + 2*2*H*I + 2*2*T*H) // projections, FFN, QKᵀ and PV
	b.ReportMetric(float64(B*b.N)/sec, "passages/s")
	b.ReportMetric(float64(B*T*b.N)/sec, "tokens/s")
	b.ReportMetric(flopsPerToken*float64(B*T*b.N)/sec/1e9, "GFLOP/s")
}
