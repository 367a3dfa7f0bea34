package conformal

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestACIGolden runs two steps of each rule on a window of size 4 bootstrapped
// with [1 2 3 4], ρ = 0.25, γ = 0.1, η = 0.5, λ = 0.95, batches
// [0.5 3.5 5] and [2 6 7 1]. Every number below is computed by hand:
//
// plain / smoothed (conformal quantile, k = ⌈5(1−α)⌉-th smallest):
//
//	t=1: α=.25, window [1 2 3 4], k=⌈3.75⌉=4 → q=4; >4: {5} → err=1/3.
//	     plain α₂ = .25 + .1(.25 − 1/3) = .2416667 (smoothed: v₁ = 1, same).
//	     window → [4 0.5 3.5 5].
//	t=2: α=.2416667, k=⌈5·.7583333⌉=⌈3.79⌉=4 → q=5; >5: {6 7} → err=.5.
//	     plain α₃ = .2416667 + .1(.25 − .5) = .2166667.
//	     smoothed: Σv err = (.95·1/3 + .5)/(.95 + 1) = .4188034,
//	     α₃ = .2416667 + .1(.25 − .4188034) = .2247863.
//
// ema (linear quantile, clip [.01, .99]):
//
//	t=1: h = 3·.75 = 2.25 → q = 3 + .25·1 = 3.25; >3.25: {3.5 5} → err=2/3;
//	     ema = .05·2/3 = .0333333; α₂ = .25 + .1(.25 − .0333333) = .2716667.
//	t=2: sorted [0.5 3.5 4 5], h = 3·.7283333 = 2.185 → q = 4 + .185·1 = 4.185;
//	     >4.185: {6 7} → err=.5; ema = .95·.0333333 + .05·.5 = .0566667;
//	     α₃ = .2716667 + .1(.25 − .0566667) = .291.
func TestACIGolden(t *testing.T) {
	base := ACIConfig{Rho: 0.25, Gamma: 0.1, Eta: 0.5, Window: 4, Decay: 0.95, AlphaMin: 0.01, AlphaMax: 0.99}
	batches := [][]float64{{0.5, 3.5, 5}, {2, 6, 7, 1}}
	type step struct{ alpha, q, err, next float64 }
	cases := []struct {
		rule  ACIRule
		quant QuantileRule
		want  []step
		w     [][]float64
	}{
		{RulePlain, RuleConformal,
			[]step{{0.25, 4, 1.0 / 3, 0.25 + 0.1*(0.25-1.0/3)}, {0.25 + 0.1*(0.25-1.0/3), 5, 0.5, 0.2166666667}},
			[][]float64{{1, 1, 0.5}, {1, 0.5, 0.5, 1}}},
		{RuleSmoothed, RuleConformal,
			[]step{{0.25, 4, 1.0 / 3, 0.2416666667}, {0.2416666667, 5, 0.5, 0.2247863248}},
			[][]float64{{1, 1, 0.5}, {1, 0.5, 0.5, 1}}},
		{RuleEMA, RuleLinear,
			[]step{{0.25, 3.25, 2.0 / 3, 0.2716666667}, {0.2716666667, 4.185, 0.5, 0.291}},
			[][]float64{{1, 0.5, 0.5}, {1, 0.5, 0.5, 1}}},
	}
	for _, c := range cases {
		cfg := base
		cfg.Rule, cfg.Quantile = c.rule, c.quant
		a, err := NewACI(cfg, []float64{1, 2, 3, 4})
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range batches {
			st, err := a.Step(b)
			if err != nil {
				t.Fatal(err)
			}
			w := c.want[i]
			if st.T != i+1 || !near(st.Alpha, w.alpha, 1e-9) || !near(st.QHat, w.q, 1e-9) ||
				!near(st.Err, w.err, 1e-12) || !near(st.AlphaNext, w.next, 1e-9) || !slices.Equal(st.Weights, c.w[i]) {
				t.Errorf("%v step %d: got %+v, want %+v weights %v", c.rule, i+1, st, w, c.w[i])
			}
		}
		if got := a.Window(); !slices.Equal(got, []float64{2, 6, 7, 1}) {
			t.Errorf("%v window = %v, want [2 6 7 1]", c.rule, got)
		}
	}
}

