package conformal

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func near(a, b, tol float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) || math.IsNaN(a) || math.IsNaN(b) {
		return a == b || (math.IsNaN(a) && math.IsNaN(b))
	}
	return math.Abs(a-b) <= tol
}

// TestQuantileGolden checks every rule against values computed by hand on
// scores {3,1,4,1,5,9,2,6}, sorted [1 1 2 3 4 5 6 9], n = 8.
func TestQuantileGolden(t *testing.T) {
	scores := []float64{3, 1, 4, 1, 5, 9, 2, 6}
	inf := math.Inf(1)
	cases := []struct {
		rule  QuantileRule
		level float64
		want  float64
		why   string
	}{
		// conformal: k = ⌈9ℓ⌉-th smallest.
		{RuleConformal, 0.8, 9, "⌈7.2⌉=8 → 9"},
		{RuleConformal, 0.5, 4, "⌈4.5⌉=5 → 4"},
		{RuleConformal, 0.9, inf, "⌈8.1⌉=9 > 8 → +Inf"},
		{RuleConformal, 0.1, 1, "⌈0.9⌉=1 → 1"},
		{RuleConformal, 8.0 / 9, 9, "9·(8/9) = 8 exactly, not 9 → 9"},
		{RuleConformal, 1, inf, "⌈9⌉ > 8"},
		{RuleConformal, 0, math.Inf(-1), "k = 0 → −Inf"},
		// higher: sorted[⌈7ℓ⌉].
		{RuleHigher, 0.8, 6, "⌈5.6⌉=6 → 6"},
		{RuleHigher, 0.5, 4, "⌈3.5⌉=4 → 4"},
		{RuleHigher, 0.9, 9, "⌈6.3⌉=7 → 9"},
		{RuleHigher, 3.0 / 7, 3, "7·(3/7) = 3 → sorted[3] = 3"},
		{RuleHigher, 0, 1, "sorted[0]"},
		{RuleHigher, 1, 9, "sorted[7]"},
		{RuleHigher, 1.5, 9, "clamped to 1"},
		// linear: h = 7ℓ, sorted[⌊h⌋] + frac·gap.
		{RuleLinear, 0.8, 5.6, "h=5.6: 5 + 0.6·(6−5)"},
		{RuleLinear, 0.5, 3.5, "h=3.5: 3 + 0.5·(4−3)"},
		{RuleLinear, 0.9, 6.9, "h=6.3: 6 + 0.3·(9−6)"},
		{RuleLinear, 0.25, 1.75, "h=1.75: 1 + 0.75·(2−1)"},
		{RuleLinear, 0, 1, "min"},
		{RuleLinear, 1, 9, "max"},
		{RuleLinear, -0.5, 1, "clamped to 0"},
	}
	for _, c := range cases {
		got := Quantile(scores, c.level, c.rule)
		if !near(got, c.want, 1e-12) {
			t.Errorf("%v level %v: got %v, want %v (%s)", c.rule, c.level, got, c.want, c.why)
		}
	}
	if !slices.Equal(scores, []float64{3, 1, 4, 1, 5, 9, 2, 6}) {
		t.Fatalf("Quantile modified its input: %v", scores)
	}
}

func TestQuantileEdgeCases(t *testing.T) {
	for _, r := range []QuantileRule{RuleConformal, RuleHigher, RuleLinear} {
		if q := Quantile(nil, 0.9, r); !math.IsInf(q, 1) {
			t.Errorf("%v on no scores: got %v, want +Inf", r, q)
		}
		if q := Quantile([]float64{1, 2}, math.NaN(), r); !math.IsNaN(q) {
			t.Errorf("%v at NaN level: got %v, want NaN", r, q)
		}
	}
	// n = 9, α = 0.1: (n+1)(1−α) = 10·0.9 must be 9 (the 9th smallest), not +Inf.
	nine := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	if q := Quantile(nine, 1-0.1, RuleConformal); q != 9 {
		t.Errorf("n=9, α=0.1: got %v, want 9", q)
	}
	// n = 1: ⌈2·0.5⌉ = 1 → the score; ⌈2·0.6⌉ = 2 > 1 → +Inf.
	if q := Quantile([]float64{7}, 0.5, RuleConformal); q != 7 {
		t.Errorf("n=1 level .5: got %v", q)
	}
	if q := Quantile([]float64{7}, 0.6, RuleConformal); !math.IsInf(q, 1) {
		t.Errorf("n=1 level .6: got %v", q)
	}
	if q := Quantile([]float64{7}, 0.6, RuleLinear); q != 7 {
		t.Errorf("n=1 linear: got %v", q)
	}
	if q := QuantileSorted([]float64{1, 2}, 0.5, QuantileRule(9)); !math.IsNaN(q) {
		t.Errorf("invalid rule: got %v, want NaN", q)
	}
}

