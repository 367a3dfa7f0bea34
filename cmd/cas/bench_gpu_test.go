package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/bench/gpubench"
	"github.com/cas-engine/cas/internal/sharedtest"
)

// TestBenchGPUDecodeOnly: the decode part alone on the tiny shape in both
// precisions writes its rows (weight bytes 2 and 4 per parameter) and the
// HBM bound from --hbm-gbps; nothing of the GRPO part runs.
func TestBenchGPUDecodeOnly(t *testing.T) {
	for _, p := range []struct {
		name  string
		bytes int64
	}{{"bf16", 2}, {"f32", 4}} {
		t.Run(p.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "reports", "bench.json") // reports/ does not exist yet
			if _, stderr, err := runCas(t, "bench", "gpu", "--shapes", "tiny", "--precision", p.name, "--batches", "1,2",
				"--prompt-len", "32", "--new-tokens", "4", "--hbm-gbps", "100", "--out", out); err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var r gpubench.Report
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Decode) != 1 || len(r.GRPO) != 0 || len(r.Errors) != 0 {
				t.Fatalf("report %s", raw)
			}
			d := r.Decode[0]
			if d.WeightBytes != d.Parameters*p.bytes || d.Decode["batch1"] <= 0 || d.Decode["batch2"] <= 0 || d.PrefillTokS <= 0 {
				t.Errorf("row %+v", d)
			}
			bound := 100e9 / float64(d.WeightBytes)
			if math.Abs(d.HBMBoundTokS-bound) > 1e-6*bound || math.Abs(d.OfBound-d.Decode["batch1"]/bound) > 1e-9 {
				t.Errorf("bound %g (want %g), of bound %g", d.HBMBoundTokS, bound, d.OfBound)
			}
		})
	}
}

// TestBenchGPUOutUnderFile: an --out that cannot be created (its folder
// would be a file) fails before anything is measured, naming the flag.
func TestBenchGPUOutUnderFile(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(blocker, "bench.json")
	_, stderr, err := runCas(t, "bench", "gpu", "--shapes", "tiny", "--hbm-gbps", "100", "--out", out)
	if err == nil || !strings.Contains(err.Error(), "--out "+out) {
		t.Fatalf("err %v, want one naming --out %s", err, out)
	}
	if strings.Contains(stderr, "decode tiny") {
		t.Errorf("measured before failing:\n%s", stderr)
	}
}

// TestBenchGPUGRPOQwenTokenizerTooLarge: the tiny shape's vocabulary cannot
// hold the Qwen tokenizer's ids: the GRPO part fails with a message naming
// both, the report is still written with the error, and the exit is 1.
func TestBenchGPUGRPOQwenTokenizerTooLarge(t *testing.T) {
	tok := sharedtest.Path(t, "tokenizers", "qwen3", "tokenizer.json")
	out := filepath.Join(t.TempDir(), "bench.json")
	_, _, err := runCas(t, "bench", "gpu", "--shapes", "", "--grpo-shape", "tiny", "--tokenizer", tok, "--out", out)
	if err == nil || !strings.Contains(err.Error(), "more than the 1024 of shape tiny") {
		t.Fatalf("err %v", err)
	}
	raw, rerr := os.ReadFile(out)
	if rerr != nil || !strings.Contains(string(raw), "more than the 1024") {
		t.Fatalf("report %s (%v)", raw, rerr)
	}
}

func TestBenchGPUFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shapes", "qwen9-1T"}, `unknown model shape "qwen9-1T"`},
		{[]string{"--grpo-shape", "huge"}, `unknown model shape "huge"`},
		{[]string{"--precision", "fp8"}, "--precision"},
		{[]string{"--grpo-precision", "int4", "--shapes", ""}, "--grpo-precision"},
		{[]string{"--shapes", "", "--grpo-shape", "tiny", "--tokenizer", "/nonexistent/tokenizer.json"}, "--tokenizer"},
	} {
		out := filepath.Join(t.TempDir(), "bench.json")
		_, _, err := runCas(t, append([]string{"bench", "gpu", "--out", out}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("%v: a report was written for a flag error", tc.args)
		}
	}
}
