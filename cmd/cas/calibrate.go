package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/cas-engine/cas/calibrate"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/qa"
	"github.com/spf13/cobra"
)

func newCalibrateCmd() *cobra.Command {
	return commandGroup("calibrate", "Calibrate conformal thresholds on real retrieval", newCalibrateAPSRetrievalCmd())
}

func newCalibrateAPSRetrievalCmd() *cobra.Command {
	var (
		qaPath, dir, server, out, quant, preset string
		cfg                                     = calibrate.DefaultConfig()
		dense                                   denseFlags
		noProgress                              bool
		candidates, calCandidates               int
	)
	cmd := &cobra.Command{
		Use:   "aps --qa FILE (--index DIR | --retriever URL) [--candidates 5 --alpha 0.2 --n 150 --seed 0] [--out qhat.json]",
		Short: "Calibrate APS's threshold q̂ on real retrieval for a QA file",
		Long: `Calibrate APS on real retrieval.

Draws --n questions of a FlashRAG/Search-R1 QA file ({"id", "question",
"golden_answers"}) at random (--seed) for calibration and evaluates on the
others (--test of them; 0: all, which retrieves the whole file). For every question it retrieves --candidates
passages (from an index folder, or from a running Search-R1-compatible
server with --retriever) and labels the gold passage: the first candidate whose
lowercased, whitespace-collapsed contents contain a gold answer (the
official code's fallback without an LLM judge). The calibration score is
E = c_r, the cumulative softmax(s/T) mass of the sorted candidate scores up
to the gold's rank r (1 without a retrieved gold); q̂ is their (1 − α)
quantile.

Reports on the held-out questions: coverage (fraction with E ≤ q̂, the
quantity the conformal guarantee is about), coverage_kept (gold inside the
kept, clamped set, among questions whose gold was retrieved), mean_kept and
its histogram, and the same for a fixed top-k (--fixed-k 3). The JSON
carries qhat ("+Inf" when n is too small for α), n, alpha, coverage,
coverage_kept, mean_kept and the settings; a summary table goes to stderr.

The rule is decided in log space (S = −log(1 − c_r), threshold qhat_log;
qhat = 1 − e^−qhat_log is shown), so it stays exact where c_r rounds to 1 in
float64: the paper's T = 0.01 works on BM25 scores as on E5 cosines.
Searches keep from their top --candidates; calibration retrieves the same
number unless --calibration-candidates says otherwise (the same count makes
calibration and use scores exchangeable; the official code calibrates on 20
and keeps from 5: --calibration-candidates 20 --candidates 5, or --preset
code). The file
records both, and the trainer refuses a file made for another candidate
count. Warnings (stderr and the "warnings" field): a threshold that keeps
everything, a kept-set coverage far below the score coverage.

--gold-only keeps only questions whose gold was retrieved (coverage
conditional on retrieval success).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyRetrievalAPSPreset(cmd, preset, &cfg, &quant, candidates, calCandidates); err != nil {
				return err
			}
			rule, err := conformal.ParseQuantileRule(quant)
			if err != nil {
				return fmt.Errorf("--quantile: %w", err)
			}
			cfg.Rule = rule
			if err := cfg.Validate(); err != nil {
				return err
			}
			if (dir == "") == (server == "") {
				return errors.New("give exactly one of --index DIR and --retriever URL")
			}
			qs, err := qa.Load(qaPath)
			if err != nil {
				return err
			}
			r, source, closeR, err := openRetrieval(server, dir, dense)
			if err != nil {
				return err
			}
			defer closeR()
			var progress io.Writer
			if !noProgress {
				progress = progressOut(cmd.ErrOrStderr())
			}
			rep, err := calibrate.Run(cmd.Context(), r, qs, calibrate.ContainsJudge{}, cfg, progress)
			if err != nil {
				return fmt.Errorf("calibrate on %s: %w", qaPath, err)
			}
			rep.QA, rep.Index = qaPath, source
			writeCalibrationSummary(cmd.ErrOrStderr(), rep)
			if out == "" || out == "-" {
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(append(b, '\n'))
				return err
			}
			return conformal.SaveReport(out, rep)
		},
	}
	f := cmd.Flags()
	f.StringVar(&qaPath, "qa", "", "QA JSONL file ({\"id\",\"question\",\"golden_answers\"} per line)")
	f.StringVar(&dir, "index", "", "index folder to retrieve from")
	f.StringVar(&server, "retriever", "", "retrieve from this Search-R1-compatible server instead (e.g. http://127.0.0.1:8000)")
	f.StringVar(&out, "out", "", "write the JSON report here (atomically; default stdout)")
	f.IntVar(&candidates, "candidates", cfg.TopK, "passages retrieved per search at use time, which APS keeps from; calibration retrieves as many unless --calibration-candidates")
	f.IntVar(&calCandidates, "calibration-candidates", 0, "candidates retrieved per calibration question (0: --candidates, exchangeable; code: 20)")
	f.Float64Var(&cfg.Alpha, "alpha", cfg.Alpha, "miscoverage level α in (0, 1)")
	f.IntVar(&cfg.N, "n", cfg.N, "calibration questions")
	f.IntVar(&cfg.Test, "test", 0, "held-out questions (0: all the others)")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed of the question draw (and of U with --randomized)")
	f.Float64Var(&cfg.APS.Temperature, "temperature", cfg.APS.Temperature, "softmax temperature T")
	f.IntVar(&cfg.APS.MinDocs, "min-docs", cfg.APS.MinDocs, "lower clamp on the kept count")
	f.IntVar(&cfg.APS.MaxDocs, "max-docs", cfg.APS.MaxDocs, "upper clamp on the kept count (0 = none)")
	f.StringVar(&quant, "quantile", "conformal", "quantile rule: conformal (⌈(n+1)(1-α)⌉-th smallest), higher (numpy), linear")
	f.StringVar(&preset, "preset", "paper", "defaults: paper (α=0.2, min-docs 1, conformal) or code (α=0.1, min-docs 2, higher, --calibration-candidates 20 --candidates 5)")
	f.BoolVar(&cfg.Randomized, "randomized", false, "use the randomized score c_{r-1} + U·p_r")
	f.BoolVar(&cfg.GoldOnly, "gold-only", false, "keep only questions whose gold passage was retrieved")
	f.IntVar(&cfg.FixedK, "fixed-k", cfg.FixedK, "the fixed top-k baseline")
	f.BoolVar(&noProgress, "no-progress", false, "hide the progress bar")
	dense.register(cmd)
	dense.registerCorpus(cmd)
	aliasFlag(cmd, "server", "retriever")
	aliasFlag(cmd, "topk", "candidates")
	_ = cmd.MarkFlagRequired("qa")
	return cmd
}

// applyRetrievalAPSPreset fills α, min-docs and the quantile rule from a
// preset unless given explicitly.
// candidates and calCandidates are the flags' values: passages per search
// at use time, and per calibration question (0: the same).
func applyRetrievalAPSPreset(cmd *cobra.Command, preset string, cfg *calibrate.Config, quant *string, candidates, calCandidates int) error {
	var alpha float64
	var minDocs int
	var rule string
	f := cmd.Flags()
	switch preset {
	case "paper":
		alpha, minDocs, rule = conformal.PaperAlpha, conformal.PaperMinDocs, conformal.RuleConformal.String()
	case "code":
		alpha, minDocs, rule = conformal.CodeAlpha, conformal.CodeMinDocs, conformal.CodeQuantile.String()
		if !f.Changed("candidates") {
			candidates = 5 // keep from 5 …
		}
		if !f.Changed("calibration-candidates") {
			calCandidates = 20 // … calibrated on 20
		}
	default:
		return fmt.Errorf("--preset %q: want paper or code", preset)
	}
	if candidates < 1 {
		return fmt.Errorf("--candidates %d: want ≥ 1", candidates)
	}
	cfg.TopK, cfg.Candidates = candidates, candidates
	if calCandidates > 0 {
		if calCandidates < candidates {
			return fmt.Errorf("--calibration-candidates %d < --candidates %d: calibration must see at least the candidates a search keeps from", calCandidates, candidates)
		}
		cfg.TopK = calCandidates
	}
	if !f.Changed("alpha") {
		cfg.Alpha = alpha
	}
	if !f.Changed("min-docs") {
		cfg.APS.MinDocs = minDocs
	}
	if !f.Changed("quantile") {
		*quant = rule
	}
	return nil
}

func writeCalibrationSummary(w io.Writer, r calibrate.Report) {
	fmt.Fprintf(w, "q̂ = %v (log scale %v) from n = %d (α = %v, %s quantile, T = %v, top-%d candidates, kept from %d; gold retrieved for %d/%d)\n",
		float64(r.QHat), float64(r.QHatLog), r.N, r.Alpha, r.Rule, r.Temperature, r.TopK, r.Candidates, r.CalGold, r.N)
	for _, s := range r.Warnings {
		fmt.Fprintln(w, "warning:", s)
	}
	fmt.Fprintf(w, "held-out: %d questions, gold retrieved for %d\n", r.Test, r.TestGold)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tcoverage\tcoverage_kept\tgold_kept\tmean_kept\thistogram (k=0,1,…)\t")
	a := r.SetStats
	fmt.Fprintf(tw, "APS\t%.3f\t%.3f\t%.3f\t%.2f\t%v\t\n", a.Coverage, a.CoverageKept, a.GoldKept, a.MeanKept, a.Histogram)
	fmt.Fprintf(tw, "top-%d\t%.3f\t%.3f\t%.3f\t%.2f\t%v\t\n", r.Fixed.K, r.Fixed.Coverage, r.Fixed.CoverageKept, r.Fixed.GoldKept, r.Fixed.MeanKept, r.Fixed.Histogram)
	tw.Flush()
}
