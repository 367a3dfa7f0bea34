package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAblateTiny runs the whole pipeline twice (two seeds of the tiny
// preset on one world) through Ablate and checks what a user opens: each
// seed's report with the measurement sections, the ablation table with
// per-seed values and the words on noise, and the figure.
func TestAblateTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("two tiny end-to-end runs")
	}
	out := t.TempDir()
	ab, err := Ablate(context.Background(), TinyConfig(1), []uint64{1, 2}, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ab.Table3) != 4 || ab.Table3[2].Name != VariantCAS || len(ab.Table3[2].EM.Runs) != 2 {
		t.Fatalf("table 3: %+v", ab.Table3)
	}
	cas, noACI := ab.Table3[2], ab.Table3[3]
	if cas.VsWarm == nil || !cas.VsWarm.Paired || noACI.VsDefault == nil || len(cas.LowConf.Runs) != 2 || cas.Questions != 12 {
		t.Errorf("differences or ACI columns missing: %+v / %+v", cas, noACI)
	}
	md, err := os.ReadFile(filepath.Join(out, AblationFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Overall per seed", "Which differences exceed their noise", "twice its standard error", "training seeds 1, 2"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("%s lacks %q:\n%s", AblationFile, want, md)
		}
	}
	for _, f := range []string{filepath.Join(out, AblationPNG), filepath.Join(out, "seed-2", PlotsDir, ACIPNG), filepath.Join(out, "seed-1", PlotsDir, ReliabilityPNG)} {
		if st, err := os.Stat(f); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", f, err)
		}
	}
	rep, err := os.ReadFile(filepath.Join(out, "seed-1", ReportFile))
	if err != nil || !strings.Contains(string(rep), "ACI's low-confidence ratio against ρ") || !strings.Contains(string(rep), "Reliability: answer-span NLL bins") {
		t.Errorf("seed-1 report lacks the measurements (%v)", err)
	}
}
