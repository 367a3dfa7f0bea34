package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"

	"github.com/cas-engine/cas/internal/atomicfile"

	"github.com/cas-engine/cas/conformal"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newConformalCmd() *cobra.Command {
	return withSubcommands(&cobra.Command{
		Use:   "conformal",
		Short: "Split-conformal APS (calibrate, truncate) and the ACI controller on JSONL files",
		Long: `Conformal prediction as CAS uses it.

  calibrate-aps  compute the APS threshold q̂ from calibration queries
  aps            truncate each query's candidates with a given q̂
  aci            run the ACI controller over a stream of training steps

Input is JSONL (one object per line; "-" reads stdin); output is JSON on
stdout, or written atomically to --out. Errors name the file and line.`,
	}, newCalibrateAPSCmd(), newAPSCmd(), newACICmd())
}

// applyAPSPreset applies the paper's or the official code's APS settings to
// the flags the user did not set.
func applyAPSPreset(cmd *cobra.Command, preset string, alpha *float64, minDocs *int, quant *string) error {
	var a float64
	var m int
	var q string
	switch preset {
	case "paper":
		a, m, q = conformal.PaperAlpha, conformal.PaperMinDocs, conformal.RuleConformal.String()
	case "code":
		a, m, q = conformal.CodeAlpha, conformal.CodeMinDocs, conformal.CodeQuantile.String()
	default:
		return fmt.Errorf("--preset %q: want paper or code", preset)
	}
	f := cmd.Flags()
	if alpha != nil && !f.Changed("alpha") {
		*alpha = a
	}
	if !f.Changed("min-docs") {
		*minDocs = m
	}
	if quant != nil && !f.Changed("quantile") {
		*quant = q
	}
	return nil
}

