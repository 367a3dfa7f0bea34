package demo

import (
	"fmt"
	"math"
	"strings"

	"github.com/cas-engine/cas/train"
)

// measurements renders the report's measured effects of GRPO and ACI: per
// policy EM with standard errors, searches and redundant searches, the
// two-hop questions answered after two searches, the ACI trace against ρ
// next to a fixed bootstrap threshold, and the reliability bins.
func measurements(res *Result) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := res.Config
	p("## What GRPO and ACI did, measured\n\n")
	p("Test split, greedy decoding; ± is one binomial standard error √(p(1−p)/n). A search is redundant when its query repeats an earlier one of the trajectory or all its kept passages were already shown. ECE compares EM with the confidence exp(−answer-span NLL) over %d equal-count NLL bins.\n\n", reliabilityBins)
	p("| Policy | EM single-hop | EM two-hop | EM overall | Searches / question | Questions with ≥ 1 search | Redundant / question | Two-hop with ≥ 2 searches | ECE |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, e := range res.Evals {
		if e.Mode == "direct" {
			continue
		}
		p("| %s | %.3f ± %.3f | %.3f ± %.3f | %.3f ± %.3f | %.2f | %.3f | %.3f | %.3f | %.3f |\n", Label(e.Name),
			e.EMSingle, EMStdErr(e.EMSingle, e.Single), e.EMTwoHop, EMStdErr(e.EMTwoHop, e.TwoHop), e.EM, EMStdErr(e.EM, e.Questions),
			e.SearchCalls, e.Searched, e.Redundant, e.TwoHopTwoSearches, e.ECE)
	}
	p("\n")
	if ws, ok := res.Eval(EvalWarmStart); ok {
		for _, v := range c.Variants {
			e, ok := res.Eval(v.Name)
			if !ok || c.GRPO.Steps == 0 {
				continue
			}
			d, se := e.EM-ws.EM, math.Hypot(EMStdErr(e.EM, e.Questions), EMStdErr(ws.EM, ws.Questions))
			p("- %s against the warm start: EM %+.3f (%s twice its standard error %.3f), questions with a search %.3f → %.3f, two-hop with two searches %.3f → %.3f, redundant searches %.3f → %.3f per question.\n",
				Label(v.Name), d, exceeds(math.Abs(d) > 2*se), se, ws.Searched, e.Searched, ws.TwoHopTwoSearches, e.TwoHopTwoSearches, ws.Redundant, e.Redundant)
		}
		p("\n")
	}

	if c.GRPO.Steps > 0 {
		p("### GRPO's rollouts, by quarter of the run\n\n")
		p("The training prompts' rollouts (%d prompts × %d a step, temperature %g), averaged over each quarter of the steps: the reward and EM GRPO sees, the share of rollouts that search, and the EM of those that search and of those that answer without a search. One step's reward is the mean over %d fresh questions, so consecutive steps differ by the batch as much as by the policy; `plots/%s` and `plots/%s` draw them step by step with a moving average.\n\n",
			c.GRPO.PromptsPerStep, c.GRPO.Group, c.GRPO.Temperature, c.GRPO.PromptsPerStep, TrainingPNG, SearchesPNG)
		p("| Variant | Steps | Reward | EM | Rollouts that search | EM after a search | EM without a search | Searches / rollout |\n")
		p("|---|---|---:|---:|---:|---:|---:|---:|\n")
		row := func(name string, q rolloutQuarter) {
			p("| %s | %d–%d | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |\n", name, q.First, q.Last, q.Reward, q.EM, q.Searched, q.EMSearched, q.EMDirect, q.SearchCalls)
		}
		ref := rolloutQuarters(res.NoUpdate)
		for _, q := range ref {
			row("No update (the warm start on the same prompts)", q)
		}
		for v, ms := range res.Trained() {
			for _, q := range rolloutQuarters(ms) {
				row(Label(v.Name), q)
			}
		}
		p("\n")
		if len(ref) > 0 {
			p("Every run samples the same prompts in the same order (same seed), so the frozen warm start's reward on them is the reference each variant's reward is read against: the batches alone move it.\n\n")
			for v, ms := range res.Trained() {
				qs := rolloutQuarters(ms)
				if len(qs) != len(ref) {
					continue
				}
				var gains []string
				for i, q := range qs {
					gains = append(gains, fmt.Sprintf("%+.3f", q.Reward-ref[i].Reward))
				}
				p("- %s: reward minus the no-update reference, by quarter, %s; rollouts that search %.2f → %.2f (reference %.2f → %.2f).\n",
					Label(v.Name), strings.Join(gains, ", "), qs[0].Searched, qs[len(qs)-1].Searched, ref[0].Searched, ref[len(ref)-1].Searched)
			}
			p("\n")
		}

		p("### ACI's low-confidence ratio against ρ (Figure 2)\n\n")
		p("err_t is the fraction of a step's trajectories whose answer-span NLL exceeds ACI's q_t (ω = η when ACI weights are on; −ACI runs the controller without applying ω). The fixed threshold is q_1, the bootstrap scores' quantile ACI starts from: its error rate at each step is what a static threshold would have down-weighted. Plain-rule bound on |mean err − ρ| after T steps: (max(α₁, 1−α₁) + γ)/(Tγ).\n\n")
		p("| Variant | ω applied | ρ | err_1 | mean err_t | mean err_t, 2nd half | α_1 → α_T+1 | fixed q_1: err_1 | fixed q_1: mean err | answer NLL first → last | bound |\n")
		p("|---|---|---:|---:|---:|---:|---|---:|---:|---|---:|\n")
		for v, ms := range res.Trained() {
			s := SummarizeACI(ms, c.rho(v), c.GRPO.Gamma)
			bound := fmt.Sprintf("%.3f", s.TheoremBound)
			if s.TheoremBound >= 1 {
				bound = fmt.Sprintf("%.3g (vacuous: T too short)", s.TheoremBound)
			}
			p("| %s | %v | %g | %.3f | %.3f | %.3f | %.3f → %.3f | %.3f | %.3f | %.3f → %.3f | %s |\n", Label(v.Name), s.Weighted, s.Rho,
				s.ErrFirst, s.ErrMean, s.ErrLateMean, s.AlphaFirst, s.AlphaLast, s.FixedFirst, s.FixedMean, s.ScoreFirst, s.ScoreLast, bound)
		}
		p("\n")
	}

	p("### Reliability: answer-span NLL bins against EM\n\n")
	p("Each cell: EM / mean confidence (questions), bins from the lowest NLL (most confident) up.\n\n")
	p("| Policy |")
	for i := range reliabilityBins {
		p(" bin %d |", i+1)
	}
	p(" ECE |\n|---|")
	for range reliabilityBins {
		p("---|")
	}
	p("---:|\n")
	for _, e := range res.Evals {
		if e.Mode == "direct" || len(e.Reliability) == 0 {
			continue
		}
		p("| %s |", Label(e.Name))
		for i := range reliabilityBins {
			if i < len(e.Reliability) {
				r := e.Reliability[i]
				p(" %.2f / %.2f (%d; NLL %.2f–%.2f) |", r.EM, r.Confidence, r.N, r.NLLLo, r.NLLHi)
			} else {
				p(" – |")
			}
		}
		p(" %.3f |\n", e.ECE)
	}
	p("\n")
	return b.String()
}

