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
)

// AblationFile and AblationJSON are the tables Ablate writes.
const (
	AblationFile = "ablation.md"
	AblationJSON = "ablation.json"
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
		ab.Table3 = append(ab.Table3, AblationRow{Name: n, Label: Label(n), Retrieval: es[0].Retrieval,
			EMSingle: col(func(e EvalResult) float64 { return e.EMSingle }), EMTwoHop: col(func(e EvalResult) float64 { return e.EMTwoHop }),
			EM: col(func(e EvalResult) float64 { return e.EM }), SearchCalls: col(func(e EvalResult) float64 { return e.SearchCalls }),
			Docs: col(func(e EvalResult) float64 { return e.DocsPerSearch })})
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
	p("| Method | Retrieval | Single-hop | Two-hop | Overall | Searches / question | Docs / search |\n")
	p("|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range ab.Table3 {
		p("| %s | %s | %s | %s | %s | %s | %s |\n", r.Label, r.Retrieval, r.EMSingle, r.EMTwoHop, r.EM, r.SearchCalls, r.Docs)
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
