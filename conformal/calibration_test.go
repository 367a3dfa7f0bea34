package conformal

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/wanterr"
)

func TestParseCalibration(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		qhatLog  float64
		aps      APS
		err      string
	}{
		{"legacy E scale", `{"qhat": 0.93, "temperature": 0.01, "min_docs": 2, "max_docs": 5}`, -math.Log1p(-0.93), CodeAPS(), ""},
		{"legacy +Inf", `{"qhat": "+Inf"}`, math.Inf(1), PaperAPS(), ""},
		{"legacy E = 1 keeps all", `{"qhat": 1}`, math.Inf(1), PaperAPS(), ""},
		{"log scale decides", `{"qhat": 1, "qhat_log": 500, "temperature": 0.01}`, 500, PaperAPS(), ""},
		{"log scale alone", `{"qhat_log": 2, "temperature": 1}`, 2, APS{Temperature: 1, MinDocs: 1, MaxDocs: 5}, ""},
		{"scales disagree", `{"qhat": 0.5, "qhat_log": 3}`, 0, APS{}, "disagrees"},
		{"no threshold", `{"n": 3}`, 0, APS{}, `no "qhat_log" or "qhat"`},
		{"NaN", `{"qhat": "NaN"}`, 0, APS{}, "NaN"},
		{"bad temperature", `{"qhat": 0.5, "temperature": -1}`, 0, APS{}, "temperature"},
		{"bad clamps", `{"qhat": 0.5, "min_docs": 6}`, 0, APS{}, "exceeds"},
		{"bad alpha", `{"qhat": 0.5, "alpha": 2}`, 0, APS{}, "alpha"},
		{"bad candidates", `{"qhat": 0.5, "candidates": -2}`, 0, APS{}, "candidates"},
		{"bad rule", `{"qhat": 0.5, "quantile": "median"}`, 0, APS{}, "quantile rule"},
		{"not an object", `[1]`, 0, APS{}, "parse"},
	} {
		c, err := ParseCalibration([]byte(tc.in))
		if wanterr.Check(t, tc.name, err, tc.err) {
			continue
		}
		if err != nil || float64(c.QHatLog) != tc.qhatLog || c.APS != tc.aps {
			t.Errorf("%s: %+v, %v", tc.name, c, err)
		}
	}
	if _, err := LoadCalibration("/nonexistent/qhat.json"); err == nil || !strings.Contains(err.Error(), "/nonexistent/qhat.json") {
		t.Errorf("LoadCalibration of a missing file: %v", err)
	}
}

// TestCalibrationSaveLoad round-trips a calibration through its file and
// checks the warnings and the candidate count at use time.
func TestCalibrationSaveLoad(t *testing.T) {
	// BM25-scale: q̂_E rounds to 1, q̂_S does not.
	qs := []Query{{[]float64{20, 12, 9}, 0}, {[]float64{18, 17, 3}, 1}, {[]float64{25, 11, 10}, 0}, {[]float64{15, 14.5, 14}, 2}}
	c, err := APS{Temperature: 0.01, MinDocs: 1, MaxDocs: 5}.Calibrate(qs, 0.5, RuleConformal, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.QHat != 1 || math.IsInf(float64(c.QHatLog), 1) || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "rounds to 1") {
		t.Fatalf("q̂_E %v q̂_S %v warnings %q", c.QHat, c.QHatLog, c.Warnings)
	}
	path := filepath.Join(t.TempDir(), "qhat.json")
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCalibration(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.QHatLog != c.QHatLog || got.APS != c.APS || got.Candidates != 3 || got.CalibCandidates != 3 || got.N != 4 || got.Rule != RuleConformal {
		t.Errorf("loaded %+v, saved %+v", got, c)
	}
	for _, q := range qs {
		if got.Keep(q.Scores) != c.Keep(q.Scores) {
			t.Errorf("kept counts differ after a round trip")
		}
	}
	// Keeping from 1 candidate at use time cuts the gold of ranks 2 and 3.
	c.UseCandidates(1, qs)
	if c.Candidates != 1 || c.KeptCoverage != 0.5 || c.MeanKept != 1 || !strings.Contains(strings.Join(c.Warnings, "\n"), "far below the score coverage") {
		t.Errorf("UseCandidates(1): %+v", c)
	}
	// n too small for α: +Inf and a warning.
	c, _ = PaperAPS().Calibrate(qs[:2], 0.1, RuleConformal, nil)
	if !math.IsInf(float64(c.QHatLog), 1) || len(c.Warnings) == 0 || !strings.Contains(c.Warnings[0], "too small") {
		t.Errorf("small n: %+v", c)
	}
	// A report that does not parse as a calibration is never written.
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := SaveReport(bad, map[string]any{"n": 1}); err == nil {
		t.Error("SaveReport wrote a file without a threshold")
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("bad report left a file: %v", err)
	}
}

func FuzzParseCalibration(f *testing.F) {
	f.Add([]byte(`{"qhat": 0.93, "temperature": 0.01, "min_docs": 2, "max_docs": 5}`))
	f.Add([]byte(`{"qhat": "+Inf", "qhat_log": "+Inf"}`))
	f.Add([]byte(`{"qhat_log": "-Inf", "min_docs": -1}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCalibration(b)
		if err != nil {
			return
		}
		if math.IsNaN(float64(c.QHatLog)) || c.Validate() != nil {
			t.Fatalf("accepted %q as %+v", b, c)
		}
		c.Keep([]float64{3, 2, 1})
	})
}

// TestCalibrationWarnsNoGold: a threshold that is +Inf because too many
// queries have no gold says so (not that n is too small).
func TestCalibrationWarnsNoGold(t *testing.T) {
	var qs []Query
	for i := range 20 {
		g := 0
		if i%3 == 0 {
			g = NoGold
		}
		qs = append(qs, Query{[]float64{3, 2, 1}, g})
	}
	c, err := PaperAPS().Calibrate(qs, 0.2, RuleConformal, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(float64(c.QHatLog), 1) || len(c.Warnings) == 0 || !strings.Contains(c.Warnings[0], "7 have no gold") {
		t.Errorf("q̂_S %v warnings %q", c.QHatLog, c.Warnings)
	}
}