func TestACIEdgeCases(t *testing.T) {
	// No bootstrap: the first q is +Inf, nothing is an error, all weights 1.
	a, _ := NewACI(DefaultACIConfig(), nil)
	st, _ := a.Step([]float64{1, 2, 3})
	if !math.IsInf(st.QHat, 1) || st.Err != 0 || !slices.Equal(st.Weights, []float64{1, 1, 1}) {
		t.Errorf("empty window: %+v", st)
	}
	// Plain rule with a huge step: α leaves (0, 1) and q becomes ±Inf.
	cfg := ACIConfig{Rho: 0.25, Gamma: 1, Eta: 0.5, Window: 10, Rule: RulePlain, Quantile: RuleLinear}
	a, _ = NewACI(cfg, []float64{1, 2, 3})
	st, _ = a.Step([]float64{10, 10})
	if st.Err != 1 || st.AlphaNext != -0.5 {
		t.Fatalf("step 1: %+v", st)
	}
	st, _ = a.Step([]float64{100})
	if !math.IsInf(st.QHat, 1) || st.Err != 0 || st.AlphaNext != -0.25 {
		t.Errorf("α ≤ 0 must give q = +Inf: %+v", st)
	}
	cfg.Alpha1 = 0.9
	a, _ = NewACI(cfg, []float64{1, 2, 3})
	a.Step([]float64{0}) // err 0: α = 0.9 + 0.25 = 1.15
	st, _ = a.Step([]float64{-100})
	if !math.IsInf(st.QHat, -1) || st.Err != 1 || st.Weights[0] != 0.5 {
		t.Errorf("α ≥ 1 must give q = −Inf: %+v", st)
	}
	// EMA clip: α₁ = .9, γ = 1, err = 0 → .9 + (.25 − 0) = 1.15 → .99.
	cfg = CodeACIConfig()
	cfg.Gamma, cfg.Alpha1 = 1, 0.9
	a, _ = NewACI(cfg, []float64{1, 2, 3})
	if st, _ = a.Step([]float64{0}); st.AlphaNext != 0.99 {
		t.Errorf("EMA clip: α₂ = %v, want 0.99", st.AlphaNext)
	}
	// Bad batches fail and leave the state alone.
	a, _ = NewACI(DefaultACIConfig(), []float64{1, 2})
	before, _ := json.Marshal(a)
	for _, bad := range [][]float64{nil, {1, math.NaN()}, {math.Inf(-1)}} {
		if _, err := a.Step(bad); err == nil {
			t.Errorf("Step(%v) succeeded", bad)
		}
	}
	if after, _ := json.Marshal(a); string(after) != string(before) {
		t.Error("a failed Step changed the state")
	}
	// A batch larger than the window keeps only its last Window scores.
	cfg = DefaultACIConfig()
	cfg.Window, cfg.WindowUnit = 3, WindowScores
	a, _ = NewACI(cfg, []float64{9, 9, 9, 9, 9})
	if !slices.Equal(a.Window(), []float64{9, 9, 9}) {
		t.Errorf("bootstrap window %v", a.Window())
	}
	a.Step([]float64{1, 2, 3, 4, 5})
	if !slices.Equal(a.Window(), []float64{3, 4, 5}) {
		t.Errorf("window %v, want [3 4 5]", a.Window())
	}
	if _, err := NewACI(DefaultACIConfig(), []float64{math.NaN()}); err == nil {
		t.Error("NaN bootstrap accepted")
	}
}

func TestACIConfigValidate(t *testing.T) {
	mod := func(f func(*ACIConfig)) ACIConfig { c := DefaultACIConfig(); f(&c); return c }
	for _, c := range []struct {
		cfg ACIConfig
		ok  bool
	}{
		{DefaultACIConfig(), true},
		{CodeACIConfig(), true},
		{mod(func(c *ACIConfig) { c.Alpha1 = 0 }), true},
		{mod(func(c *ACIConfig) { c.Rho = 0 }), false},
		{mod(func(c *ACIConfig) { c.Rho = 1 }), false},
		{mod(func(c *ACIConfig) { c.Gamma = 0 }), false},
		{mod(func(c *ACIConfig) { c.Gamma = math.Inf(1) }), false},
		{mod(func(c *ACIConfig) { c.Eta = 1.5 }), false},
		{mod(func(c *ACIConfig) { c.Window = 0 }), false},
		{mod(func(c *ACIConfig) { c.Rule = 5 }), false},
		{mod(func(c *ACIConfig) { c.Quantile = -1 }), false},
		{mod(func(c *ACIConfig) { c.Decay = 1 }), false},
		{mod(func(c *ACIConfig) { c.Alpha1 = 1 }), false},
		{mod(func(c *ACIConfig) { c.Rule, c.AlphaMin = RuleEMA, 0.995 }), false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate() = %v", c.cfg, err)
		}
	}
}

