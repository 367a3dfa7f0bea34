package safetensors_test

import (
	"math"
	"slices"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/model/safetensors/safetensorstest"
)

// TestGoldenExpected reads the shared BERT golden file that
// transformers wrote: its shapes and first values are what the golden
// tests rely on.
func TestGoldenExpected(t *testing.T) {
	path := sharedtest.Path(t, "golden", "bert-tiny", "expected.safetensors")
	f := safetensorstest.Open(t, path)
	ids, shape := safetensorstest.Int64(t, f, "input_ids")
	if !slices.Equal(shape, []int{3, 10}) || ids[0] != 101 {
		t.Fatalf("input_ids shape %v first %d, want [3 10] starting with [CLS]=101", shape, ids[0])
	}
	emb, shape := safetensorstest.Float32(t, f, "embedding")
	if !slices.Equal(shape, []int{3, 64}) {
		t.Fatalf("embedding shape %v", shape)
	}
	for r := 0; r < 3; r++ {
		var s float64
		for _, v := range emb[r*64 : (r+1)*64] {
			s += float64(v) * float64(v)
		}
		if math.Abs(s-1) > 1e-5 {
			t.Fatalf("row %d norm² %v, want 1 (L2-normalised)", r, s)
		}
	}
}
