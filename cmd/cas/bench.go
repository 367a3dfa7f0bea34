package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cas-engine/cas/bench"
	"github.com/spf13/cobra"
)

// newBenchCmd is `cas bench`: side-by-side measurements against peer
// implementations, one subcommand per subsystem.
func newBenchCmd() *cobra.Command {
	return commandGroup("bench", "Benchmarks against peer implementations, measured in the same run",
		newBenchIndexCmd(), newBenchServeCmd(), newBenchCPUCmd(), newBenchGPUCmd(), newBenchScaleCmd())
}

func newBenchIndexCmd() *cobra.Command {
	var (
		opt         bench.IndexOptions
		memRows     int
		memChild    bool
		skipCompare bool
	)
	cmd := &cobra.Command{
		Use:   "index --data DIR [--faiss-json FILE] [--memory-rows 1000000]",
		Short: "Flat and IVF index speed, recall and memory against FAISS on the same vectors",
		Long: `Measure the cas vector index on the files of ` + "`faiss_peer.py gen DIR`" + `
(base.f32, query.f32, gt_top10.i32) at each --threads count, and FAISS on the
same data: from --faiss-json (saved ` + "`faiss_peer.py run`" + ` output) or by running
--faiss-script with /usr/bin/python3 when it has faiss. Prints Markdown tables
with the ratios (the README's performance section), then the peak resident
memory of building and searching a --memory-rows × 768 F16 flat index,
measured in a child process.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if memChild {
				r, err := bench.MemoryCheck(memRows, opt.Dim)
				if err != nil {
					return err
				}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			opt.Log = progressOut(cmd.ErrOrStderr())
			out := cmd.OutOrStdout()
			if !skipCompare {
				if opt.DataDir == "" {
					return errors.New("bench index: --data DIR is required (make one with faiss_peer.py gen DIR)")
				}
				rep, err := bench.RunIndex(opt)
				if err != nil {
					return err
				}
				rep.WriteMarkdown(out)
			}
			if memRows > 0 {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				fmt.Fprintf(opt.Log, "memory: %d × %d F16 flat in a child process\n", memRows, opt.Dim)
				m, err := bench.RunMemoryChild(exe, []string{"bench", "index", "--memory-child",
					"--memory-rows", fmt.Sprint(memRows), "--dim", fmt.Sprint(opt.Dim)}, opt.Log)
				if err != nil {
					return err
				}
				m.WriteMarkdown(out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opt.DataDir, "data", "", "directory written by faiss_peer.py gen")
	f.IntVar(&opt.Dim, "dim", 768, "vector dimension")
	f.IntVar(&opt.NList, "nlist", 1024, "IVF lists")
	f.IntSliceVar(&opt.NProbes, "nprobe", []int{1, 8, 32, 64}, "IVF nprobe values")
	f.IntSliceVar(&opt.Threads, "threads", nil, "thread counts (default: 1 and all cores)")
	f.IntVar(&opt.SingleQueries, "single-queries", 200, "queries timed one at a time")
	f.StringVar(&opt.FAISSJSON, "faiss-json", "", "saved output of faiss_peer.py run (skips running FAISS)")
	defScript := sharedDefault("bench", "faiss_peer.py")
	if defScript == "" {
		defScript = filepath.Join("..", "shared", "bench", "faiss_peer.py")
	}
	f.StringVar(&opt.FAISSScript, "faiss-script", defScript, "faiss_peer.py, run when --faiss-json is not given")
	f.StringVar(&opt.Python, "python", bench.DefaultPython, "Python with faiss for --faiss-script")
	f.IntVar(&memRows, "memory-rows", 1_000_000, "rows of the F16 memory check (0: skip)")
	f.BoolVar(&skipCompare, "memory-only", false, "run only the memory check")
	f.BoolVar(&memChild, "memory-child", false, "internal: run the memory check in this process and print JSON")
	f.MarkHidden("memory-child")
	return cmd
}
