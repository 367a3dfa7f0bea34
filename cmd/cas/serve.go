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
		maxRespMiB      float64
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

The body must be Content-Type: application/json (else 415) and an object
with exactly the keys above, spelled exactly (an unknown or repeated key is a
400 naming it). An absent topk takes --topk; topk < 1 or > --max-topk,
malformed JSON, a missing "queries", more than --max-queries queries or more
than --max-results queries × topk are 400s with a JSON {"error"} body; a body
over --max-body-mib or an answer over --max-response-mib is a 413. A request
not answered within --timeout (queueing included), arriving when the queue is
full, beyond --max-inflight requests or --max-large-inflight large ones (over
--large-results results), or on a connection beyond --max-conns, is a 503
with Retry-After. Answers are streamed one query at a time; a client that
does not take a piece within --write-timeout is dropped. Concurrent requests
are batched into one retrieval call per worker, small requests first and
large ones --fair-chunk-results results at a time.
SIGINT/SIGTERM stop accepting, finish in-flight requests (up to --grace) and
exit 0. A dense folder needs --encoder (and --tokenizer).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.DefaultTopK, cfg.MaxTopK, cfg.MaxQueries = defaultK, maxK, maxQ
			cfg.MaxBatch, cfg.Workers, cfg.QueueSize = maxBatch, workers, queueN
			cfg.MaxBodyBytes = int64(maxBodyMiB * (1 << 20))
			cfg.MaxResponseBytes = int64(maxRespMiB * (1 << 20))
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
	f.Float64Var(&maxRespMiB, "max-response-mib", float64(cfg.MaxResponseBytes)/(1<<20), "response size limit (MiB)")
	f.IntVar(&cfg.MaxResults, "max-results", cfg.MaxResults, "most queries × topk per request")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "per-request timeout, queueing included")
	f.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "drop a client that does not take a piece of its answer within this")
	f.IntVar(&cfg.MaxInFlight, "max-inflight", cfg.MaxInFlight, "requests served at once (more: 503 + Retry-After)")
	f.IntVar(&cfg.LargeResults, "large-results", cfg.LargeResults, "a request asking more results (queries × topk) is large")
	f.IntVar(&cfg.MaxLargeInFlight, "max-large-inflight", cfg.MaxLargeInFlight, "large requests served at once (more: 503 + Retry-After)")
	f.IntVar(&cfg.MaxConns, "max-conns", cfg.MaxConns, "open connections (more: 503 + Retry-After, closed)")
	f.IntVar(&cfg.FairChunkResults, "fair-chunk-results", cfg.FairChunkResults, "results (queries × topk) of large requests per batch, interleaved with others")
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
