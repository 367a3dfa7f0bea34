package conformal

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Hand computation for scores [0.80, 0.82, 0.79], T = 0.01: descending order
// is indices [1, 0, 2], exps [1, e^-2, e^-3], Z = 1 + e^-2 + e^-3 = 1.1851221,
// p = [1/Z, e^-2/Z, e^-3/Z] = [0.8437947, 0.1141952, 0.0420101],
// c = [0.8437947, 0.9579899, 1].
var (
	goldenScores = []float64{0.80, 0.82, 0.79}
	goldenZ      = 1 + math.Exp(-2) + math.Exp(-3)
	goldenP      = []float64{1 / goldenZ, math.Exp(-2) / goldenZ, math.Exp(-3) / goldenZ}
)

func TestAPSProbabilitiesGolden(t *testing.T) {
	order, p, cum := PaperAPS().Probabilities(goldenScores)
	if !slices.Equal(order, []int{1, 0, 2}) {
		t.Fatalf("order = %v, want [1 0 2]", order)
	}
	wantCum := []float64{0.8437947344813395, 0.9579899338659339, 1}
	for j := range p {
		if !near(p[j], goldenP[j], 1e-12) || !near(cum[j], wantCum[j], 1e-12) {
			t.Errorf("rank %d: p=%v cum=%v, want p=%v cum=%v", j+1, p[j], cum[j], goldenP[j], wantCum[j])
		}
	}
	if cum[2] != 1 {
		t.Errorf("c_n = %v, want exactly 1", cum[2])
	}
	// Stability: huge scores and a tiny temperature must not overflow.
	_, p2, cum2 := APS{Temperature: 1e-6}.Probabilities([]float64{1e6, 1e6 - 1e-5, -1e6})
	if math.IsNaN(p2[0]) || cum2[2] != 1 || !near(p2[0], 1/(1+math.Exp(-10)), 1e-7) {
		t.Errorf("unstable softmax: p=%v cum=%v", p2, cum2)
	}
	// Ties keep input order.
	order, _, _ = PaperAPS().Probabilities([]float64{0.5, 0.7, 0.5, 0.7})
	if !slices.Equal(order, []int{1, 3, 0, 2}) {
		t.Errorf("tie order = %v, want [1 3 0 2]", order)
	}
}

func TestAPSScoreGolden(t *testing.T) {
	a := PaperAPS()
	cases := []struct {
		gold int
		u    float64 // < 0: plain score
		want float64
	}{
		{1, -1, goldenP[0]},                     // rank 1: c_1
		{0, -1, goldenP[0] + goldenP[1]},        // rank 2: c_2 = 0.9579899
		{2, -1, 1},                              // rank 3: c_3
		{NoGold, -1, 1},                         // absent: 1
		{0, 0.5, goldenP[0] + 0.5*goldenP[1]},   // c_1 + U·p_2 = 0.9008923
		{1, 0, 0},                               // c_0 + 0·p_1
		{2, 1, 1},                               // c_2 + 1·p_3
		{NoGold, 0.3, 1},                        // absent: 1
		{0, 0.25, goldenP[0] + 0.25*goldenP[1]}, // 0.8723435
		{1, 0.75, 0.75 * goldenP[0]},            // 0.6328461
		{2, 0.5, goldenP[0] + goldenP[1] + 0.5*goldenP[2]},
	}
	for _, c := range cases {
		var got float64
		var err error
		if c.u < 0 {
			got, err = a.Score(goldenScores, c.gold)
		} else {
			got, err = a.RandomizedScore(goldenScores, c.gold, c.u)
		}
		if err != nil || !near(got, c.want, 1e-12) {
			t.Errorf("gold %d u %v: got %v (%v), want %v", c.gold, c.u, got, err, c.want)
		}
	}
	if s, _ := a.RandomizedScore(goldenScores, 0, 0.5); !near(s, 0.9008923341736367, 1e-12) {
		t.Errorf("randomized golden: %v", s)
	}
}

