package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cas-engine/cas/search"
)

// search retrieves for one step's queries in a single batched call and
// returns, per query, the information block to append and the search record.
// Blank queries are not sent (an empty <search></search> gets an empty
// information block).
func (r *Runner) search(ctx context.Context, queries []string, turn int) ([]string, []SearchCall, error) {
	var send []string
	var idx []int
	for i, q := range queries {
		if pyStrip(q) != "" {
			send = append(send, q)
			idx = append(idx, i)
		}
	}
	hits := make([][]search.Hit, len(queries))
	if len(send) > 0 {
		got, err := r.retrieve(ctx, send)
		if err != nil {
			if turn == 0 {
				return nil, nil, fmt.Errorf("rollout: retrieval with the questions: %w", err)
			}
			return nil, nil, fmt.Errorf("rollout turn %d: %w", turn, err)
		}
		for j, i := range idx {
			hits[i] = got[j]
		}
	}
	infos := make([]string, len(queries))
	calls := make([]SearchCall, len(queries))
	for i, q := range queries {
		keep := r.selectDocs(hits[i])
		contents := make([]string, len(keep))
		call := SearchCall{Turn: turn, Query: q, Candidates: make([]Candidate, len(hits[i])), Kept: make([]string, len(keep))}
		for j, h := range hits[i] {
			call.Candidates[j] = Candidate{DocID: h.Doc.ID, Score: h.Score}
		}
		for j, k := range keep {
			contents[j] = hits[i][k].Doc.Contents
			call.Kept[j] = hits[i][k].Doc.ID
		}
		infos[i] = FormatInformation(contents, r.cfg.Info)
		calls[i] = call
	}
	return infos, calls, nil
}

// selectDocs returns the indices of the passages to keep, best first: with
// APS the Keep(scores) best of the candidates (paper: k = min{k : c_k ≥
// q̂}, clamped; decided in log space), otherwise the TopK first.
func (r *Runner) selectDocs(hits []search.Hit) []int {
	if r.cfg.APS == nil {
		n := min(r.cfg.TopK, len(hits))
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	scores := make([]float64, len(hits))
	for i, h := range hits {
		scores[i] = float64(h.Score)
	}
	return r.cfg.APS.KeepIndices(scores)
}

// retrieve calls the retriever with bounded retries: each attempt is limited
// to RetrieveTimeout, failed attempts are retried after a doubling backoff,
// and an answer of the wrong shape or with non-finite scores counts as a
// failure. After RetrieveAttempts failures it returns an error naming the
// queries and the last cause.
func (r *Runner) retrieve(ctx context.Context, queries []string) ([][]search.Hit, error) {
	k := r.cfg.retrieveK()
	backoff := r.cfg.RetryBackoff
	var last error
	for attempt := 1; attempt <= r.cfg.RetrieveAttempts; attempt++ {
		if attempt > 1 && backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("retrieve %d queries: %w (last error: %v)", len(queries), ctx.Err(), last)
			case <-t.C:
			}
			backoff *= 2
		}
		hits, err := r.retrieveOnce(ctx, queries, k)
		if err == nil {
			return hits, nil
		}
		last = err
		if ctx.Err() != nil {
			return nil, fmt.Errorf("retrieve %d queries: %w", len(queries), err)
		}
	}
	return nil, fmt.Errorf("retrieve %d queries (first %q): %d attempts failed: %w",
		len(queries), clip(queries[0]), r.cfg.RetrieveAttempts, last)
}

func (r *Runner) retrieveOnce(ctx context.Context, queries []string, k int) ([][]search.Hit, error) {
	if r.cfg.RetrieveTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.RetrieveTimeout)
		defer cancel()
	}
	hits, err := r.retriever.Retrieve(ctx, queries, k)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return nil, fmt.Errorf("retriever timed out after %v: %w", r.cfg.RetrieveTimeout, err)
		}
		return nil, err
	}
	if len(hits) != len(queries) {
		return nil, fmt.Errorf("retriever returned %d result lists for %d queries", len(hits), len(queries))
	}
	for i, hs := range hits {
		if len(hs) > k {
			return nil, fmt.Errorf("retriever returned %d passages for query %d, asked for %d", len(hs), i, k)
		}
		for j, h := range hs {
			if s := float64(h.Score); math.IsNaN(s) || math.IsInf(s, 0) {
				return nil, fmt.Errorf("retriever returned score %v for query %d passage %d", h.Score, i, j)
			}
		}
	}
	return hits, nil
}
