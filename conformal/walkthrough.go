package conformal

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"text/tabwriter"
)

// WalkthroughConfig sizes the conformal walkthrough (`cas demo
// --conformal-only`: APS and ACI on simulated scores, in seconds). The zero
// value of a field means its default.
type WalkthroughConfig struct {
	Seed        uint64 // random seed (default 0 is a valid seed)
	Candidates  int    // retrieved candidates per query (default 20)
	CalQueries  int    // APS calibration queries (default 239, the paper's)
	TestQueries int    // fresh test queries (default 5000)
	Steps       int    // ACI training steps (default 800)
	Batch       int    // trajectories per ACI step (default 32)
	Splits      int    // calibration/test redraws averaged in the APS table (default 300)
}

func (c WalkthroughConfig) withDefaults() WalkthroughConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Candidates, 20)
	def(&c.CalQueries, 239)
	def(&c.TestQueries, 5000)
	def(&c.Steps, 800)
	def(&c.Batch, 32)
	def(&c.Splits, 300)
	return c
}

// SimulatedQuery draws one synthetic retrieval query: m E5-like cosine scores
// 0.80 + 0.02·N(0,1); with probability 0.92 one of them (uniform position) is
// the gold passage, boosted by 0.02 + |N(0, 0.02)|, otherwise gold is NoGold.
// Queries drawn from one rng are i.i.d., hence exchangeable.
func SimulatedQuery(rng *rand.Rand, m int) Query {
	s := make([]float64, m)
	for i := range s {
		s[i] = 0.80 + 0.02*rng.NormFloat64()
	}
	if rng.Float64() >= 0.92 {
		return Query{Scores: s, Gold: NoGold}
	}
	g := rng.IntN(m)
	s[g] += 0.02 + math.Abs(0.02*rng.NormFloat64())
	return Query{Scores: s, Gold: g}
}

// Walkthrough prints the conformal walkthrough to w: APS calibrated on
// simulated retrieval scores (coverage and kept counts on fresh queries, for
// the paper's and the code's settings against fixed top-k), then ACI on a
// drifting simulated training stream (α_t, q_t and err_t per rule against a
// fixed α = ρ), as aligned tables. Deterministic for a seed.
func Walkthrough(w io.Writer, cfg WalkthroughConfig) error {
	cfg = cfg.withDefaults()
	aps, err := walkAPS(cfg)
	if err != nil {
		return err
	}
	if err := aps.print(w, cfg); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	aci, err := walkACI(cfg)
	if err != nil {
		return err
	}
	return aci.print(w, cfg)
}

// apsRow is one line of the APS table.
type apsRow struct {
	name      string
	aps       APS
	alpha     float64 // 0 for a fixed top-k row
	rule      QuantileRule
	qhat      float64
	cov       float64 // P(E ≤ q̂) on this split's test queries
	avg, se   float64 // mean coverage over fresh splits
	kept      float64 // fraction of test queries whose gold is kept
	meanK     float64
	fixedTopK bool
}

type apsWalk struct {
	rows     []apsRow
	withGold int
}

func walkAPS(cfg WalkthroughConfig) (apsWalk, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	cal := make([]Query, cfg.CalQueries)
	for i := range cal {
		cal[i] = SimulatedQuery(rng, cfg.Candidates)
	}
	test := make([]Query, cfg.TestQueries)
	var out apsWalk
	for i := range test {
		test[i] = SimulatedQuery(rng, cfg.Candidates)
		if test[i].Gold != NoGold {
			out.withGold++
		}
	}
	settings := []apsRow{
		{name: "paper", aps: PaperAPS(), alpha: 0.35, rule: RuleConformal},
		{name: "paper", aps: PaperAPS(), alpha: PaperAlpha, rule: RuleConformal},
		{name: "paper", aps: PaperAPS(), alpha: 0.05, rule: RuleConformal},
		{name: "code", aps: CodeAPS(), alpha: CodeAlpha, rule: CodeQuantile},
	}
	for _, r := range settings {
		c, err := r.aps.Calibrate(cal, r.alpha, r.rule, nil)
		if err != nil {
			return out, fmt.Errorf("walkthrough: calibrate: %w", err)
		}
		r.qhat = float64(c.QHat)
		if r.cov, r.kept, r.meanK, err = evalAPS(r.aps, test, float64(c.QHatLog)); err != nil {
			return out, err
		}
		if r.avg, r.se, err = splitCoverage(r.aps, r.alpha, r.rule, cfg, cfg.Splits); err != nil {
			return out, err
		}
		out.rows = append(out.rows, r)
	}
	for _, k := range []int{3, 5} {
		r := apsRow{name: fmt.Sprintf("fixed top-%d", k), aps: APS{Temperature: DefaultTemperature, MinDocs: k, MaxDocs: k}, fixedTopK: true}
		var err error
		if _, r.kept, r.meanK, err = evalAPS(r.aps, test, 0); err != nil {
			return out, err
		}
		out.rows = append(out.rows, r)
	}
	return out, nil
}

