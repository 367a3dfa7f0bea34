package demo

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/train"
	"github.com/cas-engine/cas/world"
)

// handTraj builds a trajectory with a 2-token prompt and a response whose
// answer span holds tokens of the given log-probabilities.
func handTraj(em bool, answerLogps []float32, searches ...agent.SearchCall) *agent.Trajectory {
	n := 2 + 1 + len(answerLogps)
	t := &agent.Trajectory{IDs: make([]int, n), PromptLen: 2, Mask: make([]uint8, n), LogProbs: make([]float32, n), EM: em, Searches: searches}
	t.LogProbs[2] = -5 // a token before the answer, outside the span
	copy(t.LogProbs[3:], answerLogps)
	for i := 2; i < n; i++ {
		t.Mask[i] = 1
	}
	t.AnswerSpan = [2]int{1, 1 + len(answerLogps)}
	return t
}

func TestSummarizeMeasurements(t *testing.T) {
	sc := func(q string, kept ...string) agent.SearchCall { return agent.SearchCall{Query: q, Kept: kept} }
	qs := []world.Question{{Hops: 1}, {Hops: 2}, {Hops: 2}, {Hops: 2}}
	trajs := []*agent.Trajectory{
		handTraj(true, []float32{-0.1}, sc("capital of x", "p1")),
		handTraj(true, []float32{-0.2, -0.4}, sc("founder of acme", "p2"), sc("birthplace of bo", "p3")),
		handTraj(false, []float32{-2}, sc("founder of acme", "p2"), sc("Founder of Acme", "p4")),
		handTraj(false, []float32{-3}, sc("founder of acme", "p2")),
	}
	var res EvalResult
	summarize(&res, qs, trajs)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if res.Single != 1 || res.TwoHop != 3 || !near(res.EMSingle, 1) || !near(res.EMTwoHop, 1.0/3) || !near(res.EM, 0.5) {
		t.Errorf("EM: %+v", res)
	}
	if !near(res.SearchCalls, 6.0/4) || !near(res.Redundant, 1.0/4) || !near(res.TwoHopTwoSearches, 2.0/3) {
		t.Errorf("searches %.3f, redundant %.3f, two-hop with two searches %.3f; want 1.5, 0.25, 0.667", res.SearchCalls, res.Redundant, res.TwoHopTwoSearches)
	}
	if !near(res.Searched, 1) {
		t.Errorf("searched %.3f, want 1", res.Searched)
	}
	var mem EvalResult // one more question answered from memory
	summarize(&mem, append(qs, world.Question{Hops: 1}), append(trajs, handTraj(false, []float32{-1})))
	if !near(mem.Searched, 4.0/5) || !near(mem.SearchCalls, 6.0/5) {
		t.Errorf("with an answer from memory: searched %.3f, searches %.3f; want 0.8, 1.2", mem.Searched, mem.SearchCalls)
	}
	wantNLL := []float64{0.1, 0.3, 2, 3}
	for i, o := range res.Outcomes {
		if math.Abs(o.NLL-wantNLL[i]) > 1e-6 || o.Hops != qs[i].Hops || o.EM != trajs[i].EM {
			t.Errorf("outcome %d: %+v, want NLL %g", i, o, wantNLL[i])
		}
	}
	if len(res.Reliability) != 4 || res.Reliability[0].N != 1 || res.Reliability[3].EM != 0 {
		t.Errorf("reliability %+v", res.Reliability)
	}
}

func TestReliability(t *testing.T) {
	o := func(nll float64, em bool) QuestionOutcome { return QuestionOutcome{NLL: nll, EM: em} }
	outs := []QuestionOutcome{o(2, false), o(0, true), o(0, true), o(0, false), o(1, true), o(3, false)}
	bins, ece := Reliability(outs, 3)
	// Bin b ends at the ⌊b·N/bins⌋-th answer (2, 4, 6) unless that splits
	// a tie: the three NLL-0 answers stay together, {0, 0, 0}, {1}, {2, 3}.
	if len(bins) != 3 || bins[0].N != 3 || bins[1].N != 1 || bins[2].N != 2 {
		t.Fatalf("bins %+v", bins)
	}
	c2 := (math.Exp(-2) + math.Exp(-3)) / 2
	want := []ReliabilityBin{
		{NLLLo: 0, NLLHi: 0, N: 3, Confidence: 1, EM: 2.0 / 3},
		{NLLLo: 1, NLLHi: 1, N: 1, Confidence: math.Exp(-1), EM: 1},
		{NLLLo: 2, NLLHi: 3, N: 2, Confidence: c2, EM: 0},
	}
	for i, w := range want {
		g := bins[i]
		if g.NLLLo != w.NLLLo || g.NLLHi != w.NLLHi || g.N != w.N || math.Abs(g.Confidence-w.Confidence) > 1e-12 || math.Abs(g.EM-w.EM) > 1e-12 {
			t.Errorf("bin %d: %+v, want %+v", i, g, w)
		}
	}
	wantECE := 3.0/6*(1-2.0/3) + 1.0/6*(1-math.Exp(-1)) + 2.0/6*c2
	if math.Abs(ece-wantECE) > 1e-12 {
		t.Errorf("ECE %.6f, want %.6f", ece, wantECE)
	}
	if b, e := Reliability(nil, 5); b != nil || e != 0 {
		t.Errorf("empty: %v %v", b, e)
	}
}