func TestAPSScoreErrors(t *testing.T) {
	a := PaperAPS()
	for _, c := range []struct {
		scores []float64
		gold   int
		want   string
	}{
		{nil, 0, "empty"},
		{[]float64{1, math.NaN()}, 0, "score 1 is NaN"},
		{[]float64{1, math.Inf(1)}, 0, "score 1 is +Inf"},
		{[]float64{1, 2}, 2, "out of range"},
		{[]float64{1, 2}, -2, "out of range"},
	} {
		if _, err := a.Score(c.scores, c.gold); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Score(%v, %d) error = %v, want %q", c.scores, c.gold, err, c.want)
		}
	}
	if _, err := a.RandomizedScore([]float64{1}, 0, 1.5); err == nil {
		t.Error("u = 1.5 accepted")
	}
	if _, err := (APS{}).Score([]float64{1}, 0); err == nil {
		t.Error("zero temperature accepted")
	}
}

func TestAPSKeepGolden(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		aps  APS
		qhat float64
		want int
	}{
		{APS{Temperature: 0.01}, 0.5, 1},  // c_1 = 0.844 ≥ 0.5
		{APS{Temperature: 0.01}, 0.9, 2},  // c_1 < 0.9 ≤ c_2 = 0.958
		{APS{Temperature: 0.01}, 0.96, 3}, // c_2 < 0.96 ≤ c_3
		{APS{Temperature: 0.01}, 1, 3},
		{APS{Temperature: 0.01}, inf, 3},
		{APS{Temperature: 0.01}, math.NaN(), 3},
		{APS{Temperature: 0.01}, 0, 0}, // empty set before clamps
		{APS{Temperature: 0.01}, math.Inf(-1), 0},
		{PaperAPS(), 0, 1}, // clamp to min 1
		{PaperAPS(), 0.5, 1},
		{CodeAPS(), 0.5, 2}, // clamp to min 2
		{CodeAPS(), 0.9, 2},
		{APS{Temperature: 0.01, MaxDocs: 2}, 0.99, 2},
		{APS{Temperature: 0.01, MinDocs: 5}, 0.5, 3}, // only 3 candidates
		{APS{Temperature: 1}, 0.5, 2},                // flat softmax: c = [.34, .67, 1]
	}
	for i, c := range cases {
		if got := c.aps.Keep(goldenScores, c.qhat); got != c.want {
			t.Errorf("case %d %+v q̂=%v: k=%d, want %d", i, c.aps, c.qhat, got, c.want)
		}
	}
	if got := PaperAPS().KeepIndices(goldenScores, 0.9); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("KeepIndices = %v, want [1 0]", got)
	}
	if got := PaperAPS().Keep(nil, 0.5); got != 0 {
		t.Errorf("Keep(nil) = %d", got)
	}
}

// TestAPSKeepMatchesCum checks Keep against the definition on Probabilities'
// cumulative mass for random inputs, including more than 64 candidates, and
// KeepLog against LogScores exactly (a threshold equal to a rank's score
// keeps that rank). On the E scale the two roundings of c_k may differ in
// the last bit, so a threshold within 1e-12 of a prefix mass may land on
// either side.
func TestAPSKeepMatchesCum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	a := APS{Temperature: 0.01}
	for trial := range 2000 {
		n := 1 + rng.IntN(100)
		s := make([]float64, n)
		for i := range s {
			s[i] = 0.8 + 0.03*rng.NormFloat64()
			if rng.IntN(10) == 0 && i > 0 {
				s[i] = s[i-1] // ties
			}
		}
		_, _, cum := a.Probabilities(s)
		_, ls := a.LogScores(s)
		q := rng.Float64()
		if trial%3 == 0 {
			j := rng.IntN(n)
			q = cum[j] // boundary: exactly a prefix mass
			if got := a.KeepLog(s, ls[j]); got > j+1 {
				t.Fatalf("trial %d: KeepLog(S_%d) = %d, want ≤ %d", trial, j+1, got, j+1)
			}
		}
		want := n
		for j, c := range cum {
			if c >= q {
				want = j + 1
				break
			}
		}
		got := a.Keep(s, q)
		if got != want && !(math.Abs(cum[min(got, want)-1]-q) < 1e-12) {
			t.Fatalf("trial %d n=%d q=%v: Keep=%d, definition=%d", trial, n, q, got, want)
		}
	}
}