func exceeds(yes bool) string {
	if yes {
		return "exceeds"
	}
	return "within"
}

// rolloutQuarter summarises the training rollouts of steps First..Last.
type rolloutQuarter struct {
	First, Last                       int
	Reward, EM, Searched              float64
	EMSearched, EMDirect, SearchCalls float64
}

// rolloutQuarters splits a run's steps into four consecutive parts (fewer
// when it has fewer steps) and averages each over its trajectories: the EM
// after a search is the exact matches of searching rollouts over their
// number, pooled over the part's steps, and likewise without a search.
func rolloutQuarters(ms []train.StepMetrics) []rolloutQuarter {
	parts := min(4, len(ms))
	out := make([]rolloutQuarter, 0, parts)
	for k := range parts {
		lo, hi := k*len(ms)/parts, (k+1)*len(ms)/parts
		q := rolloutQuarter{First: ms[lo].Step, Last: ms[hi-1].Step}
		var n, searched, hitS, hitD float64
		for _, m := range ms[lo:hi] {
			t := float64(m.Trajectories)
			n += t
			q.Reward += m.Reward * t
			q.EM += m.EM * t
			q.SearchCalls += m.SearchCalls * t
			searched += m.Searched * t
			hitS += m.EMSearched * m.Searched * t
			hitD += m.EMDirect * (1 - m.Searched) * t
		}
		if n > 0 {
			q.Reward, q.EM, q.SearchCalls, q.Searched = q.Reward/n, q.EM/n, q.SearchCalls/n, searched/n
		}
		if searched > 0 {
			q.EMSearched = hitS / searched
		}
		if direct := n - searched; direct > 0 {
			q.EMDirect = hitD / direct
		}
		out = append(out, q)
	}
	return out
}
