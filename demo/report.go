package demo

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/cas-engine/cas/train"
	"github.com/cas-engine/cas/world"
)

// Label is the human name of an evaluation or variant in tables.
func Label(name string) string {
	switch name {
	case EvalNoRetrieval:
		return "No retrieval (direct answer)"
	case EvalWarmStart:
		return "Warm start only (APS)"
	case VariantCAS:
		return "CAS: GRPO + APS + ACI"
	case VariantNoACI:
		return "−ACI: GRPO + APS"
	case VariantNoAPS:
		return "−APS: GRPO + top-3 + ACI"
	}
	var x float64
	if _, err := fmt.Sscanf(name, "rho-%g", &x); err == nil {
		return fmt.Sprintf("ρ = %g", x)
	}
	if _, err := fmt.Sscanf(name, "aps-alpha-%g", &x); err == nil {
		return fmt.Sprintf("α_APS = %g", x)
	}
	return name
}

// Report renders report.md: the evaluation table, the APS calibration,
// the warm start, the GRPO runs, the plots, an example trajectory, the
// settings and the wall times.
func Report(res *Result) string {
	var b strings.Builder
	c := res.Config
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# CAS demo: a tiny Qwen search agent on a synthetic encyclopedia\n\n")
	p("Preset **%s**, seed **%d**, backend `%s`, wall time **%s** (this invocation; stages completed by an earlier, interrupted one count 0).\n\n",
		c.Preset, c.Seed, res.Backend, fmtDuration(res.Wall))
	p("World: %d passages; questions (single-hop / two-hop): ", res.Passages)
	var parts []string
	for s := range world.NumSplits {
		if n, ok := res.Questions[s.String()]; ok && (s != world.GRPO || n[0]+n[1] > 0) {
			parts = append(parts, fmt.Sprintf("%s %d / %d", s, n[0], n[1]))
		}
	}
	p("%s. Test questions are about entities that no training question mentions", strings.Join(parts, ", "))
	if n := res.Questions[world.GRPO.String()]; n[0]+n[1] > 0 {
		p("; so are GRPO's, a split of their own: the warm start is trained on the train split, and GRPO's prompts are questions it has never seen, whose answers it cannot have memorised (as Search-R1's RL questions are new to its base model)")
	}
	p(".\n\n")

	p("## Results on the test split\n\n")
	if len(res.Evals) > 0 {
		e0 := res.Evals[0]
		p("%d test questions (%d single-hop, %d two-hop), greedy decoding, one trajectory each.\n\n", e0.Questions, e0.Single, e0.TwoHop)
	}
	p("| Policy | Retrieval | EM single-hop | EM two-hop | EM overall | Searches / question | Docs / search | Gold in kept docs | Format-valid |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, e := range res.Evals {
		searches, docs, cov := fmt.Sprintf("%.2f", e.SearchCalls), fmt.Sprintf("%.2f", e.DocsPerSearch), fmt.Sprintf("%.3f", e.Coverage)
		if e.Mode == "direct" {
			searches, docs, cov = "–", "–", "–"
		}
		p("| %s | %s | %.3f | %.3f | %.3f | %s | %s | %s | %.3f |\n", Label(e.Name), e.Retrieval, e.EMSingle, e.EMTwoHop, e.EM,
			searches, docs, cov, e.FormatValid)
	}
	p("\n")
	b.WriteString(checks(res))
	b.WriteString(measurements(res))

	p("## APS on retrieval (stage 2)\n\n")
	p("Calibrated on the hop queries of the aps_calib split with their exact gold passages (the scripted search of each hop), %d BM25 candidates per query, softmax temperature T = %g over BM25 scores, the finite-sample conformal quantile, k clamped to [%d, %d]. Evaluated on the test split's hop queries.\n\n",
		c.APS.CalibCandidates, c.APS.Temperature, c.APS.MinDocs, c.APS.MaxDocs)
	p("| α | q̂ | n calib | Test coverage (gold in APS set) | P(E ≤ q̂) | Bound 1−α−2σ | Gold in APS set (%d cand.) | Mean kept | Gold in top-%d | Gold in top-%d |\n",
		c.APS.Candidates, c.APS.TopK, c.APS.Candidates)
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range sortedKeys(res.APS) {
		a := res.APS[k]
		p("| %g | %.4g | %d | %.3f | %.3f | %.3f | %.3f | %.2f | %.3f | %.3f |\n", a.Alpha, float64(a.QHat), a.N, a.TestCoverage, a.ScoreCoverage,
			a.CoverageBound, a.KeptCoverage, a.MeanKept, a.FixedCoverage, a.Retrieved)
	}
	p("\n")

	if w := res.Warm; w != nil {
		p("## Supervised warm start (stage 3)\n\n")
		p("A randomly initialised Qwen3 (%d layers, hidden %d, %d heads / %d KV heads, %d parameters, vocabulary %d) trained by cross-entropy on the tokens the policy writes, with the question and the <information> blocks in the loss at weight λ = %g (0: masked out, as in the paper's warm start; λ > 0 stands in for the pretraining a real Qwen has): %d scripted trajectories (one search per hop, real APS-truncated BM25 results: %.2f docs per search, gold kept in %.0f%% of searches; %d trajectories dropped because a hop's retrieval missed the gold passage) and %d direct-answer examples (the no-retrieval baseline's prompt). Mean %.0f tokens per trajectory (%.0f prompt, %.0f in the loss).\n\n",
			c.Model.Layers, c.Model.Hidden, c.Model.Heads, c.Model.KVHeads, w.Parameters, w.Vocab, c.Warm.EnvWeight, w.AgentExamples, w.APSMeanKept,
			100*w.APSGoldCovered, w.Dropped, w.DirectExamples, w.MeanTokens, w.PromptTokens, w.MeanPolicyTokens)
		if w.NoSearchExamples+w.OneSearchExamples > 0 {
			p("What the warm start teaches: the format, the search queries, copying names from the passages — and, as an instruct model does, to answer without looking everything up: %d of the %d scripted trajectories (share %g) answer from \"memory\" without a search (the golden answer: for a training question the fact the policy may have memorised, for an unseen test entity a guess), and %d two-hop ones (share %g of those that search) answer after the first search without chaining the second through the bridge entity. Whether to search, and to search again, is left for GRPO to learn from reward; the rows \"questions with ≥ 1 search\" and \"two-hop with ≥ 2 searches\" below measure it before and after.\n\n",
				w.NoSearchExamples, w.AgentExamples, c.Warm.NoSearch, w.OneSearchExamples, c.Warm.OneSearch)
		}
		if len(w.Losses) > 0 {
			p("%d steps of %d examples (length-sorted batches; %.0f%% of the tokens are the policy's), AdamW at learning rate %g after %d warm-up steps, ×%g for the last %.0f%%: cross-entropy %.3f → %.3f nats per policy token; %.2fM tokens processed (%.2fM supervised) in %s, %.0f tokens/s.\n\n",
				w.Steps, c.Warm.Batch, 100*float64(w.PolicyTokens)/float64(max(1, w.Tokens)), c.Warm.LR, c.Warm.Warmup, c.Warm.AnnealFactor, 100*(1-c.Warm.AnnealFrom),
				w.Losses[0], tail(w.Losses, 10), float64(w.Tokens)/1e6, float64(w.PolicyTokens)/1e6, fmtDuration(w.Seconds), w.TokensPerSec)
		}
	}

	if c.GRPO.Steps > 0 {
		p("## GRPO with APS and ACI (stage 4)\n\n")
		p("Each variant starts from the warm start: %d steps of %d prompts × G = %d trajectories (temperature %g), learning rate %g, KL β = %g; ACI with ρ = %g, γ = %g, η = %g, its window bootstrapped with %d answer-span NLLs of the warm-started policy's greedy answers on the aci_calib split (mean %.3f).\n\n",
			c.GRPO.Steps, c.GRPO.PromptsPerStep, c.GRPO.Group, c.GRPO.Temperature, c.GRPO.LR, c.GRPO.KLCoef, c.GRPO.Rho, c.GRPO.Gamma, c.GRPO.Eta,
			len(res.Bootstrap), mean(res.Bootstrap))
		p("| Variant | Reward (first → last step) | EM (train rollouts) | Searches / trajectory | Docs / search | α_T | Low-confidence ratio (mean) |\n")
		p("|---|---|---|---|---:|---:|---:|\n")
		for v, ms := range res.Trained() {
			f, l := ms[0], ms[len(ms)-1]
			p("| %s | %.3f → %.3f | %.3f → %.3f | %.2f → %.2f | %.2f | %.3f | %.3f |\n", Label(v.Name), f.Reward, l.Reward, f.EM, l.EM,
				f.SearchCalls, l.SearchCalls, l.DocsPerSearch, l.AlphaNext, meanOf(ms, func(m train.StepMetrics) float64 { return m.LowConfidence }))
		}
		p("\n")
	}

	p("## Plots\n\n")
	if c.GRPO.Steps > 0 {
		p("- [`plots/%s`](plots/%s): search calls, low-confidence ratio and α_t against steps (the paper's Figure 2)\n", train.Figure2PNG, train.Figure2PNG)
		p("- [`plots/%s`](plots/%s): reward, EM and documents per search against steps, per variant\n", train.RewardPNG, train.RewardPNG)
		p("- [`plots/%s`](plots/%s): reward and EM of the rollouts, raw and as a moving average\n", TrainingPNG, TrainingPNG)
		p("- [`plots/%s`](plots/%s): the share of rollouts that search, searches and redundant searches per trajectory\n", SearchesPNG, SearchesPNG)
		p("- [`plots/%s`](plots/%s): low-confidence ratio of ACI and of the fixed bootstrap threshold against ρ, and α_t\n", ACIPNG, ACIPNG)
	}
	p("- [`plots/%s`](plots/%s): reliability diagram, EM against exp(−answer-span NLL)\n", ReliabilityPNG, ReliabilityPNG)
	p("- [`plots/%s`](plots/%s): APS prediction-set sizes on the test split\n", APSHistogramPNG, APSHistogramPNG)
	p("- [`plots/%s`](plots/%s): the warm start's cross-entropy\n", WarmLossPNG, WarmLossPNG)
	p("- [`plots/%s`](plots/%s): test EM of every policy\n\n", EvalPNG, EvalPNG)

	if s, ok := exampleSample(res); ok {
		p("## An example trajectory (%s)\n\n", Label(s.name))
		p("Question: %s (gold: %s; %s)\n\n```\n%s\n```\n\n", s.Question, strings.Join(s.Golds, " / "), emWord(s.EM), s.Response)
	}

	p("## Wall time\n\n| Stage | Seconds |\n|---|---:|\n")
	for _, t := range res.Timings {
		if t.Resumed {
			p("| %s | (earlier run) |\n", t.Stage)
		} else {
			p("| %s | %.1f |\n", t.Stage, t.Seconds)
		}
	}
	p("\nReproduce: `cas demo --seed %d%s`; every number above is in `result.json`, the per-step training metrics in `grpo/<variant>/metrics.jsonl`.\n",
		c.Seed, map[bool]string{true: " --quick", false: ""}[c.Preset == "quick"])
	return b.String()
}