func TestAPSValidate(t *testing.T) {
	for _, c := range []struct {
		a  APS
		ok bool
	}{
		{PaperAPS(), true}, {CodeAPS(), true}, {APS{Temperature: 1}, true},
		{APS{}, false}, {APS{Temperature: -1}, false}, {APS{Temperature: math.NaN()}, false},
		{APS{Temperature: math.Inf(1)}, false}, {APS{Temperature: 1, MinDocs: -1}, false},
		{APS{Temperature: 1, MaxDocs: -1}, false}, {APS{Temperature: 1, MinDocs: 3, MaxDocs: 2}, false},
	} {
		if err := c.a.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate() = %v", c.a, err)
		}
	}
}

func TestAPSCalibrate(t *testing.T) {
	a := PaperAPS()
	// Four queries on the golden scores with gold at ranks 1, 2, 3 and absent:
	// E = [0.8438, 0.9580, 1, 1]. α = 0.5, n = 4: k = ⌈5·0.5⌉ = 3 → q̂ = 1.
	qs := []Query{{goldenScores, 1}, {goldenScores, 0}, {goldenScores, 2}, {goldenScores, NoGold}}
	c, err := a.Calibrate(qs, 0.5, RuleConformal, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.QHat != 1 || c.N != 4 || c.Coverage != 1 || c.NoGold != 1 {
		t.Errorf("conformal: %+v", c)
	}
	// q̂ = 1: k = 3 for every query; 3 of 4 golds kept (one absent).
	if c.KeptCoverage != 0.75 || c.MeanKept != 3 {
		t.Errorf("kept: coverage %v mean k %v, want 0.75 and 3", c.KeptCoverage, c.MeanKept)
	}
	// higher: sorted[⌈3·0.5⌉=2] = 1; linear: h = 1.5 → 0.958 + 0.5·(1−0.958).
	c, _ = a.Calibrate(qs, 0.5, RuleHigher, nil)
	if c.QHat != 1 {
		t.Errorf("higher q̂ = %v", c.QHat)
	}
	c, _ = a.Calibrate(qs, 0.5, RuleLinear, nil)
	if want := 0.9579899338659339 + 0.5*(1-0.9579899338659339); !near(float64(c.QHat), want, 1e-12) || c.Coverage != 0.5 {
		t.Errorf("linear q̂ = %v coverage %v, want %v and 0.5", c.QHat, c.Coverage, want)
	}
	// α = 0.1, n = 4: ⌈4.5⌉ = 5 > 4 → +Inf.
	c, _ = a.Calibrate(qs, 0.1, RuleConformal, nil)
	if c.QHat != 1 || !math.IsInf(float64(c.QHatLog), 1) {
		t.Errorf("small n q̂ = %v, want +Inf", c.QHat)
	}
	// Randomized: deterministic for a seed, and different from the plain score.
	r1, _ := a.Calibrate(qs, 0.5, RuleLinear, rand.New(rand.NewPCG(1, 2)))
	r2, _ := a.Calibrate(qs, 0.5, RuleLinear, rand.New(rand.NewPCG(1, 2)))
	if !slices.Equal(r1.Scores, r2.Scores) || !r1.Randomized || EFromLogScore(r1.Scores[0]) >= goldenP[0] {
		t.Errorf("randomized scores %v vs %v", r1.Scores, r2.Scores)
	}
	for _, bad := range []struct {
		qs    []Query
		alpha float64
		want  string
	}{
		{qs, 0, "alpha"}, {qs, 1, "alpha"}, {qs, math.NaN(), "alpha"}, {nil, 0.2, "no calibration"},
		{[]Query{{goldenScores, 0}, {nil, 0}}, 0.2, "query 1: empty"},
		{[]Query{{goldenScores, 5}}, 0.2, "query 0: gold index 5"},
	} {
		if _, err := a.Calibrate(bad.qs, bad.alpha, RuleConformal, nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Calibrate(α=%v) error %v, want %q", bad.alpha, err, bad.want)
		}
	}
}

// simQuery draws one synthetic retrieval query: m candidates with E5-like
// cosine scores around 0.8, the gold one (uniform position) boosted by
// |N(0, 0.02)|. Queries are i.i.d., hence exchangeable, and their APS scores
// are continuous (no ties).
func simQuery(rng *rand.Rand, m int) Query {
	s := make([]float64, m)
	for i := range s {
		s[i] = 0.8 + 0.02*rng.NormFloat64()
	}
	g := rng.IntN(m)
	s[g] += math.Abs(0.02 * rng.NormFloat64())
	return Query{Scores: s, Gold: g}
}

// coverageRun averages, over trials random calibration/test splits of fresh
// synthetic data, the test coverage P(E_test ≤ q̂) and the coverage of the
// truncated (unclamped) set; se is the standard error of the mean coverage.
func coverageRun(t *testing.T, seed uint64, n, m, trials int, alpha float64, rule QuantileRule, randomized bool) (cov, kept, se float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	a := APS{Temperature: DefaultTemperature}
	cal := make([]Query, n)
	var sum, sumSq, keptSum float64
	for range trials {
		for i := range cal {
			cal[i] = simQuery(rng, 10)
		}
		var u *rand.Rand
		if randomized {
			u = rng
		}
		c, err := a.Calibrate(cal, alpha, rule, u)
		if err != nil {
			t.Fatal(err)
		}
		hit, keptHit := 0, 0
		for range m {
			q := simQuery(rng, 10)
			var e float64
			if randomized {
				e, err = a.RandomizedScore(q.Scores, q.Gold, rng.Float64())
			} else {
				e, err = a.Score(q.Scores, q.Gold)
			}
			if err != nil {
				t.Fatal(err)
			}
			if e <= float64(c.QHat) {
				hit++
			}
			if rankOf(q.Scores, q.Gold) < c.Keep(q.Scores) {
				keptHit++
			}
		}
		f := float64(hit) / float64(m)
		sum += f
		sumSq += f * f
		keptSum += float64(keptHit) / float64(m)
	}
	T := float64(trials)
	cov = sum / T
	se = math.Sqrt((sumSq/T - cov*cov) / (T - 1))
	return cov, keptSum / T, se
}

// TestAPSCoverageProperty: with exchangeable data the split-conformal APS
// threshold covers with probability in [1−α, 1−α+1/(n+1)]. With continuous
// scores (the randomized score) the coverage is exactly ⌈(n+1)(1−α)⌉/(n+1);
// the plain score has an atom at E = 1 (gold ranked last), which can only
// raise it. The numpy `higher` rule of the official code covers with
// (⌈(n−1)(1−α)⌉+1)/(n+1), below 1−α for some small n: n = 15, α = 0.1 gives
// 14/16 = 0.875 < 0.9, and n = 8 gives 8/9 = 0.889.
func TestAPSCoverageProperty(t *testing.T) {
	trials := 1500
	if testing.Short() {
		trials = 400
	}
	cases := []struct {
		name       string
		n          int
		alpha      float64
		rule       QuantileRule
		randomized bool
		exact      float64 // expected coverage with continuous scores (randomized)
		valid      bool    // whether the rule guarantees [1−α, 1−α+1/(n+1)]
	}{
		{"conformal n=50 α=.2", 50, 0.2, RuleConformal, false, 0, true},
		{"conformal n=15 α=.1", 15, 0.1, RuleConformal, false, 0, true},
		{"conformal randomized n=50 α=.2", 50, 0.2, RuleConformal, true, 41.0 / 51, true},
		{"conformal randomized n=15 α=.1", 15, 0.1, RuleConformal, true, 15.0 / 16, true},
		{"higher randomized n=15 α=.1", 15, 0.1, RuleHigher, true, 14.0 / 16, false},
		{"higher randomized n=8 α=.1", 8, 0.1, RuleHigher, true, 8.0 / 9, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cov, kept, se := coverageRun(t, uint64(10+i), c.n, 100, trials, c.alpha, c.rule, c.randomized)
			t.Logf("coverage %.4f ± %.4f, truncated-set coverage %.4f", cov, se, kept)
			if c.randomized && math.Abs(cov-c.exact) > 4*se {
				t.Errorf("coverage %.4f, want %.4f ± 4·%.4f", cov, c.exact, se)
			}
			lo, hi := 1-c.alpha, 1-c.alpha+1/float64(c.n+1)
			if c.valid {
				if cov < lo-3*se || cov > hi+3*se {
					t.Errorf("coverage %.4f outside [%.4f, %.4f] ± 3·%.4f", cov, lo, hi, se)
				}
				// The truncated set contains the score set, so it covers too.
				if kept < lo-3*se {
					t.Errorf("truncated-set coverage %.4f below %.4f", kept, lo)
				}
				if !c.randomized && kept < cov-1e-12 {
					t.Errorf("truncated-set coverage %.4f below score-set coverage %.4f", kept, cov)
				}
			} else if cov > lo-3*se {
				t.Errorf("higher rule coverage %.4f not clearly below 1−α = %.2f (se %.4f)", cov, lo, se)
			}
		})
	}
}