// steps builds GRPO metrics with the given q_t, err_t and scores.
func steps(q []float64, err []float64, scores [][]float64) []train.StepMetrics {
	ms := make([]train.StepMetrics, len(q))
	for i := range q {
		ms[i] = train.StepMetrics{Step: i + 1, QHat: conformal.JSONFloat(q[i]), LowConfidence: err[i], Scores: scores[i],
			Alpha: 0.25 - 0.01*float64(i), AlphaNext: 0.25 - 0.01*float64(i+1), ACIWeighted: true}
	}
	return ms
}

func TestFixedThresholdErr(t *testing.T) {
	// q_1 = 1: the fixed threshold keeps flagging the drifted scores of
	// later steps while ACI's q_t follows them.
	ms := steps([]float64{1, 2, 3}, []float64{0.5, 0.25, 0.25},
		[][]float64{{0.5, 0.8, 1.5, 2}, {1.5, 2.5, 1.2, 0.9}, {3.5, 2, 2, 2}})
	ms = append(ms, train.StepMetrics{Step: 4})
	got := FixedThresholdErr(ms)
	want := []float64{0.5, 0.75, 1}
	for i, w := range want {
		if math.Abs(got[i]-w) > 1e-12 {
			t.Errorf("step %d: fixed err %g, want %g", i+1, got[i], w)
		}
	}
	if !math.IsNaN(got[3]) {
		t.Errorf("a step without scores: %g, want NaN", got[3])
	}
	s := SummarizeACI(ms[:3], 0.25, 0.005)
	if s.ErrFirst != 0.5 || math.Abs(s.ErrMean-1.0/3) > 1e-12 || s.ErrLateMean != 0.25 || s.FixedFirst != 0.5 || math.Abs(s.FixedMean-0.75) > 1e-12 {
		t.Errorf("summary %+v", s)
	}
	if s.AlphaFirst != 0.25 || math.Abs(s.AlphaLast-0.22) > 1e-12 || !s.Weighted || math.Abs(s.TheoremBound-(0.75+0.005)/(3*0.005)) > 1e-9 {
		t.Errorf("summary %+v", s)
	}
}

func TestMeasurePlotsAndReport(t *testing.T) {
	cfg := QuickConfig(1)
	cfg.GRPO.Steps = 3
	res := &Result{Config: cfg, Metrics: map[string][]train.StepMetrics{}, APS: map[string]APSReport{}}
	for i, v := range cfg.Variants {
		ms := steps([]float64{1, 2, 3}, []float64{0.5, 0.25, 0.25}, [][]float64{{0.5, 2}, {1.5, 2.5}, {3.5, 2}})
		for k := range ms {
			ms[k].Reward, ms[k].EM, ms[k].SearchCalls, ms[k].Redundant = 0.3+0.1*float64(k+i), 0.2+0.1*float64(k), 1.5, 0.1*float64(k)
		}
		res.Metrics[v.Name] = ms
	}
	res.NoUpdate = steps([]float64{1, 2, 3}, []float64{0.5, 0.25, 0.25}, [][]float64{{0.5, 2}, {1.5, 2.5}, {3.5, 2}})
	for k := range res.NoUpdate {
		res.NoUpdate[k].Reward, res.NoUpdate[k].Trajectories = 0.3-0.05*float64(k), 20
	}
	for _, ms := range res.Metrics {
		for k := range ms {
			ms[k].Trajectories = 20
		}
	}
	outs := []QuestionOutcome{{Hops: 1, EM: true, NLL: 0.1}, {Hops: 2, EM: false, NLL: 2}, {Hops: 2, EM: true, NLL: 0.5}}
	rel, ece := Reliability(outs, reliabilityBins)
	for i, n := range append([]string{EvalNoRetrieval, EvalWarmStart}, variantNames(cfg)...) {
		e := EvalResult{Name: n, Mode: "agent", Questions: 3, Single: 1, TwoHop: 2, EM: 2.0 / 3, EMSingle: 1, EMTwoHop: 0.5,
			Redundant: 0.1 * float64(i), TwoHopTwoSearches: 0.5, Reliability: rel, ECE: ece, Outcomes: outs}
		if n == EvalNoRetrieval {
			e.Mode = "direct"
		}
		res.Evals = append(res.Evals, e)
	}
	dir := t.TempDir()
	if err := WriteMeasurePlots(dir, res); err != nil {
		t.Fatal(err)
	}
	if err := plotEvalEM(filepath.Join(dir, EvalPNG), res.Evals); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{TrainingPNG, SearchesPNG, ACIPNG, ReliabilityPNG, EvalPNG} {
		fh, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(fh)
		fh.Close()
		if err != nil || cfg.Width < 300 {
			t.Errorf("%s: %v (%d px wide)", f, err, cfg.Width)
		}
	}
	md := measurements(res)
	for _, want := range []string{"Two-hop with ≥ 2 searches", "| CAS: GRPO + APS + ACI | 1.000 ± 0.000 | 0.500 ± 0.354 | 0.667 ± 0.272 |",
		"| 0.500 | 0.333 | 0.250 | 0.250 → 0.220 | 0.500 | 0.833 |", "within twice its standard error", "ECE",
		"| No update (the warm start on the same prompts) | 3–3 | 0.200 |", "- CAS: GRPO + APS + ACI: reward minus the no-update reference, by quarter, +0.000, +0.150, +0.300;"} {
		if !strings.Contains(md, want) {
			t.Errorf("measurements lack %q:\n%s", want, md)
		}
	}
}

