package conformal

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cas-engine/cas/conformal/apsexact"
)

// TestAPSLogSpaceMatchesExact calibrates on BM25-scale scores (gaps of whole
// units) at the paper's T = 0.01 and at T = 1, α = 0.2 and 0.1, and compares
// the threshold and every held-out query's kept count with the independent
// exact log-space reference. At T = 0.01 the float64 E-scale rule saturates
// (c_1 rounds to 1): the test also shows that it would keep far fewer
// documents, so the agreement is not vacuous.
func TestAPSLogSpaceMatchesExact(t *testing.T) {
	for _, tc := range []struct {
		name     string
		temp     float64
		alpha    float64
		num, den int // 1 − α
	}{
		{"T=0.01 α=0.2", 0.01, 0.2, 4, 5},
		{"T=0.01 α=0.1", 0.01, 0.1, 9, 10},
		{"T=1 α=0.2", 1, 0.2, 4, 5},
		{"T=1 α=0.1", 1, 0.1, 9, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(17, uint64(tc.temp*100)))
			cal := apsexact.BM25Queries(rng, 500, 20)
			test := apsexact.BM25Queries(rng, 2000, 20)
			qs := make([]Query, len(cal))
			for i, q := range cal {
				qs[i] = Query{Scores: q.Scores, Gold: q.Gold}
			}
			a := APS{Temperature: tc.temp, MinDocs: PaperMinDocs, MaxDocs: PaperMaxDocs}
			c, err := a.Calibrate(qs, tc.alpha, RuleConformal, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := apsexact.Threshold(cal, tc.temp, tc.num, tc.den)
			if got := float64(c.QHatLog); math.IsInf(got, 0) || math.Abs(got-want) > 1e-9*math.Max(1, want) {
				t.Fatalf("q̂_S = %v, exact %v", got, want)
			}
			// The old float64 E-scale rule: q̂_E as the order statistic of c_r.
			eScale := make([]float64, len(cal))
			for i, q := range qs {
				_, _, cum := a.Probabilities(q.Scores)
				eScale[i] = 1
				if q.Gold != NoGold {
					eScale[i] = cum[rankOf(q.Scores, q.Gold)]
				}
			}
			qE := Quantile(eScale, 1-tc.alpha, RuleConformal)
			agree, oldAgree, covered, sum, exactSum := 0, 0, 0, 0, 0
			for _, q := range test {
				exact := apsexact.Kept(q, tc.temp, want, PaperMinDocs, PaperMaxDocs)
				got := c.Keep(q.Scores)
				sum += got
				exactSum += exact
				if got == exact {
					agree++
				}
				if oldKeep(a, q.Scores, qE) == exact {
					oldAgree++
				}
				if q.Gold != NoGold {
					if s, _ := a.LogScore(q.Scores, q.Gold); s <= float64(c.QHatLog) {
						covered++
					}
				}
			}
			n := float64(len(test))
			rate, cov := float64(agree)/n, float64(covered)/n
			t.Logf("q̂_S %.6g (q̂_E %.17g, float64 E-scale q̂ %.17g): agreement %.4f (float64 E-scale rule %.4f), mean kept %.3f (exact %.3f), score coverage %.3f",
				want, float64(c.QHat), qE, rate, float64(oldAgree)/n, float64(sum)/n, float64(exactSum)/n, cov)
			if rate < 0.99 {
				t.Errorf("kept counts agree with exact arithmetic on %.4f of queries, want ≥ 0.99", rate)
			}
			// Held-out score coverage near 1 − α (n = 500: ±0.04 is > 2σ).
			if math.Abs(cov-(1-tc.alpha)) > 0.04 {
				t.Errorf("held-out coverage %.3f, want ≈ %.2f", cov, 1-tc.alpha)
			}
			if tc.temp == 0.01 && float64(oldAgree)/n > 0.9 {
				t.Errorf("the float64 E-scale rule agrees on %.3f: the test data do not saturate it", float64(oldAgree)/n)
			}
		})
	}
}

// oldKeep is the float64 E-scale rule this package used before: k = min{k :
// c_k ≥ q̂_E} on Probabilities' cumulative mass, clamped.
func oldKeep(a APS, scores []float64, qhatE float64) int {
	_, _, cum := a.Probabilities(scores)
	k := len(scores)
	for j, c := range cum {
		if c >= qhatE {
			k = j + 1
			break
		}
	}
	return a.clamp(k, len(scores))
}

// TestAPSE5ScaleUnchanged checks that on E5-scale cosine scores (where
// float64 E-scale arithmetic is exact enough) the log-space rule gives the
// same thresholds and kept counts as the E-scale rule did.
func TestAPSE5ScaleUnchanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, alpha := range []float64{0.05, 0.1, 0.2, 0.35} {
		for _, rule := range []QuantileRule{RuleConformal, RuleHigher, RuleLinear} {
			cal := make([]Query, 300)
			for i := range cal {
				cal[i] = simQuery(rng, 20)
			}
			a := PaperAPS()
			c, err := a.Calibrate(cal, alpha, rule, nil)
			if err != nil {
				t.Fatal(err)
			}
			eScale := make([]float64, len(cal))
			for i, q := range cal {
				_, _, cum := a.Probabilities(q.Scores)
				eScale[i] = cum[rankOf(q.Scores, q.Gold)]
			}
			qE := Quantile(eScale, 1-alpha, rule)
			if math.Abs(float64(c.QHat)-qE) > 1e-12 {
				t.Errorf("α=%v %v: q̂_E %v, E-scale rule %v", alpha, rule, float64(c.QHat), qE)
			}
			differ := 0
			for range 1000 {
				q := simQuery(rng, 20)
				if c.Keep(q.Scores) != oldKeep(a, q.Scores, qE) {
					differ++
				}
			}
			if differ > 0 {
				t.Errorf("α=%v %v: %d of 1000 kept counts changed", alpha, rule, differ)
			}
		}
	}
}
