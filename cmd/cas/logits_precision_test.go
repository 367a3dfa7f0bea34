package main

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// TestLogitsCmdBF16: `cas logits --precision bf16` runs the golden models
// in bfloat16: close to the float32 reference (max |Δ| ≤ 10% of max
// |logit|, as model/qwen's TestBF16Logits), yet not equal to it.
func TestLogitsCmdBF16(t *testing.T) {
	for _, name := range []string{"qwen2-tiny", "qwen3-tiny"} {
		t.Run(name, func(t *testing.T) {
			maxErr, maxAbs := goldenLogitErr(t, name, "--precision", "bf16")
			if maxErr > 0.1*maxAbs || maxErr < 1e-6*maxAbs {
				t.Errorf("bf16 max |Δlogit| %g, want in [1e-6, 0.1] · %g", maxErr, maxAbs)
			}
		})
	}
	dir := filepath.Dir(sharedtest.Path(t, "golden", "qwen2-tiny", "config.json"))
	_, _, err := runCas(t, "logits", "--model", dir, "--in", filepath.Join(dir, "expected.safetensors"),
		"--out", filepath.Join(t.TempDir(), "x.safetensors"), "--precision", "fp16")
	if err == nil || !strings.Contains(err.Error(), "--precision") {
		t.Errorf("--precision fp16: err %v", err)
	}
}

// maskedLogitErr returns max |got − want| and max |want| over the positions
// whose attention mask is 1 (logits [B, T, V], mask [B, T]).
func maskedLogitErr(t *testing.T, got, want []float32, mask []int64) (maxErr, maxAbs float64) {
	t.Helper()
	if len(got) != len(want) || len(mask) == 0 {
		t.Fatalf("%d logits, want %d (mask %d)", len(got), len(want), len(mask))
	}
	v := len(want) / len(mask)
	for i := range want {
		if mask[i/v] == 1 {
			maxErr = math.Max(maxErr, math.Abs(float64(got[i]-want[i])))
			maxAbs = math.Max(maxAbs, math.Abs(float64(want[i])))
		}
	}
	return maxErr, maxAbs
}
