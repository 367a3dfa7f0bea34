package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cas-engine/cas/train"
)

func newPlotCmd() *cobra.Command {
	var (
		out    string
		smooth int
	)
	cmd := &cobra.Command{
		Use:   "plot RUN_DIR... [--out DIR] [--smooth N]",
		Short: "Draw the paper's Figure 2 and the reward/EM curves of training runs",
		Long: `Plot reads the metrics.jsonl of each run folder and writes PNGs with the
runs overlaid: figure2.png (the paper's Figure 2: search calls per
trajectory, the low-confidence ratio and the ACI level α_t against training
steps) and reward_em.png (mean reward, exact match and documents per search).
--smooth N draws a trailing moving average over N steps. The default output
folder is RUN_DIR/plots of the first run.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := train.LoadPlotRuns(args...)
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join(args[0], "plots")
			}
			files, err := train.WritePlots(runs, out, smooth)
			if err != nil {
				return err
			}
			for _, f := range files {
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), f); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output folder (default: <first run>/plots)")
	cmd.Flags().IntVar(&smooth, "smooth", 1, "moving-average window in steps (1: raw)")
	return cmd
}
