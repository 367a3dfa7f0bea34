package demo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cas-engine/cas/train"
)

// AblationFile and AblationJSON are the tables Ablate writes.
const (
	AblationFile = "ablation.md"
	AblationJSON = "ablation.json"
	AblationPNG  = "ablation_em.png"
)

// Cell is a mean ± sample standard deviation over seeds.
type Cell struct {
	Mean float64   `json:"mean"`
	Std  float64   `json:"std"`
	Runs []float64 `json:"runs"`
}

func newCell(xs []float64) Cell {
	c := Cell{Runs: xs, Mean: mean(xs)}
	if len(xs) > 1 {
		ss := 0.0
		for _, x := range xs {
			ss += (x - c.Mean) * (x - c.Mean)
		}
		c.Std = math.Sqrt(ss / float64(len(xs)-1))
	}
	return c
}

// String formats the cell as "0.512 ± 0.034" (no ± for one seed).
func (c Cell) String() string {
	if len(c.Runs) < 2 {
		return fmt.Sprintf("%.3f", c.Mean)
	}
	return fmt.Sprintf("%.3f ± %.3f", c.Mean, c.Std)
}

// AblationRow is one row of Table 3: a policy's test metrics over seeds.
type AblationRow struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Retrieval   string `json:"retrieval"`
	EMSingle    Cell   `json:"em_single"`
	EMTwoHop    Cell   `json:"em_two_hop"`
	EM          Cell   `json:"em"`
	SearchCalls Cell   `json:"search_calls"`
	Docs        Cell   `json:"docs_per_search"`
	// Redundant searches per question, the share of two-hop questions
	// answered after two searches, and the reliability's ECE.
	Redundant Cell `json:"redundant_searches"`
	TwoHopTwo Cell `json:"two_hop_two_searches"`
	ECE       Cell `json:"ece"`
	// LowConf is the mean ACI low-confidence ratio err_t over the GRPO
	// steps and AlphaLast α after the last step (GRPO rows only).
	LowConf   Cell `json:"low_conf_ratio,omitempty"`
	AlphaLast Cell `json:"aci_alpha_last,omitempty"`
	// Questions is the number of test questions of each evaluation.
	Questions int `json:"questions"`
	// VsDefault is the row's EM difference to the default (CAS) row and
	// VsWarm the default row's to the warm start (nil where not defined).
	VsDefault *Difference `json:"vs_default,omitempty"`
	VsWarm    *Difference `json:"vs_warm_start,omitempty"`
}

// Difference is the test-EM difference of a row to a reference row, seed
// by seed (both from the same warm start): mean d̄ of d_s = EM_s − EMref_s
// and its standard error — std(d)/√n over n ≥ 2 seeds, else the binomial
// √(p(1−p)/N + p'(1−p')/N) of one evaluation of N questions each.
type Difference struct {
	Against string  `json:"against"`
	Mean    float64 `json:"mean"`
	StdErr  float64 `json:"std_err"`
	Paired  bool    `json:"paired"`
	// Significant: |d̄| > 2·StdErr.
	Significant bool `json:"significant"`
}

// newDifference compares per-seed values a against ref (same seeds, same
// order) over evaluations of n questions.
func newDifference(against string, a, ref []float64, n int) *Difference {
	if len(a) == 0 || len(a) != len(ref) {
		return nil
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - ref[i]
	}
	c := newCell(d)
	out := &Difference{Against: against, Mean: c.Mean, Paired: len(d) > 1}
	if out.Paired {
		out.StdErr = c.Std / math.Sqrt(float64(len(d)))
	} else {
		out.StdErr = math.Hypot(EMStdErr(a[0], n), EMStdErr(ref[0], n))
	}
	out.Significant = math.Abs(out.Mean) > 2*out.StdErr
	return out
}

// Sentence says in words whether the difference exceeds its noise.
func (d *Difference) Sentence(row string) string {
	how := "paired over seeds"
	if !d.Paired {
		how = "binomial, one seed"
	}
	verdict := "does not exceed twice its standard error: no difference is shown"
	if d.Significant {
		verdict = "exceeds twice its standard error"
		if d.Mean > 0 {
			verdict += ": better"
		} else {
			verdict += ": worse"
		}
	}
	return fmt.Sprintf("%s against %s: EM %+.3f ± %.3f (%s) — %s.", row, Label(d.Against), d.Mean, d.StdErr, how, verdict)
}

// APSRow is one row of Table 4: the passages kept per search at one α_APS
// (by the trained agent at test time, and by APS on the scripted test
// queries), with the calibration's coverage.
type APSRow struct {
	Alpha        float64 `json:"alpha"`
	Variant      string  `json:"variant"`
	AgentDocs    Cell    `json:"agent_docs_per_search"`
	MeanKept     Cell    `json:"calibration_mean_kept"`
	TestCoverage Cell    `json:"test_coverage"`
}

