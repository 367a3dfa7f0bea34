package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cas-engine/cas/search"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var (
		dir, addr       string
		dense           denseFlags
		cfg             = search.DefaultServerConfig()
		grace           time.Duration
		quiet           bool
		maxBodyMiB      float64
		defaultK, maxK  int
		maxQ, maxBatch  int
		workers, queueN int
	)
	cmd := &cobra.Command{
		Use:   "serve --index DIR [--addr 127.0.0.1:8000]",
		Short: "Serve an index folder over Search-R1's HTTP retrieval API",
		Long: `Serve an index folder (cas index build) over Search-R1's retrieval API:

  POST /retrieve  {"queries": [...], "topk": k, "return_scores": true}
                  → {"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}
                  (without return_scores: the documents alone)
  GET  /health    {"status": "ok", "kind", "docs", counters}

An absent topk takes --topk; topk < 1 or > --max-topk, malformed JSON, a
missing "queries" or more than --max-queries queries are 400s with a JSON
{"error"} body; a body over --max-body-mib is a 413; a request not answered
within --timeout (queueing included) or arriving when the queue is full is a
503. Concurrent requests are batched into one retrieval call per worker.
SIGINT/SIGTERM stop accepting, finish in-flight requests (up to --grace) and
exit 0. A dense folder needs --encoder (and --tokenizer).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.DefaultTopK, cfg.MaxTopK, cfg.MaxQueries = defaultK, maxK, maxQ
			cfg.MaxBatch, cfg.Workers, cfg.QueueSize = maxBatch, workers, queueN
			cfg.MaxBodyBytes = int64(maxBodyMiB * (1 << 20))
			r, s, closeAll, err := openRetrieverFolder(dir, dense)
			if err != nil {
				return err
			}
			defer closeAll()
			cfg.Kind, cfg.Docs = s.Kind, s.Docs
			logger := log.New(cmd.ErrOrStderr(), "cas serve: ", log.LstdFlags)
			if !quiet {
				cfg.Log = logger
			}
			srv, err := search.NewServer(r, cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen %s: %w", addr, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			logger.Printf("serving %s (%s, %d passages) on http://%s", dir, s.Kind, s.Docs, ln.Addr())
			if err := srv.Serve(ctx, ln, grace); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			h := srv.Health()
			logger.Printf("stopped after %d requests (%d queries, %d errors)", h.Requests, h.Queries, h.Errors)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "index", "", "index folder (cas index build --out)")
	f.StringVar(&addr, "addr", "127.0.0.1:8000", "listen address")
	f.IntVar(&defaultK, "topk", cfg.DefaultTopK, "topk when a request omits it")
	f.IntVar(&maxK, "max-topk", cfg.MaxTopK, "largest topk accepted")
	f.IntVar(&maxQ, "max-queries", cfg.MaxQueries, "most queries per request")
	f.Float64Var(&maxBodyMiB, "max-body-mib", float64(cfg.MaxBodyBytes)/(1<<20), "request body limit (MiB)")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "per-request timeout, queueing included")
	f.IntVar(&maxBatch, "max-batch", cfg.MaxBatch, "most queries per retrieval call")
	f.DurationVar(&cfg.BatchWindow, "batch-window", 0, "wait this long for more requests before a batch (0: batch only what is queued)")
	f.IntVar(&workers, "workers", 0, "concurrent batches (0: GOMAXPROCS)")
	f.IntVar(&queueN, "queue", cfg.QueueSize, "waiting requests before 503s")
	f.DurationVar(&grace, "grace", 30*time.Second, "how long shutdown waits for in-flight requests")
	f.BoolVar(&quiet, "no-error-log", false, "do not log internal errors")
	dense.register(cmd)
	dense.registerCorpus(cmd)
	aliasFlag(cmd, "quiet", "no-error-log")
	_ = cmd.MarkFlagRequired("index")
	return cmd
}