func (a apsWalk) print(w io.Writer, cfg WalkthroughConfig) error {
	fmt.Fprintf(w, "APS on simulated retrieval: %d candidates/query (cosine ≈ 0.80 ± 0.02, gold present in 92%%), T = %g\n",
		cfg.Candidates, DefaultTemperature)
	fmt.Fprintf(w, "calibrated on %d queries, evaluated on %d fresh ones (%d with gold among the candidates)\n\n",
		cfg.CalQueries, cfg.TestQueries, a.withGold)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "setting\tα\tquantile\tclamp\tq̂\tcoverage\tmean of %d splits\ttarget\tgold kept\tmean k\t\n", cfg.Splits)
	for _, r := range a.rows {
		if r.fixedTopK {
			fmt.Fprintf(tw, "%s\t-\t-\t[%d,%d]\t-\t-\t-\t-\t%.3f\t%.2f\t\n", r.name, r.aps.MinDocs, r.aps.MaxDocs, r.kept, r.meanK)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t[%d,%d]\t%s\t%.3f\t%.3f ± %.3f\t≥ %.2f\t%.3f\t%.2f\t\n",
			r.name, r.alpha, r.rule, r.aps.MinDocs, r.aps.MaxDocs, fmtQ(r.qhat), r.cov, r.avg, r.se, 1-r.alpha, r.kept, r.meanK)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "coverage = P(E ≤ q̂) on the fresh queries for this calibration set (queries without gold count as misses);\n"+
		"mean of %d splits = its mean ± s.e. over fresh calibration/test draws, the quantity the guarantee bounds;\n"+
		"gold kept = fraction of queries whose gold passage is among the k kept.\n", cfg.Splits)
	return err
}

// splitCoverage averages the test coverage over n fresh calibration sets
// (cfg.CalQueries each) and test sets of 300 queries, with its standard error.
func splitCoverage(a APS, alpha float64, rule QuantileRule, cfg WalkthroughConfig, n int) (mean, se float64, err error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 3))
	cal := make([]Query, cfg.CalQueries)
	test := make([]Query, 300)
	sum, sumSq := 0.0, 0.0
	for range n {
		for i := range cal {
			cal[i] = SimulatedQuery(rng, cfg.Candidates)
		}
		for i := range test {
			test[i] = SimulatedQuery(rng, cfg.Candidates)
		}
		c, err := a.Calibrate(cal, alpha, rule, nil)
		if err != nil {
			return 0, 0, fmt.Errorf("walkthrough: calibrate: %w", err)
		}
		cov, _, _, err := evalAPS(a, test, float64(c.QHatLog))
		if err != nil {
			return 0, 0, err
		}
		sum += cov
		sumSq += cov * cov
	}
	mean = sum / float64(n)
	return mean, math.Sqrt(math.Max(0, sumSq/float64(n)-mean*mean) / float64(n-1)), nil
}

// evalAPS returns the test coverage P(S ≤ q̂_S) (= P(E ≤ q̂_E)), the
// fraction of test queries whose gold passage is kept, and the mean kept
// count, for a log-scale threshold.
func evalAPS(a APS, test []Query, qhat float64) (cov, kept, meanK float64, err error) {
	for _, q := range test {
		e, err := a.LogScore(q.Scores, q.Gold)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("walkthrough: %w", err)
		}
		if e <= qhat {
			cov++
		}
		k := a.KeepLog(q.Scores, qhat)
		meanK += float64(k)
		if q.Gold != NoGold && rankOf(q.Scores, q.Gold) < k {
			kept++
		}
	}
	n := float64(len(test))
	return cov / n, kept / n, meanK / n, nil
}

func fmtQ(q float64) string {
	if math.IsInf(q, 0) {
		return fmt.Sprint(q)
	}
	return fmt.Sprintf("%.4f", q)
}

// walkLevel is the simulated policy's median answer-span NLL at step t: it
// falls geometrically from 4 to 1 as the policy grows confident (a constant
// relative drift), faster than the score window refreshes, so a fixed α = ρ
// flags too few trajectories.
func walkLevel(t, steps int) float64 {
	return 4 * math.Pow(0.25, float64(t)/float64(steps))
}

// aciNames label the walkthrough's controllers: the three rules, then a
// fixed α = ρ for comparison.
var aciNames = [...]string{"plain", "smoothed", "ema", "fixed α"}

