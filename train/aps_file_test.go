package train

import (
	"path/filepath"
	"testing"

	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/wanterr"
)

// TestLoadAPSChecked: the trainer reads the one calibration file type and
// refuses a file made for another level or another candidate count.
func TestLoadAPSChecked(t *testing.T) {
	dir := t.TempDir()
	save := func(name string, c conformal.Calibration) string {
		p := filepath.Join(dir, name)
		if err := c.Save(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := conformal.Calibration{APS: conformal.PaperAPS(), Alpha: 0.2, QHat: 1, QHatLog: 365, CalibCandidates: 5, Candidates: 5}
	code := base
	code.CalibCandidates = 20
	legacy := filepath.Join(dir, "legacy.json")
	if err := writeFileAtomic(legacy, []byte(`{"qhat": 0.9, "temperature": 1}`)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		alpha      float64
		candidates int
		err        string
	}{
		{"same level and count", save("a.json", base), 0.2, 5, ""},
		{"the code's 20/5", save("code.json", code), 0.2, 5, ""},
		{"level not checked", save("b.json", base), 0, 5, ""},
		{"other level", save("c.json", base), 0.1, 5, "calibrated at alpha 0.2"},
		{"other count", save("d.json", base), 0.2, 20, "calibrated for 5 candidates per search, the config says aps.candidates 20"},
		{"legacy file records no count", legacy, 0.2, 20, ""},
		{"missing file", filepath.Join(dir, "none.json"), 0.2, 5, "none.json"},
	} {
		c, err := loadAPSChecked(tc.path, tc.alpha, tc.candidates)
		if wanterr.Check(t, tc.name, err, tc.err) {
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		} else if tc.path == legacy && float64(c.QHatLog) != conformal.LogScoreFromE(0.9) {
			t.Errorf("%s: q̂_S %v", tc.name, c.QHatLog)
		}
	}
}