// FuzzAPS checks Score, RandomizedScore and Keep on arbitrary inputs: no
// panics, scores in [0, 1], k within the clamps.
func FuzzAPS(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 240, 63, 0, 0, 0, 0, 0, 0, 0, 64}, 0, 0.01, 0.5, 0.3, 1, 5)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 248, 127}, -1, 1e-9, 2.0, 1.5, 0, 0)
	f.Add([]byte{}, 3, 0.0, math.Inf(1), -1.0, 2, 1)
	f.Fuzz(func(t *testing.T, raw []byte, gold int, temp, qhat, u float64, minDocs, maxDocs int) {
		scores := floatsFromBytes(raw)
		a := APS{Temperature: temp, MinDocs: minDocs, MaxDocs: maxDocs}
		if e, err := a.Score(scores, gold); err == nil && !(e >= 0 && e <= 1) {
			t.Fatalf("score %v outside [0, 1]", e)
		}
		if e, err := a.RandomizedScore(scores, gold, u); err == nil && !(e >= 0 && e <= 1+1e-12) {
			t.Fatalf("randomized score %v outside [0, 1]", e)
		}
		k := a.Keep(scores, qhat)
		if k < 0 || k > len(scores) {
			t.Fatalf("k = %d outside [0, %d]", k, len(scores))
		}
		if a.Validate() == nil && checkScores(scores) == nil {
			if k < min(minDocs, len(scores)) || (maxDocs > 0 && k > maxDocs) {
				t.Fatalf("k = %d outside clamps [%d, %d]", k, minDocs, maxDocs)
			}
		}
		_ = a.KeepIndices(scores, qhat)
	})
}

func BenchmarkAPSKeep(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{5, 20, 100} {
		s := simQuery(rng, n).Scores
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			a := PaperAPS()
			for b.Loop() {
				a.Keep(s, 0.9)
			}
		})
	}
}

func BenchmarkAPSScore(b *testing.B) {
	q := simQuery(rand.New(rand.NewPCG(1, 1)), 20)
	a := PaperAPS()
	for b.Loop() {
		if _, err := a.Score(q.Scores, q.Gold); err != nil {
			b.Fatal(err)
		}
	}
}
