package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/bench"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/search"
)

func newEvalCmd() *cobra.Command {
	var (
		modelDir, tokPath, indexDir, serverURL, apsPath, outDir string
		mode, turnRule, infoFormat, placement, family           string
		qaPaths                                                 []string
		limit, batch                                            int
		noProgress                                              bool
		dense                                                   denseFlags
		cfg                                                     = agent.DefaultRolloutConfig()
	)
	cmd := &cobra.Command{
		Use:   "eval --model DIR --qa FILE... (--index DIR | --retriever URL) [--aps qhat.json | --topk 3] --out DIR",
		Short: "Evaluate a search agent (or a baseline) with exact match, as in the paper's Tables 1–2",
		Long: `Eval runs greedy rollouts of a Qwen model over FlashRAG/Search-R1 QA files
({"id", "question", "golden_answers"} per line) and reports exact match per
dataset, the General QA (NQ, TriviaQA, PopQA) and Multi-Hop QA (HotpotQA,
2Wiki, MuSiQue, Bamboogle) averages and the overall average, as in the
paper's Tables 1–2, with the mean search calls per question, the mean
passages appended per search and the format-valid rate. The dataset is
named after the file (nq_test_1k.jsonl → nq).

Modes: agent (think/search/answer with retrieval), direct (answer without
retrieval) and rag (retrieve once with the question, then answer).
Passages: APS truncation with the threshold of a calibration report
(--aps qhat.json, from 'cas calibrate aps'; --candidates retrieved) or the
fixed top-k (--topk, default 3: the paper's −APS ablation).

Writes --out/report.json, --out/report.md and --out/trajectories.jsonl
(every question's response, prediction, searches and kept passages) and
prints the Markdown tables.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Mode, err = agent.ParseMode(mode); err != nil {
				return fmt.Errorf("--mode: %w", err)
			}
			if cfg.TurnRule, err = agent.ParseTurnRule(turnRule); err != nil {
				return fmt.Errorf("--turns: %w", err)
			}
			if cfg.Info, err = agent.ParseInfoFormat(infoFormat); err != nil {
				return fmt.Errorf("--info: %w", err)
			}
			if cfg.Placement, err = agent.ParsePlacement(placement); err != nil {
				return fmt.Errorf("--placement: %w", err)
			}
			cfg.ChatFamily = family
			cfg.Temperature = 0 // greedy evaluation
			if apsPath != "" && cmd.Flags().Changed("topk") {
				return errors.New("give --aps or --topk, not both")
			}
			if apsPath != "" {
				cal, err := conformal.LoadCalibration(apsPath)
				if err != nil {
					return err
				}
				switch {
				case cal.Candidates > 0 && !cmd.Flags().Changed("candidates"):
					cfg.Candidates = cal.Candidates // as calibrated
				case cal.Candidates > 0 && cal.Candidates != cfg.Candidates:
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s was calibrated for %d candidates per search, --candidates is %d\n", apsPath, cal.Candidates, cfg.Candidates)
				}
				cfg.SetCalibration(cal)
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			needRetrieval := cfg.Mode != agent.ModeDirect
			if needRetrieval && (indexDir == "") == (serverURL == "") {
				return fmt.Errorf("mode %s: give exactly one of --index DIR and --retriever URL", cfg.Mode)
			}
			datasets, err := bench.LoadDatasets(qaPaths, limit)
			if err != nil {
				return err
			}
			tok, err := loadModelTokenizer(modelDir, tokPath)
			if err != nil {
				return err
			}
			var r search.Retriever
			retrieval := ""
			if needRetrieval {
				rr, source, closeR, err := openRetrieval(serverURL, indexDir, dense)
				if err != nil {
					return err
				}
				defer closeR()
				r, retrieval = rr, source
			}
			var progress io.Writer
			if !noProgress {
				progress = progressOut(cmd.ErrOrStderr())
			}
			m, err := loadQwen(modelDir, "", progress)
			if err != nil {
				return err
			}
			defer m.Backend().Finalize()
			runner, err := agent.NewRunner(agent.QwenPolicy{Model: m}, tok, r, cfg)
			if err != nil {
				return err
			}
			rep, err := bench.EvalToDir(cmd.Context(), runner, datasets,
				bench.EvalOptions{Batch: batch, Model: modelDir, Retrieval: retrieval, Progress: progress}, outDir)
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), rep.Markdown())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "Hugging Face Qwen2/Qwen3 folder")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer.json of the model (default: <model>/tokenizer.json)")
	f.StringArrayVar(&qaPaths, "qa", nil, "QA JSONL file (repeatable; dataset named after the file)")
	f.StringVar(&indexDir, "index", "", "index folder to retrieve from")
	f.StringVar(&serverURL, "retriever", "", "Search-R1-compatible retrieval server, e.g. http://127.0.0.1:8000")
	f.StringVar(&apsPath, "aps", "", "APS calibration report (qhat.json) to truncate retrieval with")
	f.IntVar(&cfg.TopK, "topk", cfg.TopK, "passages kept per search without --aps")
	f.IntVar(&cfg.Candidates, "candidates", cfg.Candidates, "passages retrieved per search with --aps")
	f.StringVar(&outDir, "out", "", "output folder (report.json, report.md, trajectories.jsonl)")
	f.IntVar(&limit, "limit", 0, "evaluate the first N questions of each file (0: all)")
	f.IntVar(&batch, "batch", 32, "questions rolled out together")
	f.StringVar(&mode, "mode", "agent", "agent, direct (no retrieval) or rag (retrieve once with the question)")
	f.StringVar(&turnRule, "turns", "paper", "turn counting: paper (max-turns searches + a final answer) or code (max-turns generations)")
	f.IntVar(&cfg.MaxTurns, "max-turns", cfg.MaxTurns, "turn limit")
	f.StringVar(&infoFormat, "info", "code", "information block format: code or search-r1")
	f.StringVar(&placement, "placement", "system-user", "prompt placement: system-user (code) or user (Search-R1)")
	f.StringVar(&family, "chat-template", "", "chat template family qwen3 or qwen2.5 (default: the tokenizer's)")
	f.IntVar(&cfg.MaxObsTokens, "max-obs-tokens", cfg.MaxObsTokens, "cut each appended observation to this many tokens")
	f.IntVar(&cfg.MaxTurnTokens, "max-turn-tokens", cfg.MaxTurnTokens, "tokens per generation")
	f.IntVar(&cfg.MaxPromptTokens, "max-prompt-tokens", cfg.MaxPromptTokens, "longest prompt accepted")
	f.IntVar(&cfg.MaxResponseTokens, "max-response-tokens", cfg.MaxResponseTokens, "generated plus appended tokens per question")
	f.BoolVar(&noProgress, "no-progress", false, "hide the progress bars")
	dense.register(cmd)
	dense.registerCorpus(cmd)
	for _, name := range []string{"model", "qa", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
