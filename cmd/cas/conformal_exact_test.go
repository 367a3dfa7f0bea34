package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/conformal/apsexact"
)

// TestConformalAPSBM25Exact runs what a user runs on BM25-scale scores:
// `calibrate-aps --out FILE` then `aps --calibration FILE --in q.jsonl`, at
// T = 0.01 and T = 1, α = 0.2 and 0.1, and compares every kept set with the
// exact log-space reference (≥ 99% of queries must agree; all do).
func TestConformalAPSBM25Exact(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(23, 29))
	cal, test := apsexact.BM25Queries(rng, 300, 20), apsexact.BM25Queries(rng, 1000, 20)
	jsonl := func(name string, qs []apsexact.Query) string {
		var b strings.Builder
		for _, q := range qs {
			line, _ := json.Marshal(map[string]any{"scores": q.Scores, "gold": q.Gold})
			b.Write(append(line, '\n'))
		}
		return conformalWrite(t, name, b.String())
	}
	calPath, testPath := jsonl("cal.jsonl", cal), jsonl("test.jsonl", test)
	for _, tc := range []struct {
		temp, alpha string
		t           float64
		num, den    int
	}{
		{"0.01", "0.2", 0.01, 4, 5}, {"0.01", "0.1", 0.01, 9, 10}, {"1", "0.2", 1, 4, 5}, {"1", "0.1", 1, 9, 10},
	} {
		name := fmt.Sprintf("T=%s α=%s", tc.temp, tc.alpha)
		file := filepath.Join(dir, "cal-"+tc.temp+"-"+tc.alpha+".json")
		if _, _, err := runCasIn(t, "", "conformal", "calibrate-aps", "--in", calPath, "--alpha", tc.alpha, "--temperature", tc.temp, "--out", file); err != nil {
			t.Fatalf("%s: calibrate-aps: %v", name, err)
		}
		out, _, err := runCasIn(t, "", "conformal", "aps", "--calibration", file, "--in", testPath)
		if err != nil {
			t.Fatalf("%s: aps: %v", name, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(test) {
			t.Fatalf("%s: %d output lines for %d queries", name, len(lines), len(test))
		}
		qhat := apsexact.Threshold(cal, tc.t, tc.num, tc.den)
		agree, kept := 0, 0
		for i, l := range lines {
			var r struct {
				K    int   `json:"k"`
				Kept []int `json:"kept"`
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			want := apsexact.Kept(test[i], tc.t, qhat, 1, 5)
			kept += r.K
			// Retrieval order is descending here, so the kept set is the prefix.
			if r.K == want && len(r.Kept) == want && (want == 0 || r.Kept[want-1] == want-1) {
				agree++
			}
		}
		rate := float64(agree) / float64(len(test))
		t.Logf("%s: q̂_S %.6g, agreement %.4f, mean kept %.3f", name, qhat, rate, float64(kept)/float64(len(test)))
		if rate < 0.99 {
			t.Errorf("%s: kept sets agree with exact arithmetic on %.4f of queries, want ≥ 0.99", name, rate)
		}
	}
}