// TestACIBoundPlain checks Gibbs & Candès' Proposition 4.1 for the plain rule:
// for any score sequence, |mean err − ρ| ≤ (max(α₁, 1−α₁) + γ)/(Tγ), and α_t
// stays in [−γ, 1+γ]. The streams are adversarial: regime switches the window
// lags behind, and an adversary that sees q_t before choosing the batch.
func TestACIBoundPlain(t *testing.T) {
	const T = 2000
	streams := map[string]func(rng *rand.Rand, t int, q float64) []float64{
		"drift and regime switches": func(rng *rand.Rand, t int, _ float64) []float64 {
			shift := 0.03 * float64(t) // faster than the window refreshes
			if (t/100)%2 == 1 {
				shift += 5
			}
			b := make([]float64, 8)
			for i := range b {
				b[i] = shift + rng.NormFloat64()
			}
			return b
		},
		"greedy adversary": func(rng *rand.Rand, _ int, q float64) []float64 {
			// Every score above q whenever q is finite: err_t = 1 as often
			// as the controller allows.
			b := make([]float64, 8)
			for i := range b {
				b[i] = rng.NormFloat64()
				if !math.IsInf(q, 0) {
					b[i] += q + 10
				}
			}
			return b
		},
		"adaptive adversary": func(rng *rand.Rand, t int, q float64) []float64 {
			// Put every score just above q for 30 steps, then just below
			// for 10: the errors come in bursts of 1 and 0.
			b := make([]float64, 8)
			for i := range b {
				switch {
				case math.IsInf(q, 0):
					b[i] = rng.NormFloat64()
				case t%40 < 30:
					b[i] = q + 1e-3 + rng.Float64()
				default:
					b[i] = q - 1e-3 - rng.Float64()
				}
			}
			return b
		},
	}
	for name, gen := range streams {
		for _, gamma := range []float64{0.005, 0.05} {
			cfg := ACIConfig{Rho: 0.25, Gamma: gamma, Eta: 0.5, Window: 200, Rule: RulePlain, Quantile: RuleConformal}
			a, err := NewACI(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			sum := 0.0
			for i := range T {
				st, err := a.Step(gen(rng, i, a.QHat()))
				if err != nil {
					t.Fatal(err)
				}
				sum += st.Err
				if st.AlphaNext < -gamma-1e-12 || st.AlphaNext > 1+gamma+1e-12 {
					t.Fatalf("%s γ=%v: α_%d = %v outside [−γ, 1+γ]", name, gamma, i+2, st.AlphaNext)
				}
			}
			mean := sum / T
			bound := (math.Max(0.25, 0.75) + gamma) / (T * gamma)
			t.Logf("%s γ=%v: mean err %.4f, |mean−ρ| = %.4f ≤ %.4f", name, gamma, mean, math.Abs(mean-0.25), bound)
			if math.Abs(mean-0.25) > bound {
				t.Errorf("%s γ=%v: |mean err − ρ| = %v > bound %v", name, gamma, math.Abs(mean-0.25), bound)
			}
		}
	}
	// Without adaptation (γ ≈ 0) the drifting, switching stream is far off ρ,
	// so the bound above is not met trivially.
	a, _ := NewACI(ACIConfig{Rho: 0.25, Gamma: 1e-12, Eta: 0.5, Window: 200, Rule: RulePlain}, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	sum := 0.0
	for i := range T {
		st, _ := a.Step(streams["drift and regime switches"](rng, i, 0))
		sum += st.Err
	}
	d := math.Abs(sum/T - 0.25)
	t.Logf("fixed α on the drifting, switching stream: |mean err − ρ| = %.4f", d)
	if d < 0.05 {
		t.Errorf("fixed α is within %.3f of ρ on the switching stream; the test stream is not adversarial", d)
	}
}

// drift draws a batch of NLL-like scores whose level rises by 0.01 per step
// (a policy changing faster than the 2000-score window refreshes).
func drift(rng *rand.Rand, t, batch int) []float64 {
	b := make([]float64, batch)
	for i := range b {
		b[i] = 1 + 0.01*float64(t) + 0.3*rng.NormFloat64()
	}
	return b
}

// TestACITracksRho: on a drifting stream the window lags, so a fixed α = ρ
// over-flags (err ≈ 0.4); the smoothed (paper) and EMA (code) rules move α_t
// until err_t averages ρ. On a stationary stream α_t settles near ρ itself.
func TestACITracksRho(t *testing.T) {
	const steps, batch, burn = 1500, 64, 500
	run := func(cfg ACIConfig, stationary bool) (meanErr, meanAlpha float64) {
		rng := rand.New(rand.NewPCG(5, 6))
		boot := drift(rng, 0, 150)
		a, err := NewACI(cfg, boot)
		if err != nil {
			t.Fatal(err)
		}
		for i := range steps {
			tt := i
			if stationary {
				tt = 0
			}
			st, err := a.Step(drift(rng, tt, batch))
			if err != nil {
				t.Fatal(err)
			}
			if i >= burn {
				meanErr += st.Err
				meanAlpha += st.Alpha
			}
		}
		return meanErr / (steps - burn), meanAlpha / (steps - burn)
	}
	fixed := DefaultACIConfig()
	fixed.Rule, fixed.Gamma = RulePlain, 1e-12
	fixedErr, _ := run(fixed, false)
	t.Logf("fixed α: mean err %.4f", fixedErr)
	if fixedErr < 0.35 {
		t.Fatalf("fixed α mean err %.3f: the stream does not drift enough to test tracking", fixedErr)
	}
	for _, cfg := range []ACIConfig{DefaultACIConfig(), CodeACIConfig()} {
		e, al := run(cfg, false)
		t.Logf("%v drifting: mean err %.4f, mean α %.4f", cfg.Rule, e, al)
		if math.Abs(e-0.25) > 0.02 {
			t.Errorf("%v drifting: mean err %.4f, want 0.25 ± 0.02", cfg.Rule, e)
		}
		if al > 0.2 {
			t.Errorf("%v drifting: mean α %.4f, want < ρ (compensating the lag)", cfg.Rule, al)
		}
		e, al = run(cfg, true)
		t.Logf("%v stationary: mean err %.4f, mean α %.4f", cfg.Rule, e, al)
		if math.Abs(e-0.25) > 0.02 || math.Abs(al-0.25) > 0.03 {
			t.Errorf("%v stationary: mean err %.4f, mean α %.4f, want both ≈ 0.25", cfg.Rule, e, al)
		}
	}
}

// TestACIJSONRoundTrip: a restored controller continues bit-for-bit.
func TestACIJSONRoundTrip(t *testing.T) {
	for _, cfg := range []ACIConfig{DefaultACIConfig(), CodeACIConfig(), {Rho: 0.3, Gamma: 0.01, Eta: 0.25, Window: 50, Rule: RulePlain, Quantile: RuleHigher}} {
		rng := rand.New(rand.NewPCG(8, 9))
		a, err := NewACI(cfg, drift(rng, 0, 30))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			a.Step(drift(rng, i, 17))
		}
		blob, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var b ACI
		if err := json.Unmarshal(blob, &b); err != nil {
			t.Fatal(err)
		}
		if blob2, _ := json.Marshal(&b); string(blob2) != string(blob) {
			t.Fatalf("re-marshal differs:\n%s\n%s", blob, blob2)
		}
		for i := range 40 {
			batch := drift(rng, 40+i, 17)
			sa, _ := a.Step(batch)
			sb, _ := b.Step(batch)
			if sa.Alpha != sb.Alpha || sa.QHat != sb.QHat || sa.Err != sb.Err || sa.AlphaNext != sb.AlphaNext || sa.T != sb.T {
				t.Fatalf("%v step %d diverged: %+v vs %+v", cfg.Rule, i, sa, sb)
			}
		}
	}
	var a ACI
	for _, bad := range []string{
		`{`, `{"config":{"rho":2}}`,
		`{"config":{"rho":0.25,"gamma":0.005,"eta":0.5,"window":2,"rule":"plain","quantile":"linear","decay":0.95},"window":[1,2,3]}`,
		`{"config":{"rho":0.25,"gamma":0.005,"eta":0.5,"window":2,"rule":"nope","quantile":"linear","decay":0.95}}`,
		`{"config":{"rho":0.25,"gamma":0.005,"eta":0.5,"window":2,"rule":"plain","quantile":"linear","decay":0.95},"t":-1}`,
	} {
		if err := json.Unmarshal([]byte(bad), &a); err == nil {
			t.Errorf("bad state accepted: %s", bad)
		}
	}
}

func TestACIStepJSON(t *testing.T) {
	b, err := json.Marshal(ACIStep{T: 1, Alpha: 0.25, QHat: math.Inf(1), Weights: []float64{1}, AlphaNext: 0.25125})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"t":1,"alpha":0.25,"qhat":"+Inf","err":0,"weights":[1],"alpha_next":0.25125}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
	var f JSONFloat
	for in, want := range map[string]float64{`"+Inf"`: math.Inf(1), `"-Inf"`: math.Inf(-1), `1.5`: 1.5, `"2"`: 2} {
		if err := json.Unmarshal([]byte(in), &f); err != nil || float64(f) != want {
			t.Errorf("JSONFloat %s → %v, %v", in, f, err)
		}
	}
	if err := json.Unmarshal([]byte(`"x"`), &f); err == nil {
		t.Error(`JSONFloat "x" accepted`)
	}
}