func newCalibrateAPSCmd() *cobra.Command {
	var (
		in, out, quant, preset string
		alpha                  float64
		aps                    conformal.APS
		randomized             bool
		seed                   uint64
		candidates             int
	)
	cmd := &cobra.Command{
		Use:   "calibrate-aps --in FILE --alpha A",
		Short: "Compute the APS threshold q̂ from JSONL calibration queries",
		Long: `Compute the APS threshold q̂ from calibration queries.

Each line of FILE is {"scores": [s_1, ..., s_n], "gold": k}: raw retrieval
scores in retrieval order and the 0-based index of the gold document among
them (-1 when it is absent). The calibration score of a query is the
cumulative softmax(s/T) mass of the descending-sorted scores up to and
including the gold document (1 without gold); q̂ is their quantile at 1-α.

The rule is computed in log space: S = −log(1 − c_r) (+Inf without gold),
q̂_S their conformal quantile, k = min{k : −log(1 − c_k) ≥ q̂_S}; this is the
E = c_r rule in exact arithmetic, and stays exact where c_k rounds to 1 in
float64 (BM25-scale scores at T = 0.01).

Prints the calibration (and writes it to --out, the file
"cas conformal aps --calibration" and the trainer read): qhat (E scale, for
people), qhat_log (the log-scale threshold that decides), n, alpha,
calibration_coverage (fraction of queries with S ≤ q̂_S),
calibration_kept_coverage (fraction whose gold is among the documents kept
with --min-docs/--max-docs from the top --candidates), calibration_mean_kept,
calib_candidates, candidates and warnings. qhat_log is "+Inf" when n is too
small for α. Warnings also go to stderr: a threshold that keeps everything,
or a kept-set coverage far below the score coverage.
--candidates M records that searches will keep from M candidates (the
official code calibrates on 20 and keeps from 5; default: as many as the
calibration queries have, which keeps the scores exchangeable).
--preset code selects the official code's α = 0.1, min-docs 2 and the numpy
"higher" quantile (flags given explicitly win).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyAPSPreset(cmd, preset, &alpha, &aps.MinDocs, &quant); err != nil {
				return err
			}
			if !(alpha > 0 && alpha < 1) {
				return fmt.Errorf("--alpha %v outside (0, 1)", alpha)
			}
			rule, err := conformal.ParseQuantileRule(quant)
			if err != nil {
				return fmt.Errorf("--quantile: %w", err)
			}
			if cmd.Flags().Changed("seed") && !randomized {
				return errors.New("--seed is only used with --randomized")
			}
			if err := aps.Validate(); err != nil {
				return err
			}
			queries, err := readInput(cmd, in, func(r io.Reader) ([]conformal.Query, error) {
				return conformal.ReadQueries(r, true)
			})
			if err != nil {
				return err
			}
			var rng *rand.Rand
			if randomized {
				rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
			}
			c, err := aps.Calibrate(queries, alpha, rule, rng)
			if err != nil {
				return fmt.Errorf("calibrate %s: %w", in, err)
			}
			if cmd.Flags().Changed("candidates") {
				if candidates < 1 || candidates > c.CalibCandidates {
					return fmt.Errorf("--candidates %d outside [1, %d] (the calibration queries have up to %d candidates)", candidates, c.CalibCandidates, c.CalibCandidates)
				}
				c.UseCandidates(candidates, queries)
			}
			if randomized {
				c.Seed = &seed
			}
			for _, w := range c.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			b, err := c.Marshal()
			if err != nil {
				return err
			}
			if out != "" && out != "-" {
				if err := c.Save(out); err != nil {
					return err
				}
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&in, "in", "", "JSONL calibration queries ({\"scores\":[...],\"gold\":k} per line; - for stdin)")
	f.StringVar(&out, "out", "", "also write the calibration file here (atomically)")
	f.Float64Var(&alpha, "alpha", conformal.PaperAlpha, "miscoverage level α in (0, 1); target coverage 1-α")
	f.IntVar(&candidates, "candidates", 0, "candidates per search at use time (default: those of the calibration queries; code: 5 of 20)")
	f.StringVar(&quant, "quantile", "conformal", "quantile rule: conformal (⌈(n+1)(1-α)⌉-th smallest), higher (numpy), linear (type 7)")
	f.BoolVar(&randomized, "randomized", false, "use the randomized score c_{r-1} + U·p_r")
	f.Uint64Var(&seed, "seed", 0, "seed for U with --randomized")
	apsFlags(f, &aps, "lower clamp on the kept count (for kept_coverage/mean_k)")
	f.StringVar(&preset, "preset", "paper", "defaults: paper (α=0.2, min-docs 1, conformal) or code (α=0.1, min-docs 2, higher)")
	_ = cmd.MarkFlagRequired("in")
	return cmd
}

func newAPSCmd() *cobra.Command {
	var (
		in, out, preset, calPath string
		qhat                     float64
		aps                      conformal.APS
	)
	cmd := &cobra.Command{
		Use:   "aps (--calibration FILE | --qhat Q) --in FILE",
		Short: "Truncate each JSONL query's candidates with an APS calibration",
		Long: `Truncate each query's candidates with an APS calibration.

Each line of FILE is {"scores": [...]} (a "gold" field, if present, is
ignored). For each line prints {"k": K, "kept": [i_1, ..., i_K]}: K is the
smallest k whose cumulative softmax(s/T) mass c_k of the descending-sorted
scores reaches q̂ (decided in log space, −log(1 − c_k) ≥ q̂_S, so it stays
exact where c_k rounds to 1), clamped to [--min-docs, --max-docs] and to the
candidates; kept are the input indices of the kept documents in descending
score order.

--calibration FILE keeps by a calibration file (from calibrate-aps --out or
"cas calibrate aps --out"): its log-scale threshold, temperature and clamps
(--temperature, --min-docs, --max-docs given explicitly override the file's;
queries with more candidates than the file was calibrated for are reported
on stderr). --qhat Q takes an E-scale threshold instead (+Inf keeps
everything up to --max-docs); one of the two is required.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if err := applyAPSPreset(cmd, preset, nil, &aps.MinDocs, nil); err != nil {
				return err
			}
			var cal conformal.Calibration
			switch {
			case f.Changed("calibration") == f.Changed("qhat"):
				return errors.New("give exactly one of --calibration FILE and --qhat Q")
			case calPath != "":
				var err error
				if cal, err = conformal.LoadCalibration(calPath); err != nil {
					return err
				}
				if f.Changed("temperature") {
					cal.Temperature = aps.Temperature
				}
				if f.Changed("min-docs") || f.Changed("preset") {
					cal.MinDocs = aps.MinDocs
				}
				if f.Changed("max-docs") {
					cal.MaxDocs = aps.MaxDocs
				}
			default:
				if math.IsNaN(qhat) {
					return errors.New("--qhat is NaN")
				}
				cal.APS = aps
				cal.QHat, cal.QHatLog = conformal.JSONFloat(qhat), conformal.JSONFloat(conformal.LogScoreFromE(qhat))
			}
			if err := cal.APS.Validate(); err != nil {
				return err
			}
			queries, err := readInput(cmd, in, func(r io.Reader) ([]conformal.Query, error) {
				return conformal.ReadQueries(r, false)
			})
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			mismatch := 0
			for _, q := range queries {
				if cal.Candidates > 0 && len(q.Scores) > cal.Candidates {
					mismatch++
				}
				kept := cal.KeepIndices(q.Scores)
				if err := enc.Encode(struct {
					K    int   `json:"k"`
					Kept []int `json:"kept"`
				}{len(kept), kept}); err != nil {
					return err
				}
			}
			if mismatch > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d of %d queries have more than the %d candidates %s was calibrated for (keep from the top %[3]d)\n",
					mismatch, len(queries), cal.Candidates, calPath)
			}
			return writeOutput(cmd, out, buf.Bytes())
		},
	}
	f := cmd.Flags()
	f.StringVar(&in, "in", "", "JSONL queries ({\"scores\":[...]} per line; - for stdin)")
	f.StringVar(&out, "out", "", "write the JSONL result here (atomically) instead of stdout")
	f.StringVar(&calPath, "calibration", "", "APS calibration file (calibrate-aps --out) to keep by")
	f.Float64Var(&qhat, "qhat", 0, "E-scale APS threshold q̂ instead of --calibration")
	apsFlags(f, &aps, "lower clamp on the kept count")
	f.StringVar(&preset, "preset", "paper", "defaults: paper (min-docs 1) or code (min-docs 2)")
	_ = cmd.MarkFlagRequired("in")
	return cmd
}

