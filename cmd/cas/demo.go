package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/demo"
)

func newDemoCmd() *cobra.Command {
	var (
		seed          uint64
		quick         bool
		conformalOnly bool
		out           string
		memLimit      int
	)
	cmd := &cobra.Command{
		Use:   "demo [--quick] [--out DIR] [--seed S]",
		Short: "Train a tiny Qwen search agent with CAS on a synthetic world, with baselines and plots",
		Long: `Run CAS end to end on 2 CPU cores: generate a synthetic encyclopedia and
its questions, build a BM25 index, calibrate APS on retrieval, warm-start a
tiny Qwen3 on scripted search trajectories, bootstrap ACI and train with GRPO
(CAS and −ACI; --quick adds −APS), evaluate on questions about unseen entities next to a
no-retrieval baseline, and write report.md, result.json and PNG plots.

About 6 minutes on two cores, more on a busy machine (--quick: 2–5). Ctrl-C
leaves a resumable run: the same command continues where it stopped (exit
130). --conformal-only runs the earlier conformal walkthrough instead (APS
and ACI on simulated scores, seconds).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if conformalOnly {
				return conformal.Walkthrough(cmd.OutOrStdout(), conformal.WalkthroughConfig{Seed: seed})
			}
			var cfg demo.Config
			cfg, out = demoSetup(seed, quick, out, "demo")
			applyMemoryLimit(memLimit)
			in := newInterruptible(cmd.Context())
			defer in.stop()
			res, err := demo.Run(in.ctx, cfg, out, demo.Options{Progress: progressOut(os.Stderr), Log: cmd.ErrOrStderr()})
			if err != nil {
				return in.interrupted(err, "the demo", sameCommand())
			}
			return printDemoSummary(cmd.OutOrStdout(), res, out)
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed of the world, the policy and the training")
	addMemoryLimitFlag(cmd, &memLimit)
	cmd.Flags().BoolVar(&quick, "quick", false, "a shorter warm start and GRPO, fewer test questions (the end-to-end test)")
	cmd.Flags().StringVar(&out, "out", "", "run folder (default runs/demo, or runs/demo-quick with --quick)")
	cmd.Flags().BoolVar(&conformalOnly, "conformal-only", false, "run only the conformal walkthrough on simulated scores")
	return cmd
}

// printDemoSummary prints the test table of a finished run.
func printDemoSummary(w io.Writer, res *demo.Result, out string) error {
	if _, err := fmt.Fprintf(w, "%-30s %-12s %9s %9s %9s %9s %9s\n", "policy", "retrieval", "EM 1-hop", "EM 2-hop", "EM", "searches", "docs"); err != nil {
		return err
	}
	for _, e := range res.Evals {
		if _, err := fmt.Fprintf(w, "%-30s %-12s %9.3f %9.3f %9.3f %9.2f %9.2f\n", demo.Label(e.Name), e.Retrieval,
			e.EMSingle, e.EMTwoHop, e.EM, e.SearchCalls, e.DocsPerSearch); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "report: %s/%s (%.0f s)\n", out, demo.ReportFile, res.Wall)
	return err
}

// addMemoryLimitFlag adds --memory-limit (see demo.DefaultMemoryLimitMiB).
func addMemoryLimitFlag(cmd *cobra.Command, mib *int) {
	cmd.Flags().IntVar(mib, "memory-limit", demo.DefaultMemoryLimitMiB,
		"soft Go heap limit in MiB (runtime/debug.SetMemoryLimit; 0: none; the GOMEMLIMIT variable takes precedence)")
}

// applyMemoryLimit sets the process's soft heap limit to mib MiB unless it
// is 0 or GOMEMLIMIT is set.
func applyMemoryLimit(mib int) {
	if mib > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(mib) << 20)
	}
}

// demoSetup returns the demo's configuration for seed (the quick preset
// with --quick) and its output folder: out when given, else runs/NAME
// (runs/NAME-quick with --quick). `cas demo` and `cas ablate` share it.
func demoSetup(seed uint64, quick bool, out, name string) (demo.Config, string) {
	cfg := demo.DefaultConfig(seed)
	if quick {
		cfg = demo.QuickConfig(seed)
	}
	if out == "" {
		out = "runs/" + name
		if quick {
			out += "-quick"
		}
	}
	return cfg, out
}