func TestParseQuantileRule(t *testing.T) {
	for _, c := range []struct {
		in   string
		want QuantileRule
		ok   bool
	}{{"conformal", RuleConformal, true}, {"Higher", RuleHigher, true}, {" linear ", RuleLinear, true}, {"type7", 0, false}, {"", 0, false}} {
		got, err := ParseQuantileRule(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseQuantileRule(%q) = %v, %v", c.in, got, err)
		}
		if c.ok && got.String() != []string{"conformal", "higher", "linear"}[c.want] {
			t.Errorf("String() = %q", got.String())
		}
	}
	var r QuantileRule
	if err := r.UnmarshalText([]byte("higher")); err != nil || r != RuleHigher {
		t.Errorf("UnmarshalText: %v %v", r, err)
	}
	if _, err := QuantileRule(7).MarshalText(); err == nil {
		t.Error("MarshalText of an invalid rule succeeded")
	}
}

// FuzzQuantile feeds arbitrary scores and levels to every rule: no panics,
// and a finite result always lies within [min, max] of the scores.
func FuzzQuantile(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 240, 63, 0, 0, 0, 0, 0, 0, 0, 64}, 0.9)
	f.Add([]byte{}, 0.5)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 248, 127}, -1.0)
	f.Fuzz(func(t *testing.T, raw []byte, level float64) {
		scores := floatsFromBytes(raw)
		for _, r := range []QuantileRule{RuleConformal, RuleHigher, RuleLinear} {
			q := Quantile(scores, level, r)
			if len(scores) == 0 || math.IsNaN(q) || math.IsInf(q, 0) {
				continue
			}
			lo, hi := slices.Min(scores), slices.Max(scores)
			if slices.ContainsFunc(scores, math.IsNaN) {
				continue
			}
			if q < lo || q > hi {
				t.Fatalf("%v: q=%v outside [%v, %v]", r, q, lo, hi)
			}
		}
	})
}

// floatsFromBytes decodes little-endian float64s (a trailing partial word is dropped).
func floatsFromBytes(b []byte) []float64 {
	out := make([]float64, 0, len(b)/8)
	for i := 0; i+8 <= len(b); i += 8 {
		var u uint64
		for j := 7; j >= 0; j-- {
			u = u<<8 | uint64(b[i+j])
		}
		out = append(out, math.Float64frombits(u))
	}
	return out
}

func BenchmarkQuantile2000(b *testing.B) {
	s := make([]float64, 2000)
	for i := range s {
		s[i] = math.Sin(float64(i)) * 3
	}
	for _, r := range []QuantileRule{RuleConformal, RuleHigher, RuleLinear} {
		b.Run(r.String(), func(b *testing.B) {
			for b.Loop() {
				Quantile(s, 0.75, r)
			}
		})
	}
}

// TestQuantileSelectMatchesSort checks the selection path against sorting, on
// random inputs with many ties, all rules and levels, and selectKth's
// partition property.
func TestQuantileSelectMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 3000 {
		n := 1 + rng.IntN(300)
		s := make([]float64, n)
		for i := range s {
			if trial%2 == 0 {
				s[i] = float64(rng.IntN(5)) // heavy ties
			} else {
				s[i] = rng.NormFloat64()
			}
		}
		if trial%7 == 0 {
			slices.Sort(s) // already sorted
		} else if trial%7 == 1 {
			slices.Sort(s)
			slices.Reverse(s)
		}
		sorted := slices.Sorted(slices.Values(s))
		level := rng.Float64()
		if trial%5 == 0 {
			level = float64(rng.IntN(n+1)) / float64(n+1)
		}
		for _, r := range []QuantileRule{RuleConformal, RuleHigher, RuleLinear} {
			got, want := Quantile(s, level, r), QuantileSorted(sorted, level, r)
			if got != want {
				t.Fatalf("trial %d n=%d %v level %v: select %v, sort %v", trial, n, r, level, got, want)
			}
		}
		k := rng.IntN(n)
		a := slices.Clone(s)
		v := selectKth(a, k)
		if v != sorted[k] || slices.Max(a[:k+1]) != v || slices.Min(a[k:]) != v {
			t.Fatalf("trial %d: selectKth(%d) = %v, want %v, partition broken", trial, k, v, sorted[k])
		}
	}
}