func TestParseACIRule(t *testing.T) {
	for i, n := range []string{"plain", "SMOOTHED", "ema"} {
		r, err := ParseACIRule(n)
		if err != nil || r != ACIRule(i) || r.String() != strings.ToLower(n) {
			t.Errorf("ParseACIRule(%q) = %v, %v", n, r, err)
		}
	}
	if _, err := ParseACIRule("eq7"); err == nil {
		t.Error("unknown rule accepted")
	}
}

// FuzzACIStep drives a controller with arbitrary configs and batches: no
// panics, weights ∈ {1, η}, err ∈ [0, 1], and the EMA clip holds.
func FuzzACIStep(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 240, 63, 0, 0, 0, 0, 0, 0, 0, 64}, 0.25, 0.005, 0.5, 4, uint8(1), uint8(0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 248, 127}, 0.5, 1.0, 0.0, 1, uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, raw []byte, rho, gamma, eta float64, window int, rule, quant uint8) {
		cfg := ACIConfig{Rho: rho, Gamma: gamma, Eta: eta, Window: window % 100, Rule: ACIRule(rule % 4),
			Quantile: QuantileRule(quant % 4), Decay: 0.95, AlphaMin: 0.01, AlphaMax: 0.99}
		xs := floatsFromBytes(raw)
		a, err := NewACI(cfg, xs)
		if err != nil {
			return
		}
		for i := 0; i < 3 && len(xs) > 0; i++ {
			st, err := a.Step(xs[i%len(xs):])
			if err != nil {
				return
			}
			if !(st.Err >= 0 && st.Err <= 1) {
				t.Fatalf("err %v", st.Err)
			}
			for _, w := range st.Weights {
				if w != 1 && w != eta {
					t.Fatalf("weight %v not in {1, %v}", w, eta)
				}
			}
			if cfg.Rule == RuleEMA && (st.AlphaNext < 0.01 || st.AlphaNext > 0.99) {
				t.Fatalf("EMA α %v outside the clip", st.AlphaNext)
			}
		}
		blob, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var b ACI
		if err := json.Unmarshal(blob, &b); err != nil {
			t.Fatalf("state %s does not restore: %v", blob, err)
		}
	})
}

// FuzzACIUnmarshal: arbitrary state bytes never panic, and an accepted state
// can take a step.
func FuzzACIUnmarshal(f *testing.F) {
	a, _ := NewACI(DefaultACIConfig(), []float64{1, 2, 3})
	a.Step([]float64{2, 5})
	good, _ := json.Marshal(a)
	f.Add(good)
	f.Add([]byte(`{"config":{"rho":0.25,"gamma":0.005,"eta":0.5,"window":1,"rule":"ema","quantile":"linear","decay":0.5,"alpha_min":0,"alpha_max":1}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s ACI
		if json.Unmarshal(b, &s) != nil {
			return
		}
		if _, err := s.Step([]float64{1, 2}); err != nil {
			t.Fatalf("restored controller cannot step: %v", err)
		}
	})
}

func BenchmarkACIStep(b *testing.B) {
	for _, batch := range []int{64, 2560} {
		b.Run("batch="+map[int]string{64: "64", 2560: "2560"}[batch], func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			a, _ := NewACI(DefaultACIConfig(), drift(rng, 0, DefaultWindow))
			scores := drift(rng, 0, batch)
			for b.Loop() {
				if _, err := a.Step(scores); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
