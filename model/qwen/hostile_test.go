package qwen

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cas-engine/cas/model/safetensors"
)

// allocated returns the bytes fn allocates on the Go heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileSizesRejectedBeforeAllocating: files that claim more than they
// hold are refused with an error naming the file and the field, using
// memory proportional to the file, not to the claim.
func TestHostileSizesRejectedBeforeAllocating(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.safetensors")
	if err := safetensors.Write(long, []safetensors.Tensor{safetensors.I64Tensor("input_ids", []int{1, 60000}, make([]int64, 60000))}, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(minimalQwen2))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NumHiddenLayers = 1_000_000
	names := []string{"model.embed_tokens.weight", "model.norm.weight", "model.layers.0.mlp.up_proj.weight", "model.layers.1.mlp.up_proj.weight", "model.layers.x.y", "model.layers.99999999999.z"}
	tests := []struct {
		name  string
		run   func() error
		want  []string
		limit uint64 // bytes the rejection may allocate
	}{
		{"input_ids [1, 60000] against 4096 positions", func() error {
			_, err := ReadTokenBatch(long, 100, 4096)
			return err
		}, []string{long, "60000 positions", "max_position_embeddings = 4096"}, 1 << 20},
		{"num_hidden_layers = 10^6 over two layers", func() error {
			return checkWeights(cfg, "m.safetensors", namesOnly(names))
		}, []string{"m.safetensors", "num_hidden_layers = 1000000", "hold 2 layers"}, 1 << 20},
	}
	for _, tc := range tests {
		var err error
		n := allocated(func() { err = tc.run() })
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
		if n > tc.limit {
			t.Errorf("%s: allocated %d bytes to reject, limit %d", tc.name, n, tc.limit)
		}
		t.Logf("%s: rejected after allocating %d KB", tc.name, n>>10)
	}
	// Within the limit the batch reads.
	if tb, err := ReadTokenBatch(long, 100, 60000); err != nil || tb.SeqLen != 60000 {
		t.Fatalf("60000 positions with max 60000: %v", err)
	}
}

// namesOnly is a checkpoint that lists names but holds none of them.
type namesOnly []string

func (n namesOnly) Names() []string { return n }
func (namesOnly) Info(string) (safetensors.TensorInfo, bool) {
	return safetensors.TensorInfo{}, false
}
