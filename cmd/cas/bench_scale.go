package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cas-engine/cas/bench"
	"github.com/cas-engine/cas/internal/vectest"
	"github.com/spf13/cobra"
)

// parseCount reads a row count such as 100k, 2M or 1500000.
func parseCount(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	switch {
	case strings.HasSuffix(t, "k") || strings.HasSuffix(t, "K"):
		mult, t = 1000, t[:len(t)-1]
	case strings.HasSuffix(t, "M") || strings.HasSuffix(t, "m"):
		mult, t = 1_000_000, t[:len(t)-1]
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || v*float64(mult) != float64(int(v*float64(mult))) {
		return 0, fmt.Errorf("--sizes: %q is not a row count (e.g. 100k, 2M)", s)
	}
	return int(v * float64(mult)), nil
}

// newBenchScaleCmd is `cas bench scale`: the vector index's cost growth
// with N and its projection to wiki-18's 21M passages.
func newBenchScaleCmd() *cobra.Command {
	var (
		opt           bench.ScaleOptions
		sizes         []string
		child, setDir string
		ramGiB        float64
	)
	cmd := &cobra.Command{
		Use:   "scale [--sizes 1M,2M,4M,8M] [--work DIR]",
		Short: "Cost growth of each vector index configuration with N, projected to 21M",
		Long: `For each --sizes N, write a synthetic set of N × --dim unit vectors (--gen
e5mix: fitted to real E5 passage vectors; lowrank: the rank --rank Gaussian of
earlier runs) as a FAISS IndexFlatIP file with a matching corpus JSONL
(streamed, bounded memory), then for each configuration — flat-f32 (the FAISS file in place),
flat-f16, flat-sq8, ivf-sq8, ivfpq-rerank — build it the way ` + "`cas index import`" + `
does (search/vector's streamed conversion; the encoder plays no part in a
vectors-only measurement) in a child process of this binary, and measure the
build time, the peak resident memory of building and of serving, single-query
latency, batch q/s and recall@10 against exact search. Prints the Markdown
table, a projection of every figure to 21M from least-squares fits, and
whether each configuration fits a 24 GB / 2-core and a 64 GB / 32-core
machine, with the retrieval time of a GRPO step (512 prompts × 5 searches).
--nprobe and --rerank take lists (a sweep over one built index, one row
each); --pq a list of code sizes (one IVF-PQ build each). A flat index larger
than the available memory is timed on one query read from disk, without its
batch and recall. The sets need N·d·4 bytes of disk each; they are removed
after their size unless --keep, and each configuration's files as soon as it
is measured.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opt.RAMBytes = int64(ramGiB * (1 << 30))
			if child != "" {
				rows, err := bench.ScaleChild(ctx, setDir, child, opt)
				if err != nil {
					return err
				}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rows)
			}
			if !slices.Contains(vectest.Gens, opt.Gen) {
				return fmt.Errorf("--gen: unknown generator %q (want %s)", opt.Gen, strings.Join(vectest.Gens, " or "))
			}
			for name, l := range map[string][]int{"--nprobe": opt.NProbes, "--pq": opt.PQs, "--rerank": opt.Reranks} {
				for _, v := range l {
					if v <= 0 {
						return fmt.Errorf("%s: %d is not a positive count", name, v)
					}
				}
			}
			for _, m := range opt.PQs {
				if opt.Dim%m != 0 {
					return fmt.Errorf("--pq: %d does not divide --dim %d", m, opt.Dim)
				}
			}
			for _, s := range sizes {
				for _, part := range strings.Split(s, ",") {
					n, err := parseCount(part)
					if err != nil {
						return err
					}
					opt.Sizes = append(opt.Sizes, n)
				}
			}
			for _, c := range opt.Configs {
				if !slices.Contains(bench.ScaleConfigs, c) {
					return fmt.Errorf("--configs: unknown configuration %q (want %s)", c, strings.Join(bench.ScaleConfigs, ", "))
				}
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			work := opt.WorkDir
			if work == "" {
				if work, err = os.MkdirTemp(".", "cas-scale-"); err != nil {
					return err
				}
				if !opt.Keep {
					defer os.RemoveAll(work)
				}
			}
			opt.WorkDir, opt.Exe, opt.Log = work, exe, progressOut(cmd.ErrOrStderr())
			opt.ChildArgs = []string{"bench", "scale", "--dim", fmt.Sprint(opt.Dim),
				"--threads", fmt.Sprint(opt.Threads), "--nlist", fmt.Sprint(opt.NList), "--nprobe", intList(opt.NProbes),
				"--rerank", intList(opt.Reranks), "--ram-gib", fmt.Sprint(ramGiB),
				"--recall-queries", fmt.Sprint(opt.Recall), "--batch", fmt.Sprint(opt.Batch)}
			rep, err := bench.RunScale(ctx, opt)
			if err != nil {
				return err
			}
			rep.WriteMarkdown(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&sizes, "sizes", []string{"1M", "2M", "4M", "8M"}, "row counts (k and M suffixes)")
	f.IntVar(&opt.Dim, "dim", 768, "vector dimension")
	f.StringVar(&opt.Gen, "gen", vectest.GenE5Mix, "synthetic vectors: e5mix (fitted to real E5 passage vectors) or lowrank (rank --rank Gaussian, no clusters)")
	f.IntVar(&opt.Rank, "rank", 64, "latent rank of the lowrank generator")
	f.IntVar(&opt.Recall, "recall-queries", 200, "queries for recall@10 and single-query latency")
	f.IntVar(&opt.Batch, "batch", bench.GRPOStepQueries, "queries in the timed batch (default: one GRPO step, 512 × 5)")
	f.IntVar(&opt.Threads, "threads", 0, "search and conversion threads (0: all cores)")
	f.IntVar(&opt.NList, "nlist", 0, "IVF lists (0: √N rounded to a power of two)")
	f.IntSliceVar(&opt.NProbes, "nprobe", []int{bench.ScaleNProbe}, "IVF lists searched per query (a list sweeps them on one build)")
	f.IntSliceVar(&opt.PQs, "pq", []int{bench.ScalePQ}, "IVF-PQ bytes per vector, dividing --dim (a list builds each)")
	f.IntSliceVar(&opt.Reranks, "rerank", []int{bench.ScaleRerank}, "IVF-PQ candidates re-ranked exactly (a list sweeps them on one build)")
	f.Float64Var(&ramGiB, "ram-gib", 0, "memory a flat index must fit in to be searched in full (0: MemAvailable)")
	f.StringSliceVar(&opt.Configs, "configs", nil, "configurations (default all: "+strings.Join(bench.ScaleConfigs, ",")+")")
	f.StringVar(&opt.WorkDir, "work", "", "folder for the sets (default: a new cas-scale-* folder here, removed at the end)")
	f.BoolVar(&opt.Keep, "keep", false, "keep the sets and the work folder")
	f.StringVar(&child, "scale-child", "", "internal: build and measure one configuration, print JSON")
	f.StringVar(&setDir, "scale-set", "", "internal: the set folder of --scale-child")
	f.MarkHidden("scale-child")
	f.MarkHidden("scale-set")
	return cmd
}

// intList writes a list flag's value (1,2,3).
func intList(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
