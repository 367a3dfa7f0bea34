package conformal

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestWalkthroughNumbers runs the default walkthrough (what cas demo prints)
// and checks the claims its tables make.
func TestWalkthroughNumbers(t *testing.T) {
	cfg := WalkthroughConfig{}.withDefaults()
	if testing.Short() {
		cfg.Splits, cfg.TestQueries = 60, 1000
	}
	aps, err := walkAPS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var prevK float64
	for i, r := range aps.rows {
		if r.fixedTopK {
			continue
		}
		// Marginal coverage over fresh splits meets 1−α (within 3 s.e.).
		if r.avg < 1-r.alpha-3*r.se {
			t.Errorf("%s α=%v: mean coverage %.4f ± %.4f below %.2f", r.name, r.alpha, r.avg, r.se, 1-r.alpha)
		}
		if r.meanK < float64(r.aps.MinDocs) || r.meanK > float64(r.aps.MaxDocs) {
			t.Errorf("%s α=%v: mean k %.2f outside the clamp", r.name, r.alpha, r.meanK)
		}
		// Paper rows are ordered by decreasing α: sets grow.
		if r.name == "paper" && i > 0 && r.meanK < prevK {
			t.Errorf("α=%v: mean k %.2f smaller than at the larger α (%.2f)", r.alpha, r.meanK, prevK)
		}
		prevK = r.meanK
	}
	// APS at α = 0.35 keeps fewer passages than fixed top-5 and more golds than top-3.
	first, top3 := aps.rows[0], aps.rows[4]
	if !top3.fixedTopK || first.kept <= top3.kept || first.meanK >= 5 {
		t.Errorf("APS α=.35 (gold kept %.3f, k %.2f) vs top-3 (gold kept %.3f)", first.kept, first.meanK, top3.kept)
	}

	aci, err := walkACI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fixed := aci.lateErr(3)
	if fixed > 0.2 {
		t.Errorf("fixed α late err %.3f: the stream does not drift enough", fixed)
	}
	for i := range 3 {
		e := aci.lateErr(i)
		if math.Abs(e-DefaultRho) > 0.03 || math.Abs(e-DefaultRho) > math.Abs(fixed-DefaultRho)/2 {
			t.Errorf("%s: late mean err %.3f not tracking ρ = %.2f (fixed α: %.3f)", aciNames[i], e, DefaultRho, fixed)
		}
		if a := aci.alpha[i][len(aci.alpha[i])-1]; a <= DefaultRho {
			t.Errorf("%s: final α %.3f should have risen above ρ", aciNames[i], a)
		}
	}
}

// TestWalkthroughDeterministic: same seed, same text; another seed differs.
func TestWalkthroughDeterministic(t *testing.T) {
	small := WalkthroughConfig{CalQueries: 100, TestQueries: 300, Steps: 80, Batch: 16, Splits: 5}
	run := func(seed uint64) string {
		var b bytes.Buffer
		c := small
		c.Seed = seed
		if err := Walkthrough(&b, c); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	a, b, c := run(1), run(1), run(2)
	if a != b {
		t.Error("same seed, different output")
	}
	if a == c {
		t.Error("different seeds, same output")
	}
	for _, want := range []string{"setting", "fixed top-3", "smoothed α", "mean err"} {
		if !strings.Contains(a, want) {
			t.Errorf("output lacks %q:\n%s", want, a)
		}
	}
}
