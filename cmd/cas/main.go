// Command cas is the single binary of the CAS engine (Conformalized Agentic
// Search): conformal prediction, tokenizers, Qwen/E5 models, vector and BM25
// retrieval, the search agent, and the GRPO+ACI trainer. Subcommands are thin;
// the logic lives in the packages.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	return withSubcommands(&cobra.Command{
		Use:           "cas",
		Short:         "Conformalized Agentic Search in one Go binary",
		Long:          "cas: Conformalized Agentic Search in one Go binary.\n\n" + flagVocabulary,
		SilenceUsage:  true,
		SilenceErrors: true,
	},
		newConformalCmd(),
		newDemoCmd(),
		newEmbedCmd(),
		newWorldCmd(),
		newServeCmd(),
		newCalibrateCmd(),
		newLogitsCmd(),
		newGenerateCmd(),
		newTokenizeCmd(),
		newIndexCmd(),
		newBenchCmd(),
		newEvalCmd(),
		newTrainCmd(),
		newPlotCmd(),
		newAblateCmd(),
		newVersionCmd(),
	)
}

// withSubcommands adds subs to the command group cmd and returns it: the
// root, `cas conformal` and each commandGroup.
func withSubcommands(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	cmd.AddCommand(subs...)
	return cmd
}

// commandGroup is a command that only groups subs (`cas bench`,
// `calibrate`, `index`): running it prints its help.
func commandGroup(use, short string, subs ...*cobra.Command) *cobra.Command {
	return withSubcommands(&cobra.Command{Use: use, Short: short}, subs...)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of cas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "cas", version)
			return err
		},
	}
}

const version = "0.1.0-dev"

func main() {
	var prof cpuProfile
	root := newRootCmd()
	prof.attach(root)
	err := root.Execute()
	if perr := prof.stop(); err == nil {
		err = perr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cas:", err)
		os.Exit(exitCode(err))
	}
}
