package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/model/safetensors"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
	"github.com/cas-engine/cas/train"
)

func newTrainCmd() *cobra.Command {
	var (
		cfgPath, out, resume string
		sets                 []string
		quiet                bool
	)
	cmd := &cobra.Command{
		Use:   "train (--config F [--set key=value ...] --out RUN_DIR | --resume RUN_DIR [--set ...])",
		Short: "Train a search agent with GRPO + ACI (paper Algorithm 1)",
		Long: `Train runs CAS's reinforcement learning: every step samples G trajectories
for each of a batch of prompts (APS-truncated retrieval, KV-cache
continuation), rewards them (Eq. 5), scores their answer-span NLL, lets ACI
mark the low-confidence ones, and takes AdamW steps on the ω-weighted clipped
GRPO objective with the k3 KL to the frozen reference model.

The run is one YAML file (configs/*.yaml; the paper's defaults for anything
left out), overridden by --set key=value (dotted YAML paths, e.g.
--set aci.rho=0.1 --set grpo.micro_batch=4). RUN_DIR receives the resolved
config.yaml, aci_bootstrap.jsonl, metrics.jsonl (one JSON line per step) and
checkpoints/step-NNNNNN (Hugging Face folders that cas generate loads, plus
optimiser, ACI, RNG and data-cursor state), written atomically every
checkpoint.every steps. Ctrl-C checkpoints the last completed step; --resume
continues exactly where the run stopped. A NaN or Inf loss or gradient stops
the run and keeps the last good checkpoint.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (resume == "") == (cfgPath == "") {
				return errors.New("give either --config F --out RUN_DIR or --resume RUN_DIR")
			}
			if cfgPath != "" && out == "" {
				return errors.New("--config needs --out RUN_DIR")
			}
			in := newInterruptible(cmd.Context())
			defer in.stop()
			var cfg *train.Config
			var err error
			if cfgPath != "" {
				if cfg, err = train.LoadConfig(cfgPath, sets); err != nil {
					return err
				}
			} else {
				if cfg, err = train.LoadConfig(filepath.Join(resume, train.RunConfigFile), sets); err != nil {
					return err
				}
			}
			retriever, closeRetriever, err := openTrainRetriever(cfg.Retriever)
			if err != nil {
				return err
			}
			defer closeRetriever()
			be, err := backend.New()
			if err != nil {
				return err
			}
			defer be.Finalize()
			opts := train.RunOptions{Backend: be, Retriever: retriever, Log: progressOut(cmd.ErrOrStderr())}
			if !quiet {
				opts.Progress = progressOut(cmd.ErrOrStderr())
			}
			var tr *train.Trainer
			if cfgPath != "" {
				tr, err = train.NewTrainer(cfg, out, opts)
			} else {
				tr, err = train.ResumeTrainer(resume, sets, opts)
			}
			if err != nil {
				return err
			}
			err = tr.Run(in.ctx)
			if err != nil && in.ctx.Err() != nil {
				return in.interrupted(err, fmt.Sprintf("training stopped after step %d of %d:", tr.Step(), tr.Total()),
					shellJoin([]string{os.Args[0], "train", "--resume", tr.Dir()}))
			}
			if err != nil {
				return err
			}
			ck, err := train.LatestCheckpoint(tr.Dir())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "trained %d of %d steps; latest checkpoint %s\n", tr.Step(), tr.Total(), ck)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "run configuration (YAML), e.g. configs/qwen2.5-3b-instruct.yaml")
	f.StringArrayVar(&sets, "set", nil, "override a config field: key=value (dotted YAML path; repeatable)")
	f.StringVar(&out, "out", "", "run folder to create")
	f.StringVar(&resume, "resume", "", "run folder to continue from its latest checkpoint")
	f.BoolVar(&quiet, "no-progress", false, "no progress bars")
	aliasFlag(cmd, "quiet", "no-progress")
	cmd.AddCommand(newTrainBootstrapCmd(), newTrainExportPromptsCmd(), newTrainWarmStartCmd())
	return cmd
}

// openTrainRetriever opens the config's index folder or server client.
func openTrainRetriever(rc train.RetrieverConfig) (search.Retriever, func(), error) {
	r, _, closeAll, err := openRetrieval(rc.Server, rc.Index, denseFlags{batch: 32, maxLen: 256, corpus: rc.Corpus})
	if err != nil {
		return nil, nil, fmt.Errorf("retriever.index %s: %w (a config names the corpus with retriever.corpus, e.g. --set retriever.corpus=PATH)", rc.Index, err)
	}
	return r, closeAll, nil
}

func newTrainBootstrapCmd() *cobra.Command {
	var (
		cfgPath, out string
		sets         []string
	)
	cmd := &cobra.Command{
		Use:   "bootstrap-aci --config F [--set ...] --out scores.jsonl",
		Short: "Score the untrained policy on ACI's calibration prompts (the window's bootstrap)",
		Long: `Bootstrap-aci computes the scores that preload ACI's window (paper
Algorithm 1, line 2): aci.calib_prompts prompts (150) drawn with the run's
seed from aci.calib_data (default data.train) are answered greedily by the
policy of model.path without tools, and each answer's mean token NLL under
that policy is its score (Eq. 6). The scores are written as one JSONL line
{"scores": [...]}; point aci.bootstrap at the file to reuse them across runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := train.LoadConfig(cfgPath, sets)
			if err != nil {
				return err
			}
			if err := makeOutputDir("out", out); err != nil {
				return err
			}
			tok, err := loadModelTokenizer(cfg.Model.Path, cfg.Model.Tokenizer)
			if err != nil {
				return err
			}
			m, err := loadQwen(cfg.Model.Path, "", progressOut(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer m.Backend().Finalize()
			scores, err := train.ComputeBootstrap(cfg, m, tok, progressOut(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			if err := train.WriteScores(out, scores); err != nil {
				return err
			}
			mean := 0.0
			for _, s := range scores {
				mean += s
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d scores (mean NLL %.4f) written to %s\n", len(scores), mean/float64(len(scores)), out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "run configuration (YAML)")
	f.StringArrayVar(&sets, "set", nil, "override a config field: key=value (repeatable)")
	f.StringVar(&out, "out", "", "output JSONL file")
	for _, n := range []string{"config", "out"} {
		_ = cmd.MarkFlagRequired(n)
	}
	return cmd
}

func newTrainExportPromptsCmd() *cobra.Command {
	var (
		ins     []string
		out     string
		sources []string
		limit   int
		seed    uint64
		shuffle bool
	)
	cmd := &cobra.Command{
		Use:   "export-prompts --in F.parquet|F.jsonl ... --out F.jsonl [--source nq ...] [--limit N --shuffle --seed S]",
		Short: "Convert training prompts (Search-R1 parquet or JSONL) to FlashRAG JSONL",
		Long: `Export-prompts reads the trainer's prompt files — Search-R1's training
parquet (question and golden_answers, or verl's prompt and
reward_model.ground_truth) and FlashRAG JSONL — and writes them as FlashRAG
JSONL ({"id", "question", "golden_answers", "data_source"}), e.g. as the QA
file of cas calibrate aps or cas eval. --source keeps the prompts of the
named data sources (Search-R1's data_source: nq, triviaqa, popqa, hotpotqa,
2wikimultihopqa, musique, bamboogle). --shuffle --limit N draws N prompts
with --seed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := qa.Load(ins...)
			if err != nil {
				return err
			}
			if len(sources) > 0 {
				keep := ps[:0]
				for _, p := range ps {
					if slices.Contains(sources, p.Source) {
						keep = append(keep, p)
					}
				}
				if len(keep) == 0 {
					return fmt.Errorf("no prompt has data_source in %v", sources)
				}
				ps = keep
			}
			if shuffle {
				ps = train.DrawPrompts(ps, len(ps), seed)
				if limit > 0 {
					ps = train.DrawPrompts(ps, limit, seed)
				}
			} else if limit > 0 && limit < len(ps) {
				ps = ps[:limit]
			}
			if err := makeOutputDir("out", out); err != nil {
				return err
			}
			err = atomicfile.Write(out, func(w io.Writer) error {
				enc := json.NewEncoder(w)
				enc.SetEscapeHTML(false)
				for _, p := range ps {
					if err := enc.Encode(p); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d prompts written to %s\n", len(ps), out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&ins, "in", nil, "input file (.parquet, .jsonl; repeatable)")
	f.StringVar(&out, "out", "", "output JSONL file")
	f.StringArrayVar(&sources, "source", nil, "keep only this data_source (repeatable)")
	f.IntVar(&limit, "limit", 0, "keep at most N prompts (0: all)")
	f.BoolVar(&shuffle, "shuffle", false, "shuffle (with --seed) before --limit")
	f.Uint64Var(&seed, "seed", 0, "shuffle seed")
	for _, n := range []string{"in", "out"} {
		_ = cmd.MarkFlagRequired(n)
	}
	return cmd
}

func newTrainWarmStartCmd() *cobra.Command {
	var (
		modelDir, tokPath, data, out, placement, family string
		cfg                                             train.WarmStartConfig
		dtype                                           string
	)
	cfg.Optim = train.OptimConfig{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1, SkipNonFinite: true}
	cmd := &cobra.Command{
		Use:   "warm-start --model DIR --data F.jsonl --out DIR [--steps 200 --batch 16 --lr 1e-5]",
		Short: "Supervised warm start: cross-entropy on scripted trajectories under the loss mask",
		Long: `Warm-start fine-tunes a policy by supervised cross-entropy on full agent
responses ({"question", "response"} per JSONL line): the question is rendered
as the agent's prompt, the response is learned except its <information>
blocks (the same loss mask as GRPO), and an EOS ends it. It teaches a small
model the tag grammar before GRPO (the demo does this with scripted
trajectories). The result is a Hugging Face folder (--out) for model.path.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := loadModelTokenizer(modelDir, tokPath)
			if err != nil {
				return err
			}
			pl, err := agent.ParsePlacement(placement)
			if err != nil {
				return err
			}
			st := safetensors.F32
			if strings.EqualFold(dtype, "bf16") {
				st = safetensors.BF16
			}
			m, err := loadQwen(modelDir, "", progressOut(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer m.Backend().Finalize()
			eos := -1
			if len(m.Config.EOSTokenID) > 0 {
				eos = m.Config.EOSTokenID[0]
			}
			examples, err := train.LoadSupervised(data, tok, pl, family, eos, m.Config.VocabSize)
			if err != nil {
				return err
			}
			cfg.Progress = progressOut(cmd.ErrOrStderr())
			cfg.Optim.TotalSteps = cfg.Steps
			res, err := train.WarmStart(m, examples, cfg)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			if err := train.ExportModel(out, m, train.CheckpointSource{ModelDir: modelDir, Tokenizer: tokPath}, st); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "warm start: %d examples, %d steps, cross-entropy %.4f → %.4f; model written to %s\n",
				len(examples), len(res.Losses), res.Losses[0], res.Losses[len(res.Losses)-1], out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "Hugging Face Qwen2/Qwen3 folder to start from")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer.json (default: <model>/tokenizer.json)")
	f.StringVar(&data, "data", "", `JSONL file of {"question", "response"}`)
	f.StringVar(&out, "out", "", "output model folder")
	f.StringVar(&placement, "placement", "system-user", "prompt placement: system-user or user")
	f.StringVar(&family, "chat-template", "", "chat template family (qwen2.5 or qwen3; default: the tokenizer's)")
	aliasFlag(cmd, "chat-family", "chat-template")
	f.IntVar(&cfg.Steps, "steps", 200, "optimiser steps")
	f.IntVar(&cfg.BatchSize, "batch", 16, "examples per step")
	f.IntVar(&cfg.MicroBatch, "micro-batch", 0, "examples per forward/backward (0: the batch)")
	f.Float64Var(&cfg.Optim.LR, "lr", cfg.Optim.LR, "learning rate")
	f.IntVar(&cfg.Optim.WarmupSteps, "warmup-steps", 0, "linear warm-up steps")
	f.Uint64Var(&cfg.Seed, "seed", 0, "example order seed")
	f.StringVar(&dtype, "dtype", "f32", "weights dtype of the output: f32 or bf16")
	for _, n := range []string{"model", "data", "out"} {
		_ = cmd.MarkFlagRequired(n)
	}
	return cmd
}