// Ablation is the result of Ablate.
type Ablation struct {
	Preset string        `json:"preset"`
	Seeds  []uint64      `json:"seeds"`
	World  uint64        `json:"world_seed"`
	Table3 []AblationRow `json:"table3"`
	Table4 []APSRow      `json:"table4"`
	Wall   float64       `json:"wall_s"`
}

// Ablate runs the demo pipeline with the paper's ablation rows
// (AblationVariants) once per seed — every seed its own warm start and GRPO
// runs on the same world (base.World.Seed) — each into out/seed-<s>
// (resumable like Run), then writes Table 3 (test EM per row, mean ± std
// over seeds) and Table 4 (passages per search per α_APS) to ablation.md
// and ablation.json.
func Ablate(ctx context.Context, base Config, seeds []uint64, out string, opts Options) (*Ablation, error) {
	if len(seeds) == 0 {
		return nil, errors.New("ablate: no seeds")
	}
	start := time.Now()
	if len(base.Variants) == 0 {
		base.Variants = AblationVariants()
	}
	var results []*Result
	for _, s := range seeds {
		cfg := base
		cfg.Seed = s
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "ablate: seed %d (%d of %d)\n", s, len(results)+1, len(seeds))
		}
		res, err := Run(ctx, cfg, filepath.Join(out, fmt.Sprintf("seed-%d", s)), opts)
		if err != nil {
			return nil, fmt.Errorf("seed %d: %w", s, err)
		}
		results = append(results, res)
	}
	ab := Tabulate(results)
	ab.Preset, ab.Seeds, ab.World, ab.Wall = base.Preset, seeds, base.World.Seed, time.Since(start).Seconds()
	if err := writeJSON(filepath.Join(out, AblationJSON), ab); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(out, AblationFile), []byte(ab.Markdown())); err != nil {
		return nil, err
	}
	if err := ab.Plot(filepath.Join(out, AblationPNG)); err != nil {
		return nil, err
	}
	return ab, nil
}

// Tabulate aggregates runs of the same config over seeds.
func Tabulate(results []*Result) *Ablation {
	ab := &Ablation{}
	if len(results) == 0 {
		return ab
	}
	cfg := results[0].Config
	names := []string{EvalNoRetrieval, EvalWarmStart}
	for _, v := range cfg.Variants {
		names = append(names, v.Name)
	}
	for _, n := range names {
		var es []EvalResult
		for _, r := range results {
			if e, ok := r.Eval(n); ok {
				es = append(es, e)
			}
		}
		if len(es) == 0 {
			continue
		}
		col := func(f func(EvalResult) float64) Cell {
			xs := make([]float64, len(es))
			for i, e := range es {
				xs[i] = f(e)
			}
			return newCell(xs)
		}
		row := AblationRow{Name: n, Label: Label(n), Retrieval: es[0].Retrieval, Questions: es[0].Questions,
			EMSingle: col(func(e EvalResult) float64 { return e.EMSingle }), EMTwoHop: col(func(e EvalResult) float64 { return e.EMTwoHop }),
			EM: col(func(e EvalResult) float64 { return e.EM }), SearchCalls: col(func(e EvalResult) float64 { return e.SearchCalls }),
			Docs:      col(func(e EvalResult) float64 { return e.DocsPerSearch }),
			Redundant: col(func(e EvalResult) float64 { return e.Redundant }), TwoHopTwo: col(func(e EvalResult) float64 { return e.TwoHopTwoSearches }),
			ECE: col(func(e EvalResult) float64 { return e.ECE })}
		var low, alpha []float64
		for _, r := range results {
			if ms := r.Metrics[n]; len(ms) > 0 {
				low = append(low, meanOf(ms, func(m train.StepMetrics) float64 { return m.LowConfidence }))
				alpha = append(alpha, ms[len(ms)-1].AlphaNext)
			}
		}
		if len(low) > 0 {
			row.LowConf, row.AlphaLast = newCell(low), newCell(alpha)
		}
		ab.Table3 = append(ab.Table3, row)
	}
	// Differences: every GRPO row against the default (the first variant),
	// the default against the warm start, over the seeds both have.
	var def, warm *AblationRow
	for i := range ab.Table3 {
		switch n := ab.Table3[i].Name; {
		case len(cfg.Variants) > 0 && n == cfg.Variants[0].Name:
			def = &ab.Table3[i]
		case n == EvalWarmStart:
			warm = &ab.Table3[i]
		}
	}
	if def != nil {
		for i := range ab.Table3 {
			r := &ab.Table3[i]
			if r.Name != def.Name && r.Name != EvalNoRetrieval && r.Name != EvalWarmStart {
				r.VsDefault = newDifference(def.Name, r.EM.Runs, def.EM.Runs, r.Questions)
			}
		}
		if warm != nil {
			def.VsWarm = newDifference(EvalWarmStart, def.EM.Runs, warm.EM.Runs, def.Questions)
		}
	}
	// Table 4: one row per α_APS, from the APS-on variant with that level
	// and the full method otherwise (ρ and ACI at their defaults).
	for _, alpha := range cfg.apsAlphas() {
		var variant string
		for _, v := range cfg.Variants {
			if v.APS && v.ACI && cfg.apsAlpha(v) == alpha && cfg.rho(v) == cfg.GRPO.Rho {
				variant = v.Name
				break
			}
		}
		row := APSRow{Alpha: alpha, Variant: variant}
		var docs, kept, cov []float64
		key := fmtAlpha(alpha)
		for _, r := range results {
			if a, ok := r.APS[key]; ok {
				kept = append(kept, a.MeanKept)
				cov = append(cov, a.TestCoverage)
			}
			if e, ok := r.Eval(variant); ok && variant != "" {
				docs = append(docs, e.DocsPerSearch)
			}
		}
		row.AgentDocs, row.MeanKept, row.TestCoverage = newCell(docs), newCell(kept), newCell(cov)
		ab.Table4 = append(ab.Table4, row)
	}
	return ab
}