// aciWalk holds the ACI part of the walkthrough: per controller, α_t, q_t and
// err_t of every step.
type aciWalk struct {
	alpha, q, err [len(aciNames)][]float64
}

func walkACI(cfg WalkthroughConfig) (aciWalk, error) {
	var out aciWalk
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	batch := func(t int) []float64 {
		b := make([]float64, cfg.Batch)
		lvl := walkLevel(t, cfg.Steps)
		for i := range b {
			b[i] = lvl * math.Exp(0.2*rng.NormFloat64()) // log-normal NLLs
		}
		return b
	}
	var boot []float64
	for len(boot) < 150 {
		boot = append(boot, batch(0)...)
	}
	boot = boot[:150]
	// The paper's window counts iterations (2000 of 2,560 trajectories);
	// scaled down to this stream, it holds as many iterations as 2000
	// scores fill, like the code's window of 2000 scores.
	paper := DefaultACIConfig()
	paper.Window = walkWindowIters(cfg)
	plain := paper
	plain.Rule = RulePlain
	fixed := plain
	fixed.Gamma = 1e-12 // α stays ρ
	cfgs := [len(aciNames)]ACIConfig{plain, paper, CodeACIConfig(), fixed}
	var ctl [len(aciNames)]*ACI
	for i, c := range cfgs {
		var err error
		if ctl[i], err = NewACI(c, boot); err != nil {
			return out, fmt.Errorf("walkthrough: %w", err)
		}
	}
	for t := 1; t <= cfg.Steps; t++ {
		b := batch(t)
		for i, a := range ctl {
			st, err := a.Step(b)
			if err != nil {
				return out, fmt.Errorf("walkthrough: %w", err)
			}
			out.alpha[i] = append(out.alpha[i], st.Alpha)
			out.q[i] = append(out.q[i], st.QHat)
			out.err[i] = append(out.err[i], st.Err)
		}
	}
	return out, nil
}

// walkWindowIters is the paper-style window of the walkthrough, in
// iterations: as many as DefaultWindow scores fill.
func walkWindowIters(cfg WalkthroughConfig) int {
	return max(1, DefaultWindow/max(1, cfg.Batch))
}

// lateErr is the mean err_t of controller i over the last three quarters.
func (a aciWalk) lateErr(i int) float64 {
	n := len(a.err[i])
	return tailMean(a.err[i], n-n/4)
}

func (a aciWalk) print(w io.Writer, cfg WalkthroughConfig) error {
	fmt.Fprintf(w, "ACI on a drifting simulated training stream: %d steps × %d trajectories, window %d iterations (plain, smoothed) or %d scores (ema, the code's), bootstrap 150 scores,\n",
		cfg.Steps, cfg.Batch, walkWindowIters(cfg), DefaultWindow)
	fmt.Fprintf(w, "ρ = %g, γ = %g, η = %g; median NLL falls 4 → 1 geometrically (err = mean over the last 25 steps)\n\n",
		DefaultRho, DefaultGamma, DefaultEta)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "t\tlevel\t")
	for _, n := range aciNames[:3] {
		fmt.Fprintf(tw, "%s α\t%s q\t%s err\t", n, n, n)
	}
	fmt.Fprintln(tw, "fixed α err\t")
	every := max(cfg.Steps/8, 1)
	for t := 1; t <= cfg.Steps; t++ {
		if t != 1 && t%every != 0 {
			continue
		}
		fmt.Fprintf(tw, "%d\t%.2f\t", t, walkLevel(t, cfg.Steps))
		for i := range 3 {
			fmt.Fprintf(tw, "%.3f\t%.2f\t%.3f\t", a.alpha[i][t-1], a.q[i][t-1], tailMean(a.err[i][:t], 25))
		}
		fmt.Fprintf(tw, "%.3f\t\n", tailMean(a.err[3][:t], 25))
	}
	fmt.Fprintf(tw, "mean err, t > %d\t\t", cfg.Steps/4)
	for i := range 3 {
		fmt.Fprintf(tw, "\t\t%.3f\t", a.lateErr(i))
	}
	fmt.Fprintf(tw, "%.3f\t\n", a.lateErr(3))
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "target ρ = %g: the window lags the falling scores, so q_t at level 1−ρ is too high and a fixed α flags too few\n"+
		"trajectories; ACI raises α_t until err_t averages ρ again (plain: Eq. 4, smoothed: Eq. 7, ema: official code).\n", DefaultRho)
	return err
}

func tailMean(xs []float64, n int) float64 {
	n = min(n, len(xs))
	if n == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs[len(xs)-n:] {
		s += x
	}
	return s / float64(n)
}