func TestAblationDifferences(t *testing.T) {
	cfg := QuickConfig(1)
	cfg.Variants = DemoVariants()
	// EM per seed: warm start, CAS (clearly above the warm start), −ACI
	// (noisy around CAS), −APS (clearly below).
	ems := map[string][]float64{EvalNoRetrieval: {0, 0, 0}, EvalWarmStart: {0.30, 0.32, 0.31},
		VariantCAS: {0.40, 0.43, 0.41}, VariantNoACI: {0.45, 0.40, 0.42}, VariantNoAPS: {0.30, 0.33, 0.31}}
	var results []*Result
	for s := range 3 {
		r := &Result{Config: cfg, APS: map[string]APSReport{}, Metrics: map[string][]train.StepMetrics{}}
		for _, n := range append([]string{EvalNoRetrieval, EvalWarmStart}, variantNames(cfg)...) {
			r.Evals = append(r.Evals, EvalResult{Name: n, EM: ems[n][s], Questions: 100})
		}
		r.Metrics[VariantCAS] = []train.StepMetrics{{Step: 1, LowConfidence: 0.5, AlphaNext: 0.2}, {Step: 2, LowConfidence: 0.3, AlphaNext: 0.21}}
		results = append(results, r)
	}
	ab := Tabulate(results)
	ab.Seeds = []uint64{1, 2, 3}
	rows := map[string]AblationRow{}
	for _, r := range ab.Table3 {
		rows[r.Name] = r
	}
	cas := rows[VariantCAS]
	if cas.VsWarm == nil || !cas.VsWarm.Paired || !cas.VsWarm.Significant || math.Abs(cas.VsWarm.Mean-0.1033333) > 1e-6 {
		t.Errorf("CAS vs warm start: %+v", cas.VsWarm)
	}
	// d = (0.05, −0.03, 0.01): mean 0.01, std 0.04, SE 0.04/√3 ≈ 0.0231.
	if d := rows[VariantNoACI].VsDefault; d == nil || d.Significant || math.Abs(d.Mean-0.01) > 1e-12 || math.Abs(d.StdErr-0.04/math.Sqrt(3)) > 1e-12 {
		t.Errorf("−ACI vs CAS: %+v", d)
	}
	if d := rows[VariantNoAPS].VsDefault; d == nil || !d.Significant || d.Mean > -0.09 {
		t.Errorf("−APS vs CAS: %+v", d)
	}
	if rows[EvalWarmStart].VsDefault != nil || cas.VsDefault != nil {
		t.Errorf("baseline rows are not compared with the default")
	}
	if math.Abs(cas.LowConf.Mean-0.4) > 1e-12 || cas.AlphaLast.Mean != 0.21 || len(rows[VariantNoACI].LowConf.Runs) != 0 {
		t.Errorf("ACI columns: %+v %+v", cas.LowConf, cas.AlphaLast)
	}
	md := ab.Markdown()
	for _, want := range []string{"0.400, 0.430, 0.410", "exceeds twice its standard error: better",
		"−ACI: GRPO + APS against CAS: GRPO + APS + ACI: EM +0.010 ± 0.023 (paired over seeds) — does not exceed", "exceeds twice its standard error: worse"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// One seed: the binomial standard error of two evaluations of 100.
	one := Tabulate(results[:1])
	for _, r := range one.Table3 {
		if r.Name == VariantNoAPS {
			want := math.Hypot(EMStdErr(0.30, 100), EMStdErr(0.40, 100))
			if r.VsDefault.Paired || math.Abs(r.VsDefault.StdErr-want) > 1e-12 || r.VsDefault.Significant { // 0.10 < 2 × 0.067
				t.Errorf("one seed: %+v (want SE %.4f)", r.VsDefault, want)
			}
		}
	}
	// Runs without GRPO variants tabulate their baselines, compared with
	// nothing.
	bare := *results[0]
	bare.Config.Variants = nil
	if tb := Tabulate([]*Result{&bare}); len(tb.Table3) != 2 || tb.Table3[1].VsDefault != nil || tb.Table3[1].VsWarm != nil {
		t.Errorf("no variants: %+v", tb.Table3)
	}
	path := filepath.Join(t.TempDir(), AblationPNG)
	if err := ab.Plot(path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() < 1000 {
		t.Errorf("plot: %v", err)
	}
}

func TestRolloutQuarters(t *testing.T) {
	step := func(s, n int, reward, searched, emS, emD float64) train.StepMetrics {
		return train.StepMetrics{Step: s, Trajectories: n, Reward: reward, Searched: searched, EMSearched: emS, EMDirect: emD,
			EM: searched*emS + (1-searched)*emD, SearchCalls: 1.5 * searched}
	}
	for _, tc := range []struct {
		name string
		ms   []train.StepMetrics
		want []rolloutQuarter
	}{
		{"one step a quarter", []train.StepMetrics{step(1, 40, 0.2, 0.25, 0.4, 0.1), step(2, 40, 0.3, 0.5, 0.4, 0), step(3, 40, 0.4, 0.75, 0.6, 0), step(4, 40, 0.5, 1, 0.5, 0)},
			[]rolloutQuarter{{1, 1, 0.2, 0.175, 0.25, 0.4, 0.1, 0.375}, {2, 2, 0.3, 0.2, 0.5, 0.4, 0, 0.75}, {3, 3, 0.4, 0.45, 0.75, 0.6, 0, 1.125}, {4, 4, 0.5, 0.5, 1, 0.5, 0, 1.5}}},
		// Steps of 20 and 60 trajectories pool by trajectory: 5 of 20 and 30
		// of 60 search (35 of 80), 2 + 12 of them are right (0.4).
		{"pooled by trajectories, fewer steps than parts", []train.StepMetrics{step(7, 20, 0.2, 0.25, 0.4, 0), step(8, 60, 0.6, 0.5, 0.4, 0.2)},
			[]rolloutQuarter{{7, 7, 0.2, 0.1, 0.25, 0.4, 0, 0.375}, {8, 8, 0.6, 0.3, 0.5, 0.4, 0.2, 0.75}}},
		// 15 of step 4 and 30 of step 5 answer without a search, 6 of them right.
		{"five steps: the last part holds two", []train.StepMetrics{step(1, 20, 0, 0, 0, 0), step(2, 20, 0, 0, 0, 0), step(3, 20, 0, 0, 0, 0), step(4, 20, 0.2, 0.25, 0.4, 0), step(5, 60, 0.6, 0.5, 0.4, 0.2)},
			[]rolloutQuarter{{1, 1, 0, 0, 0, 0, 0, 0}, {2, 2, 0, 0, 0, 0, 0, 0}, {3, 3, 0, 0, 0, 0, 0, 0}, {4, 5, 0.5, 0.25, 0.4375, 0.4, 6.0 / 45, 0.65625}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rolloutQuarters(tc.ms)
			if len(got) != len(tc.want) {
				t.Fatalf("%d parts, want %d", len(got), len(tc.want))
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				vals := [][2]float64{{g.Reward, w.Reward}, {g.EM, w.EM}, {g.Searched, w.Searched}, {g.EMSearched, w.EMSearched}, {g.EMDirect, w.EMDirect}, {g.SearchCalls, w.SearchCalls}}
				for _, v := range vals {
					if math.Abs(v[0]-v[1]) > 1e-12 || g.First != w.First || g.Last != w.Last {
						t.Errorf("part %d = %+v, want %+v", i, g, w)
						break
					}
				}
			}
		})
	}
}