// Plot draws Table 3's test EM (single-hop, two-hop, overall) per row,
// mean ± sample std over seeds.
func (ab *Ablation) Plot(path string) error {
	if len(ab.Table3) == 0 {
		return nil
	}
	names := make([]string, len(ab.Table3))
	series := []emSeries{{label: "single-hop"}, {label: "two-hop"}, {label: "overall"}}
	for i, r := range ab.Table3 {
		names[i] = r.Name
		for k, c := range []Cell{r.EMSingle, r.EMTwoHop, r.EM} {
			series[k].vals = append(series[k].vals, c.Mean)
			series[k].err = append(series[k].err, c.Std)
		}
	}
	return plotEMWithErrors(path, fmt.Sprintf("Test EM over %d seeds (mean ± std)", len(ab.Seeds)), names, series)
}

// Markdown renders the two tables in the paper's layout.
func (ab *Ablation) Markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	seeds := make([]string, len(ab.Seeds))
	for i, s := range ab.Seeds {
		seeds[i] = strconv.FormatUint(s, 10)
	}
	p("# CAS ablation on the synthetic world\n\n")
	p("Preset **%s**, world seed %d, training seeds %s (mean ± sample std over seeds), %s in all.\n\n",
		ab.Preset, ab.World, strings.Join(seeds, ", "), fmtDuration(ab.Wall))
	p("## Table 3: ablation (test EM, unseen entities)\n\n")
	p("| Method | Retrieval | Single-hop | Two-hop | Overall | Overall per seed | Searches / question | Redundant / question | Two-hop with ≥ 2 searches | Docs / search | ACI err_t (mean) | α after GRPO | ECE |\n")
	p("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range ab.Table3 {
		low, alpha := "–", "–"
		if len(r.LowConf.Runs) > 0 {
			low, alpha = r.LowConf.String(), r.AlphaLast.String()
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Label, r.Retrieval, r.EMSingle, r.EMTwoHop, r.EM, perSeed(r.EM.Runs),
			r.SearchCalls, r.Redundant, r.TwoHopTwo, r.Docs, low, alpha, r.ECE)
	}
	p("\nWhich differences exceed their noise (test EM overall; a row and the default share each seed's warm start, so the difference is taken seed by seed):\n\n")
	for _, r := range ab.Table3 {
		for _, d := range []*Difference{r.VsWarm, r.VsDefault} {
			if d != nil {
				p("- %s\n", d.Sentence(r.Label))
			}
		}
	}
	p("\n## Table 4: retrieved documents per α_APS\n\n")
	p("| α_APS | Docs / search (trained agent, test) | Mean APS set (scripted test queries) | APS test coverage |\n")
	p("|---:|---:|---:|---:|\n")
	for _, r := range ab.Table4 {
		docs := r.AgentDocs.String()
		if len(r.AgentDocs.Runs) == 0 {
			docs = "–"
		}
		p("| %g | %s | %s | %s |\n", r.Alpha, docs, r.MeanKept, r.TestCoverage)
	}
	p("\nPaper (Table 4, E5 on wiki-18): 4.8 documents at α = 0.05, 3.4 at 0.2, 2.4 at 0.35.\n")
	return b.String()
}

// perSeed lists per-seed values ("0.312, 0.298, 0.341").
func perSeed(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, ", ")
}

// ParseSeeds reads a seed list: comma-separated unsigned integers and
// inclusive ranges ("1,2,5-7"), at most 1000 seeds, without repeats.
func ParseSeeds(s string) ([]uint64, error) {
	var out []uint64
	seen := map[uint64]bool{}
	add := func(v uint64) error {
		if seen[v] {
			return fmt.Errorf("seed %d repeated", v)
		}
		if len(out) == 1000 {
			return errors.New("more than 1000 seeds")
		}
		seen[v] = true
		out = append(out, v)
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("seeds %q: empty element", s)
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seeds %q: %q is not a seed", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("seeds %q: %q is not a range lo-hi", s, part)
			}
		}
		for v := a; ; v++ {
			if err := add(v); err != nil {
				return nil, fmt.Errorf("seeds %q: %w", s, err)
			}
			if v == b {
				break
			}
		}
	}
	return out, nil
}