// checks states the acceptance checks against this run.
func checks(res *Result) string {
	var b strings.Builder
	nr, ok1 := res.Eval(EvalNoRetrieval)
	ws, ok2 := res.Eval(EvalWarmStart)
	if ok1 && ok2 {
		verdict := "Search helps"
		if ws.EM <= nr.EM {
			verdict = "Search does not help the warm start yet"
		}
		fmt.Fprintf(&b, "- %s: EM %.3f for the warm start with the search tool (%.3f of the questions answered after a search) against %.3f without retrieval.\n", verdict, ws.EM, ws.Searched, nr.EM)
	}
	if len(res.Config.Variants) > 0 && res.Config.GRPO.Steps > 0 {
		if cas, ok := res.Eval(res.Config.Variants[0].Name); ok && ok2 {
			fmt.Fprintf(&b, "- GRPO: EM %.3f after GRPO against %.3f after the warm start (±%.3f, one binomial standard deviation); questions answered after a search %.3f → %.3f, two-hop questions with two searches %.3f → %.3f.\n",
				cas.EM, ws.EM, math.Sqrt(max(ws.EM*(1-ws.EM), 1e-9)/float64(max(1, ws.Questions))), ws.Searched, cas.Searched, ws.TwoHopTwoSearches, cas.TwoHopTwoSearches)
		}
		noaci, ok3 := res.Eval(VariantNoACI)
		cas, ok4 := res.Eval(VariantCAS)
		if ok3 && ok4 {
			fmt.Fprintf(&b, "- ACI: %.2f searches per question with ACI weights against %.2f without.\n", cas.SearchCalls, noaci.SearchCalls)
		}
	}
	if a, ok := res.APS[fmtAlpha(res.Config.APS.Alpha)]; ok {
		fmt.Fprintf(&b, "- APS coverage on the test split: %.3f for target %.2f (bound %.3f with n = %d).\n", a.TestCoverage, 1-a.Alpha, a.CoverageBound, a.Test)
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

type namedSample struct {
	name string
	Sample
}

// exampleSample picks a correct two-hop-looking sample of the main variant
// (else of the warm start).
func exampleSample(res *Result) (namedSample, bool) {
	names := []string{}
	if len(res.Config.Variants) > 0 {
		names = append(names, res.Config.Variants[0].Name)
	}
	names = append(names, EvalWarmStart)
	for _, n := range names {
		e, ok := res.Eval(n)
		if !ok || len(e.Samples) == 0 {
			continue
		}
		best := e.Samples[0]
		for _, s := range e.Samples {
			if s.EM && (!best.EM || strings.Count(s.Response, "<search>") > strings.Count(best.Response, "<search>")) {
				best = s
			}
		}
		return namedSample{n, best}, true
	}
	return namedSample{}, false
}

func emWord(em bool) string {
	if em {
		return "exact match"
	}
	return "wrong"
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func tail(xs []float64, n int) float64 { return mean(xs[max(0, len(xs)-n):]) }

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func meanOf(ms []train.StepMetrics, f func(train.StepMetrics) float64) float64 {
	xs := make([]float64, len(ms))
	for i, m := range ms {
		xs[i] = f(m)
	}
	return mean(xs)
}

func fmtDuration(sec float64) string {
	if sec < 90 {
		return fmt.Sprintf("%.0f s", sec)
	}
	return fmt.Sprintf("%dm%02ds", int(sec)/60, int(sec)%60)
}
