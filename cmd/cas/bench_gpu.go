package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/bench/gpubench"
	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/model/qwen"
)

// newBenchGPUCmd is `cas bench gpu`: the decode and GRPO figures of the GPU
// check (gpu/check.sh), on whatever backend GOMLX_BACKEND names.
func newBenchGPUCmd() *cobra.Command {
	var (
		batches                        []int
		decodeShapes                   []string
		precision, grpoShape, grpoPrec string
		out                            string
		dec                            gpubench.DecodeOptions
		grpo                           gpubench.GRPOOptions
		hbmGBps                        float64
		timeout                        time.Duration
		decodeTimeout, grpoTimeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "gpu [--shapes qwen2.5-0.5b,qwen2.5-3b] [--grpo-shape qwen2.5-0.5b --tokenizer F] [--out F.json]",
		Short: "Prefill/decode tokens/s against the HBM bound, and one GRPO step's phase times and peak memory",
		Long: `Measure the backend named by GOMLX_BACKEND (gocpu by default; the GPU check
runs it with GOMLX_BACKEND=xla:/path/xla_cuda_plugin.so):

  decode  for each --shapes model shape (random weights in --precision):
          prefill tokens/s of one --prompt-len row, and decode tokens/s at
          each --batches size; batch-1 decode is reported against the
          memory-bandwidth bound, bandwidth / weight bytes (--hbm-gbps, or
          the datasheet figure of the GPU nvidia-smi names; H200: 4800).
  grpo    one GRPO+ACI training step of a random --grpo-shape policy
          (--grpo-precision bf16: mixed precision) on the synthetic world's
          questions with BM25 retrieval: --prompts × --group rollouts,
          scoring, loss, backward, AdamW; the time of each phase and the
          peak device memory (nvidia-smi; the process's peak RSS on CPU).

Shapes: ` + strings.Join(gpubench.ShapeNames(), ", ") + `. An empty --shapes or
--grpo-shape skips that part. Every figure goes to --out as JSON (also
when a part fails: its error is listed and the exit status is 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := qwen.ParsePrecision(precision)
			if err != nil {
				return fmt.Errorf("--precision: %w", err)
			}
			gp, err := qwen.ParsePrecision(grpoPrec)
			if err != nil {
				return fmt.Errorf("--grpo-precision: %w", err)
			}
			for _, s := range append(append([]string(nil), decodeShapes...), grpoShape) {
				if s == "" {
					continue
				}
				if _, err := gpubench.LookupShape(s); err != nil {
					return err
				}
			}
			if grpo.Tokenizer != "" {
				if _, err := os.Stat(grpo.Tokenizer); err != nil {
					return fmt.Errorf("--tokenizer: %w", err)
				}
			}
			if err := makeOutputDir("out", out); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			be, err := backend.New()
			if err != nil {
				return err
			}
			defer be.Finalize()
			logw := cmd.ErrOrStderr()
			start := time.Now()
			r := &gpubench.Report{Backend: be.Name(), Device: backend.Device(), StartedAt: start.UTC().Format(time.RFC3339)}
			bw := backend.HBMBandwidth(hbmGBps, "")
			r.HBMGBps = bw / 1e9
			fmt.Fprintf(logw, "bench gpu: backend %s, device %s, bandwidth %.0f GB/s\n", r.Backend, r.Device, r.HBMGBps)
			mem := gpubench.NewMemSampler()
			defer mem.Close()
			fail := func(part string, err error) {
				r.Errors = append(r.Errors, part+": "+err.Error())
				fmt.Fprintf(logw, "bench gpu: %s: %v\n", part, err)
			}
			for _, s := range decodeShapes {
				if s == "" || ctx.Err() != nil {
					continue
				}
				o := dec
				o.Shape, o.Precision, o.Batches = s, p, batches
				fmt.Fprintf(logw, "bench gpu: decode %s (%s)…\n", s, p)
				row, err := runWithin(ctx, decodeTimeout, func() (*gpubench.DecodeRow, error) { return gpubench.Decode(be, o, bw) })
				if err != nil {
					fail("decode "+s, err)
					continue
				}
				fmt.Fprintf(logw, "bench gpu: %s: prefill %.0f tok/s, decode %v tok/s, bound %.0f tok/s (batch 1 at %.0f%%)\n",
					s, row.PrefillTokS, row.Decode, row.HBMBoundTokS, 100*row.OfBound)
				r.Decode = append(r.Decode, row)
			}
			if grpoShape != "" && ctx.Err() == nil {
				o := grpo
				o.Shape, o.Precision = grpoShape, gp
				fmt.Fprintf(logw, "bench gpu: grpo step %s (%s), %d prompts × %d…\n", grpoShape, gp, o.Prompts, o.Group)
				row, err := runWithin(ctx, grpoTimeout, func() (*gpubench.GRPORow, error) { return gpubench.GRPOStep(ctx, be, o, mem) })
				if err != nil {
					fail("grpo "+grpoShape, err)
				} else {
					fmt.Fprintf(logw, "bench gpu: grpo: rollout %.2fs, score %.2fs, update %.2fs, step %.2fs, peak memory %.2f GiB (%s)\n",
						row.RolloutS, row.ScoreS, row.UpdateS, row.StepS, float64(row.PeakMemBytes)/(1<<30), row.PeakMemSource)
					r.GRPO = append(r.GRPO, row)
				}
			}
			if err := ctx.Err(); err != nil {
				fail("run", err)
			}
			r.WallS = time.Since(start).Seconds()
			var buf bytes.Buffer
			if err := r.WriteJSON(&buf); err != nil {
				return err
			}
			if out != "" {
				if err := atomicfile.WriteFile(out, buf.Bytes()); err != nil {
					return err
				}
				fmt.Fprintf(logw, "bench gpu: wrote %s\n", out)
			} else if _, err := cmd.OutOrStdout().Write(buf.Bytes()); err != nil {
				return err
			}
			if len(r.Errors) > 0 {
				return fmt.Errorf("bench gpu: %d part(s) failed: %s", len(r.Errors), strings.Join(r.Errors, "; "))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&decodeShapes, "shapes", []string{"qwen2.5-0.5b", "qwen2.5-3b"}, "model shapes of the decode figures (empty: skip)")
	fl.StringVar(&precision, "precision", "bf16", "weight dtype of the decode models: bf16 or f32")
	fl.IntVar(&dec.PromptLen, "prompt-len", 512, "prefill length (one row, one chunk)")
	fl.IntSliceVar(&batches, "batches", []int{1, 64}, "decode batch sizes")
	fl.IntVar(&dec.NewTokens, "new-tokens", 64, "decoded tokens timed per row (after a 64-token prompt)")
	fl.Float64Var(&hbmGBps, "hbm-gbps", 0, "memory bandwidth in GB/s for the batch-1 bound (0: from the GPU's name)")
	fl.StringVar(&grpoShape, "grpo-shape", "", "model shape of the GRPO step (empty: skip)")
	fl.StringVar(&grpoPrec, "grpo-precision", "bf16", "training precision: bf16 (mixed: f32 master weights and AdamW) or f32")
	fl.StringVar(&grpo.Tokenizer, "tokenizer", "", "tokenizer.json of the GRPO step: the Qwen one for the qwen2.5 shapes (empty: the synthetic world's own, which fits only tiny)")
	fl.IntVar(&grpo.Prompts, "prompts", 8, "prompts of the GRPO step")
	fl.IntVar(&grpo.Group, "group", 5, "trajectories per prompt")
	fl.IntVar(&grpo.MaxTurnTokens, "max-turn-tokens", 0, "tokens per generation (0: the paper's)")
	fl.IntVar(&grpo.MaxTurns, "max-turns", 0, "generations per trajectory (0: the paper's)")
	fl.IntVar(&grpo.MicroBatch, "micro-batch", 0, "trajectories per forward/backward (0: 8)")
	fl.Uint64Var(&grpo.Seed, "seed", 1, "seed of the weights, world and sampling")
	fl.StringVar(&out, "out", "", "JSON report file (default: stdout)")
	fl.DurationVar(&timeout, "timeout", 0, "stop everything after this long (0: no limit)")
	fl.DurationVar(&decodeTimeout, "decode-timeout", 0, "limit per decode shape (0: none)")
	fl.DurationVar(&grpoTimeout, "grpo-timeout", 0, "limit of the GRPO part (0: none)")
	return cmd
}

// runWithin runs f, giving up (with an error; f keeps running in the
// background until the process exits) after limit when limit > 0 or when
// ctx ends.
func runWithin[T any](ctx context.Context, limit time.Duration, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	var timer <-chan time.Time
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		timer = t.C
	}
	select {
	case r := <-done:
		return r.v, r.err
	case <-timer:
		var zero T
		return zero, fmt.Errorf("over its time limit of %s", limit)
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