func newACICmd() *cobra.Command {
	var (
		in, out, ruleName, quant, bootstrap, loadState, saveState, windowUnit string
		cfg                                                                   = conformal.DefaultACIConfig()
	)
	cmd := &cobra.Command{
		Use:   "aci --in FILE",
		Short: "Run the ACI controller over JSONL training steps; print α_t, q_t, err_t, weights",
		Long: `Run the ACI controller over a stream of training steps.

Each line of FILE is one step, {"scores": [s_1, ..., s_B]}: the non-conformity
scores (answer-span NLL) of all trajectories of the batch. For each step prints
{"t", "alpha", "qhat", "err", "weights", "alpha_next"}: q_t = quantile(window,
1-α_t) computed before any update, err_t = fraction of scores above q_t,
weights ω_i = 1 if s_i ≤ q_t else η, and α_{t+1}. qhat is "+Inf"/"-Inf" when
infinite (e.g. an empty window).

Rules: plain (paper Eq. 4), smoothed (paper Eq. 7, default), ema (official
code; α clipped to [0.01, 0.99]). The quantile defaults to conformal, or to
linear for ema. The window holds the scores of the last --window iterations
(paper §3.3, the default) or the last --window scores (--window-unit scores,
the official code's deque; the default for ema). --bootstrap FILE (same
format, all lines concatenated) preloads the window. --save-state writes the controller's JSON state after the last
step; --load-state resumes from one (its config is used; config flags are
then refused).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			steps, err := readInput(cmd, in, conformal.ReadScoreLines)
			if err != nil {
				return err
			}
			var ctl *conformal.ACI
			if loadState != "" {
				for _, name := range []string{"rho", "gamma", "eta", "window", "window-unit", "rule", "quantile", "alpha1", "decay", "bootstrap"} {
					if f.Changed(name) {
						return fmt.Errorf("--%s conflicts with --load-state (the state holds the config)", name)
					}
				}
				b, err := os.ReadFile(loadState)
				if err != nil {
					return fmt.Errorf("load state: %w", err)
				}
				ctl = new(conformal.ACI)
				if err := ctl.UnmarshalJSON(b); err != nil {
					return fmt.Errorf("load state %s: %w", loadState, err)
				}
			} else {
				if cfg.Rule, err = conformal.ParseACIRule(ruleName); err != nil {
					return fmt.Errorf("--rule: %w", err)
				}
				cfg.Quantile, cfg.WindowUnit = conformal.RuleConformal, conformal.WindowIterations
				if cfg.Rule == conformal.RuleEMA {
					cfg.Quantile, cfg.WindowUnit = conformal.RuleLinear, conformal.WindowScores
				}
				if f.Changed("window-unit") {
					if cfg.WindowUnit, err = conformal.ParseACIWindow(windowUnit); err != nil {
						return fmt.Errorf("--window-unit: %w", err)
					}
				}
				if f.Changed("quantile") {
					if cfg.Quantile, err = conformal.ParseQuantileRule(quant); err != nil {
						return fmt.Errorf("--quantile: %w", err)
					}
				}
				if f.Changed("alpha1") && !(cfg.Alpha1 > 0 && cfg.Alpha1 < 1) {
					return fmt.Errorf("--alpha1 %v outside (0, 1)", cfg.Alpha1)
				}
				var boot []float64
				if bootstrap != "" {
					lines, err := readInput(cmd, bootstrap, conformal.ReadScoreLines)
					if err != nil {
						return err
					}
					for _, l := range lines {
						boot = append(boot, l...)
					}
				}
				if ctl, err = conformal.NewACI(cfg, boot); err != nil {
					return err
				}
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			for i, s := range steps {
				st, err := ctl.Step(s)
				if err != nil {
					return fmt.Errorf("%s: step %d: %w", in, i+1, err)
				}
				if err := enc.Encode(st); err != nil {
					return err
				}
			}
			if saveState != "" {
				state, err := ctl.MarshalJSON()
				if err != nil {
					return err
				}
				if err := atomicfile.WriteFile(saveState, append(state, '\n')); err != nil {
					return err
				}
			}
			return writeOutput(cmd, out, buf.Bytes())
		},
	}
	f := cmd.Flags()
	f.StringVar(&in, "in", "", "JSONL steps ({\"scores\":[...]} per line; - for stdin)")
	f.StringVar(&out, "out", "", "write the JSONL result here (atomically) instead of stdout")
	f.Float64Var(&cfg.Rho, "rho", conformal.DefaultRho, "target error rate ρ in (0, 1)")
	f.Float64Var(&cfg.Gamma, "gamma", conformal.DefaultGamma, "step size γ > 0")
	f.Float64Var(&cfg.Eta, "eta", conformal.DefaultEta, "weight η in [0, 1] of trajectories above q_t")
	f.IntVar(&cfg.Window, "window", conformal.DefaultWindow, "rolling window of past iterations (or scores, see --window-unit)")
	f.StringVar(&windowUnit, "window-unit", "iterations", "what --window counts: iterations (paper) or scores (official code; default for ema)")
	f.Float64Var(&cfg.Decay, "decay", conformal.DefaultDecay, "λ of the smoothed and ema rules")
	f.Float64Var(&cfg.Alpha1, "alpha1", 0, "initial α₁ (default ρ)")
	f.StringVar(&ruleName, "rule", "smoothed", "update rule: plain (Eq. 4), smoothed (Eq. 7), ema (official code)")
	f.StringVar(&quant, "quantile", "conformal", "quantile rule for q_t: conformal, higher, linear (default linear for ema)")
	f.StringVar(&bootstrap, "bootstrap", "", "JSONL bootstrap scores preloading the window (same format as --in)")
	f.StringVar(&loadState, "load-state", "", "resume from a controller state written by --save-state")
	f.StringVar(&saveState, "save-state", "", "write the controller state (JSON) after the last step")
	_ = cmd.MarkFlagRequired("in")
	return cmd
}

// readInput opens path ("-" = the command's stdin) and parses it, naming the
// file in errors.
func readInput[T any](cmd *cobra.Command, path string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	r := cmd.InOrStdin()
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return zero, fmt.Errorf("read input: %w", err)
		}
		defer f.Close()
		r = f
	}
	v, err := parse(r)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// writeOutput writes data to the command's stdout, or atomically to path.
func writeOutput(cmd *cobra.Command, path string, data []byte) error {
	if path == "" || path == "-" {
		_, err := cmd.OutOrStdout().Write(data)
		return err
	}
	return atomicfile.WriteFile(path, data)
}

// apsFlags registers --temperature, --min-docs (described by minDocsUsage)
// and --max-docs into aps.
func apsFlags(f *pflag.FlagSet, aps *conformal.APS, minDocsUsage string) {
	f.Float64Var(&aps.Temperature, "temperature", conformal.DefaultTemperature, "softmax temperature T")
	f.IntVar(&aps.MinDocs, "min-docs", conformal.PaperMinDocs, minDocsUsage)
	f.IntVar(&aps.MaxDocs, "max-docs", conformal.PaperMaxDocs, "upper clamp on the kept count (0 = none)")
}
