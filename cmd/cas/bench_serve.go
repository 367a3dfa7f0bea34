package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cas-engine/cas/bench"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
	"github.com/spf13/cobra"
)

// sharedDefault returns $CAS_SHARED/rel, or "" when CAS_SHARED is unset.
func sharedDefault(rel ...string) string {
	root := os.Getenv("CAS_SHARED")
	if root == "" {
		return ""
	}
	return filepath.Join(append([]string{root}, rel...)...)
}

func newBenchServeCmd() *cobra.Command {
	var (
		dir, corpus, qaPath string
		dense               denseFlags
		cfg                 = bench.ServeBenchConfig{Server: search.DefaultServerConfig(), Rate: 120, Duration: 30 * time.Second, TopK: 3, QueriesPerRequest: 1}
		ramp                bool
		asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "serve [--index DIR | --corpus F] [--qa F] [--rate 120 --duration 30s] [--ramp]",
		Short: "Load-test the retrieval server on loopback (paper: 120 queries/s, 30 s)",
		Long: `Serve an index on an ephemeral 127.0.0.1 port inside this process and send it
--rate requests per second (one question of --qa each, topk --topk) for
--duration, open loop: latency counts from each request's scheduled time,
at most 512 requests are outstanding, and everything else is an error.
Prints throughput, p50/p90/p99/max latency, errors and whether the rate was
held (zero errors, throughput ≥ 98% of the rate). --ramp then raises the
rate from 2× by factors of 1.5 in 5 s steps until one is not held or p99
exceeds 1 s, and prints the highest rate held.

Without --index, a BM25 folder over --corpus (default: the shared 10k
wiki-18 passages) is built in a temporary directory first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if qaPath == "" {
				return errors.New("--qa is required (or set CAS_SHARED)")
			}
			qs, err := qa.Load(qaPath)
			if err != nil {
				return err
			}
			queries := make([]string, len(qs))
			for i, q := range qs {
				queries[i] = q.Question
			}
			if dir == "" {
				if corpus == "" {
					return errors.New("give --index DIR or --corpus FILE (or set CAS_SHARED)")
				}
				tmp, err := os.MkdirTemp("", "cas-bench-serve-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				start := time.Now()
				if _, err := search.BuildBM25Folder(cmd.Context(), corpus, tmp, search.BM25BuildOptions{
					Analyzer: search.DefaultAnalyzerSettings(), Params: search.DefaultBM25Params(), Progress: progressOut(cmd.ErrOrStderr()),
				}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "built a BM25 index of %s in %v\n", corpus, time.Since(start).Round(time.Millisecond))
				dir = tmp
			}
			r, s, closeAll, err := openRetrieverFolder(dir, dense)
			if err != nil {
				return err
			}
			defer closeAll()
			cfg.Server.Kind, cfg.Server.Docs = s.Kind, s.Docs
			if ramp {
				cfg.Ramp = bench.RampConfig{Start: cfg.Rate * 2, Factor: 1.5, Step: 5 * time.Second, MaxSteps: 12, MaxP99: time.Second}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s index, %d passages, %d questions; %.0f requests/s × %d queries for %v\n",
				s.Kind, s.Docs, len(queries), cfg.Rate, cfg.QueriesPerRequest, cfg.Duration)
			rep, err := bench.ServeBench(cmd.Context(), r, queries, cfg, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "sustained: %v\n", rep.Sustained)
			if ramp {
				fmt.Fprintf(out, "highest rate held: %.0f queries/s\n", rep.MaxHeld)
			}
			if !rep.Sustained.Held {
				return fmt.Errorf("the server did not hold %.0f queries/s", rep.Sustained.QueriesRate)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "index", "", "index folder to serve (default: build BM25 over --corpus)")
	f.StringVar(&corpus, "corpus", sharedDefault("data", "corpus", "wiki18_harvested_10k.jsonl"), "corpus for the temporary BM25 index")
	f.StringVar(&qaPath, "qa", sharedDefault("data", "qa", "nq_test_1k.jsonl"), "questions to send (QA JSONL)")
	f.Float64Var(&cfg.Rate, "rate", cfg.Rate, "requests per second")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "sending time (at most 10m)")
	f.IntVar(&cfg.TopK, "topk", cfg.TopK, "topk of every request")
	f.IntVar(&cfg.QueriesPerRequest, "batch", cfg.QueriesPerRequest, "queries per request")
	f.BoolVar(&ramp, "ramp", false, "then find the highest rate held (×1.5 steps of 5 s)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	dense.register(cmd)
	return cmd
}
