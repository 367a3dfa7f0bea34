package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/cas-engine/cas/bench"
	"github.com/cas-engine/cas/bench/cpubench"
	"github.com/cas-engine/cas/internal/atomicfile"
)

// newBenchCPUCmd is `cas bench cpu`: GEMM throughput against the FMA peak,
// and Qwen forward / training-step / decode speed on the gocpu and pure-Go
// backends next to PyTorch on the same threads.
func newBenchCPUCmd() *cobra.Command {
	var (
		opt      cpubench.Options
		models   []string
		configs  []string
		noPeer   bool
		jsonPath string
		minTime  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cpu [--threads N] [--models qwen3-4M,qwen3-25M] [--config config.json]",
		Short: "CPU speed: GEMM vs the FMA peak, Qwen forward/train/decode vs PyTorch and the pure-Go backend",
		Long: `Measure, in one run: the FMA peak of the cores (register-only FMAs, and a
tight vek32.Dot loop), the tensor GEMM kernels at 256³…2048³ and decoding
shapes, GoMLX's DotGeneral on the pure-Go ("go") and gocpu backends, and for
each Qwen-shaped model (built-in qwen3-4M and qwen3-25M, or --config files):
forward tokens/s and training-step time (cross-entropy + backward + AdamW) on
--batch × --seqlen tokens, and greedy decode tokens/s on gocpu and the pure-Go
backend, next to torch_qwen_peer.py run with the same threads (through
peer_env.py, which unpins OpenBLAS and reports the BLAS it loaded; no ratio is
printed against the netlib reference BLAS). Prints Markdown tables with the
ratios (the README's performance section), the roofline (the step's matrix
FLOPs at the measured 1024³ GEMM rate, and the peer's time over it: the
ratio a step at the roofline would show) and batch-1 decode against the
streaming bound (float32 weight bytes at the measured read bandwidth).

--rounds N measures each model's forward pass and training step N times,
gocpu and PyTorch alternated, and prints every round's ratios with their
median and range: on a shared or virtual machine the peer's figures move by
10–30% between runs, so one round's ratio is not a verdict.

--profile also runs one forward pass, one training step and one decode per
model on GOMLX_BACKEND=gocpu:profile and prints the time per op kind, and
which backend ran it (gocpu's kernels or simplego, the fused kernels by
name); --profile-shapes splits each op kind by output size. For a pprof
view of the same work: go test -run '^$' -bench 'Qwen/qwen3-4M/trainstep' -benchtime 3x
-cpuprofile cpu.out ./bench/cpubench/, then go tool pprof -top cpu.out.

--decode-only measures only batch-1 decoding of each model (float32 and
bfloat16 weights, alternated) against the streaming bound, in seconds
rather than minutes; with --profile it profiles the decode alone. pprof of
decoding: go test -run '^$' -bench DecodeWeights -benchtime 20x -cpuprofile
cpu.out ./bench/cpubench/ (CAS_BENCH_25M=1 for the 25M model).

The machine's load average is printed with the figures: rerun on a quiet
machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opt.MinTime = minTime
			if opt.Rounds < 1 {
				return fmt.Errorf("--rounds %d: want at least 1", opt.Rounds)
			}
			if err := makeOutputDir("json", jsonPath); err != nil {
				return err
			}
			for _, name := range models {
				if name == "none" {
					opt.SkipModels = true
					continue
				}
				i := slices.IndexFunc(cpubench.DefaultModels(), func(m cpubench.ModelSpec) bool { return m.Name == name })
				if i < 0 {
					return fmt.Errorf("unknown model %q (built-in: qwen3-4M, qwen3-25M, none)", name)
				}
				opt.Models = append(opt.Models, cpubench.DefaultModels()[i])
			}
			for _, path := range configs {
				ms, err := cpubench.LoadModelSpec(path)
				if err != nil {
					return err
				}
				opt.Models = append(opt.Models, ms)
				opt.SkipModels = false
			}
			if noPeer {
				opt.PeerScript = ""
			} else if opt.PeerScript != "" {
				if _, err := os.Stat(opt.PeerScript); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "bench cpu: no PyTorch peer: %v\n", err)
					opt.PeerScript = ""
				}
			}
			opt.Log = progressOut(cmd.ErrOrStderr())
			r, err := cpubench.Run(opt)
			if err != nil {
				return err
			}
			r.WriteMarkdown(cmd.OutOrStdout())
			if jsonPath != "" {
				data, err := json.MarshalIndent(r, "", "  ")
				if err != nil {
					return err
				}
				if err := atomicfile.WriteFile(jsonPath, append(data, '\n')); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opt.Threads, "threads", 0, "threads for Go (GOMAXPROCS) and PyTorch (default: all cores)")
	f.IntSliceVar(&opt.Sizes, "sizes", []int{256, 512, 1024, 2048}, "square GEMM sizes")
	f.DurationVar(&minTime, "min-time", time.Second, "least time per GEMM measurement")
	f.StringSliceVar(&models, "models", nil, "built-in models: qwen3-4M, qwen3-25M, or none (default: both)")
	f.StringArrayVar(&configs, "config", nil, "Hugging Face config.json of a Qwen model to add (repeatable), e.g. the demo's policy")
	f.IntVar(&opt.Batch, "batch", 8, "rows per forward pass and training step")
	f.IntVar(&opt.SeqLen, "seqlen", 256, "tokens per row")
	f.IntVar(&opt.Steps, "steps", 3, "timed forward passes and training steps (each averaged)")
	f.IntVar(&opt.Rounds, "rounds", 1, "alternated rounds of gocpu and PyTorch forward + training step per model (their ratios printed with median and range)")
	f.IntVar(&opt.DecodeTokens, "decode-tokens", 32, "tokens generated per decode measurement")
	f.BoolVar(&opt.Plain, "plain", false, "also time the forward pass on the pure-Go backend (slow)")
	f.BoolVar(&opt.Profile, "profile", false, "print the time per op kind of one forward pass, one training step and one decode per model")
	f.BoolVar(&opt.DecodeOnly, "decode-only", false, "measure only batch-1 decode against the streaming bound (no GEMM, forward, training or peer)")
	f.BoolVar(&opt.ProfileShapes, "profile-shapes", false, "with the profile, split each op kind by output size (implies --profile)")
	defPeer := sharedDefault("bench", "torch_qwen_peer.py")
	if defPeer == "" {
		defPeer = filepath.Join("..", "shared", "bench", "torch_qwen_peer.py")
	}
	f.StringVar(&opt.PeerScript, "peer", defPeer, "torch_qwen_peer.py")
	f.BoolVar(&noPeer, "no-peer", false, "skip the PyTorch peer")
	f.StringVar(&opt.Python, "python", bench.DefaultPython, "Python with torch for --peer")
	f.StringVar(&jsonPath, "json", "", "also write the report as JSON to this file")
	return cmd
}
