package main

import (
	"github.com/cas-engine/cas/conformal"
	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	var seed uint64
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the most complete end-to-end path that exists (now: the conformal walkthrough)",
		Long: `Run the demo. Until the full search-agent demo lands this is the conformal
walkthrough: APS calibrated on simulated retrieval scores, with its coverage
and kept-passage counts on fresh queries (paper and official-code settings
against fixed top-k), then ACI tracking the target error rate ρ on a drifting
simulated training stream (plain, smoothed and EMA rules against a fixed α).
Deterministic for a seed; a few seconds on one core.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return conformal.Walkthrough(cmd.OutOrStdout(), conformal.WalkthroughConfig{Seed: seed})
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 0, "random seed of the simulation")
	return cmd
}
