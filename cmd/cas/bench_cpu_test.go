package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/wanterr"
)

func TestBenchCPUCommand(t *testing.T) {
	tmp := t.TempDir()
	jsonPath := filepath.Join(tmp, "out", "cpu.json") // its folder does not exist yet
	blocker := filepath.Join(tmp, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		wantOut string
		wantErr string
	}{
		{"gemm only", []string{"bench", "cpu", "--models", "none", "--sizes", "32", "--min-time", "1ms", "--no-peer", "--threads", "2", "--json", jsonPath}, "| 32³ x·Wᵀ | 2 |", ""},
		{"unknown model", []string{"bench", "cpu", "--models", "gpt5", "--no-peer"}, "", `unknown model "gpt5"`},
		{"json under a file", []string{"bench", "cpu", "--models", "none", "--sizes", "32", "--no-peer", "--json", filepath.Join(blocker, "cpu.json")}, "", "--json " + filepath.Join(blocker, "cpu.json")},
		{"zero rounds", []string{"bench", "cpu", "--rounds", "0", "--no-peer"}, "", "--rounds 0: want at least 1"},
		{"bad config", []string{"bench", "cpu", "--config", "/nonexistent/config.json", "--no-peer"}, "", "nonexistent"},
		{"rounds", []string{"bench", "cpu", "--models", "none", "--config", sharedtest.Path(t, "golden", "qwen3-tiny", "config.json"), "--sizes", "32",
			"--min-time", "1ms", "--batch", "2", "--seqlen", "8", "--steps", "1", "--decode-tokens", "2", "--rounds", "2", "--no-peer", "--threads", "2"}, "in 2 alternated rounds", ""},
		{"decode only", []string{"bench", "cpu", "--decode-only", "--models", "none", "--config", sharedtest.Path(t, "golden", "qwen3-tiny", "config.json"),
			"--decode-tokens", "4", "--min-time", "1ms", "--threads", "2"}, "In process CPU time per token", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := runCas(t, c.args...)
			if wanterr.Check(t, c.name, err, c.wantErr) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// --decode-only measures decoding alone: no FMA peak, no GEMM.
			if !strings.Contains(out, c.wantOut) || strings.Contains(out, "FMA peak") != !slices.Contains(c.args, "--decode-only") {
				t.Fatalf("output lacks %q:\n%s", c.wantOut, out)
			}
		})
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		PeakFMA float64
		GEMM    []struct{ GFLOPS float64 }
	}
	if err := json.Unmarshal(data, &r); err != nil || r.PeakFMA <= 0 || len(r.GEMM) == 0 || r.GEMM[0].GFLOPS <= 0 {
		t.Fatalf("json report %s: %v", data, err)
	}
}
