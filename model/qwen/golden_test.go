package qwen

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/model/safetensors/safetensorstest"
)

// golden is one of the shared reference models with its expected outputs.
type golden struct {
	model         *Model
	ids, mask     []int32 // [B, T]
	batch, seqLen int
	logits        []float32 // [B, T, V]
	greedy        []int
}

var goldenCache sync.Map // name → *golden; the loaded models are read-only

func loadGolden(t testing.TB, name string) *golden {
	t.Helper()
	dir := filepath.Dir(sharedtest.Path(t, "golden", name, "config.json"))
	if g, ok := goldenCache.Load(name); ok {
		return g.(*golden)
	}
	m, err := Load(dir, backendtest.Shared(t), LoadOptions{})
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	exp := safetensorstest.Open(t, filepath.Join(dir, "expected.safetensors"))
	ids64, shape := safetensorstest.Int64(t, exp, "input_ids")
	mask64, _ := safetensorstest.Int64(t, exp, "attention_mask")
	logits, _ := safetensorstest.Float32(t, exp, "logits")
	greedy64, _ := safetensorstest.Int64(t, exp, "greedy_ids")
	g := &golden{model: m, batch: shape[0], seqLen: shape[1], logits: logits}
	for i := range ids64 {
		g.ids = append(g.ids, int32(ids64[i]))
		g.mask = append(g.mask, int32(mask64[i]))
	}
	for _, id := range greedy64 {
		g.greedy = append(g.greedy, int(id))
	}
	actual, _ := goldenCache.LoadOrStore(name, g)
	return actual.(*golden)
}

// row returns the real tokens of row b.
func (g *golden) row(b int) []int {
	var out []int
	for t := range g.seqLen {
		if g.mask[b*g.seqLen+t] == 1 {
			out = append(out, int(g.ids[b*g.seqLen+t]))
		}
	}
	return out
}

var goldenModels = []string{"qwen2-tiny", "qwen3-tiny"}

// TestGoldenLogits compares the full forward pass with PyTorch's logits
// where the mask is 1: max |Δ| ≤ 1e-4 · max |logit|.
func TestGoldenLogits(t *testing.T) {
	for _, name := range goldenModels {
		t.Run(name, func(t *testing.T) {
			g := loadGolden(t, name)
			got, err := g.model.Logits(g.ids, g.mask, g.batch, g.seqLen)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(g.logits) {
				t.Fatalf("got %d logits, want %d", len(got), len(g.logits))
			}
			v := g.model.Config.VocabSize
			maxErr, maxAbs := 0.0, 0.0
			for i, want := range g.logits {
				if g.mask[i/v] != 1 {
					continue
				}
				maxAbs = math.Max(maxAbs, math.Abs(float64(want)))
				maxErr = math.Max(maxErr, math.Abs(float64(got[i]-want)))
			}
			t.Logf("%s: max |Δlogit| = %.3g, max |logit| = %.3g, ratio %.3g", name, maxErr, maxAbs, maxErr/maxAbs)
			if maxErr > 1e-4*maxAbs {
				t.Errorf("max |Δlogit| = %g > 1e-4 · %g", maxErr, maxAbs)
			}
		})
	}
}

// TestLogitsInto checks that LogitsInto overwrites a reused buffer with
// exactly Logits' values and rejects a buffer of the wrong length or a bad
// batch without touching it.
func TestLogitsInto(t *testing.T) {
	g := loadGolden(t, goldenModels[0])
	want, err := g.model.Logits(g.ids, g.mask, g.batch, g.seqLen)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, len(want))
	for round := range 2 {
		for i := range dst {
			dst[i] = float32(math.NaN())
		}
		if err := g.model.LogitsInto(dst, g.ids, g.mask, g.batch, g.seqLen); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
				t.Fatalf("round %d: logit %d = %g, Logits gave %g", round, i, dst[i], want[i])
			}
		}
	}
	// LogitsTensor hands back the executor's output: the same values,
	// shaped [batch, seqLen, vocab], twice over (its buffer reused).
	for round := range 2 {
		out, err := g.model.LogitsTensor(g.ids, g.mask, g.batch, g.seqLen)
		if err != nil {
			t.Fatal(err)
		}
		if dims := out.Shape().Dimensions; len(dims) != 3 || dims[0] != g.batch || dims[1] != g.seqLen || dims[2] != g.model.Config.VocabSize {
			t.Fatalf("round %d: LogitsTensor shape %s, want [%d, %d, %d]", round, out.Shape(), g.batch, g.seqLen, g.model.Config.VocabSize)
		}
		tensors.ConstFlatData(out, func(flat []float32) {
			for i := range want {
				if math.Float32bits(flat[i]) != math.Float32bits(want[i]) {
					t.Fatalf("round %d: LogitsTensor logit %d = %g, Logits gave %g", round, i, flat[i], want[i])
				}
			}
		})
		out.FinalizeAll()
	}
	bad := slices.Clone(g.ids)
	bad[1] = int32(g.model.Config.VocabSize)
	if _, err := g.model.LogitsTensor(bad, g.mask, g.batch, g.seqLen); err == nil || !strings.Contains(err.Error(), "at index 1") {
		t.Errorf("LogitsTensor with id %d at index 1: err = %v, want one naming index 1", bad[1], err)
	}
	for _, tc := range []struct {
		name         string
		n, batch, sl int
		wantErr      string
	}{
		{"short buffer", len(want) - 1, g.batch, g.seqLen, "output buffer holds"},
		{"long buffer", len(want) + 1, g.batch, g.seqLen, "output buffer holds"},
		{"zero batch", len(want), 0, g.seqLen, "want 0×"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]float32, tc.n)
			err := g.model.LogitsInto(buf, g.ids, g.mask, tc.batch, tc.sl)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
			for i, v := range buf {
				if v != 0 {
					t.Fatalf("buffer written at %d on error", i)
				}
			}
		})
	}
}

// TestGoldenGreedy checks that the KV-cache generator reproduces the
// reference's greedy continuation of row 0 (computed without a cache).
func TestGoldenGreedy(t *testing.T) {
	for _, name := range goldenModels {
		t.Run(name, func(t *testing.T) {
			g := loadGolden(t, name)
			res, err := g.model.Generate([][]int{g.row(0)}, GenerateOptions{MaxNewTokens: len(g.greedy), EOS: []int{}}, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := res[0].IDs
			if len(got) != len(g.greedy) {
				t.Fatalf("generated %d tokens, want %d", len(got), len(g.greedy))
			}
			for i := range got {
				if got[i] != g.greedy[i] {
					t.Fatalf("token %d: got %v, want %v", i, got, g.greedy)
				}
			}
		})
	}
}
