package bench

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
)

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8000", true}, {"http://localhost:8000", true}, {"http://[::1]:9", true},
		{"http://127.0.0.2:80", true}, {"http://10.0.0.1:8000", false}, {"http://example.com", false},
		{"ftp://127.0.0.1", false}, {"::bad", false},
	}
	for _, tc := range tests {
		if err := CheckLoopback(tc.url); (err == nil) != tc.ok {
			t.Errorf("CheckLoopback(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
	}
	for _, cfg := range []LoadConfig{
		{URL: "http://192.0.2.1", Queries: []string{"a"}, Rate: 1, Duration: time.Second, TopK: 1},
		{URL: "http://127.0.0.1:1", Queries: []string{"a"}, Rate: 1e5, Duration: time.Minute, TopK: 1},
		{URL: "http://127.0.0.1:1", Queries: []string{"a"}, Rate: 1, Duration: time.Hour, TopK: 1},
		{URL: "http://127.0.0.1:1", Rate: 1, Duration: time.Second, TopK: 1},
		{URL: "http://127.0.0.1:1", Queries: []string{"a"}, Rate: 0, Duration: time.Second, TopK: 1},
		{URL: "http://127.0.0.1:1", Queries: []string{"a"}, Rate: 1, Duration: time.Second, TopK: 0},
	} {
		if _, err := RunLoad(context.Background(), cfg); err == nil {
			t.Errorf("RunLoad(%+v): want an error", cfg)
		}
	}
}

// TestLoadBM25 is the short version of `cas bench serve`: 120 queries/s for
// 3 s over the 10k-passage BM25 index, one query per request, zero errors.
func TestLoadBM25(t *testing.T) {
	dir := t.TempDir()
	if _, err := search.BuildBM25Folder(context.Background(), sharedtest.Path(t, "data", "corpus", "wiki18_harvested_10k.jsonl"), dir, search.DefaultBM25BuildOptions()); err != nil {
		t.Fatal(err)
	}
	r, _, err := search.OpenRetriever(dir, search.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := search.NewServer(r, search.DefaultServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	qs, err := qa.Load(sharedtest.Path(t, "data", "qa", "nq_test_1k.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	queries := make([]string, len(qs))
	for i, q := range qs {
		queries[i] = q.Question
	}
	rep, err := RunLoad(context.Background(), LoadConfig{URL: ts.URL, Queries: queries, Rate: 120, Duration: 3 * time.Second, TopK: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	// Zero errors and every request answered; the throughput bound leaves
	// room for a scheduling stall on a loaded 2-core CI machine (the strict
	// 30 s figure is `cas bench serve`'s).
	if rep.Errors != 0 || rep.OK != 360 || rep.Queries != 360 || rep.Throughput < 90 {
		t.Errorf("load test failed: %v", rep)
	}
	if rep.P50 <= 0 || rep.P50 > rep.P99 || rep.P99 > rep.Max {
		t.Errorf("inconsistent percentiles: %v", rep)
	}
}

// TestServeBenchRamp runs the bench harness briefly against a fake
// retriever: a sustained phase and a two-step ramp, all held.
func TestServeBenchRamp(t *testing.T) {
	rep, err := ServeBench(context.Background(), staticHits{}, []string{"a", "b"}, ServeBenchConfig{
		Server: search.DefaultServerConfig(), Rate: 40, Duration: 500 * time.Millisecond, TopK: 2, QueriesPerRequest: 2,
		Ramp: RampConfig{Start: 80, Factor: 2, Step: 250 * time.Millisecond, MaxSteps: 2, MaxP99: 5 * time.Second},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sustained.OK != 20 || rep.Sustained.Queries != 40 || rep.Sustained.QueriesRate != 80 || rep.Sustained.Errors != 0 {
		t.Errorf("sustained %v", rep.Sustained)
	}
	if len(rep.Ramp) != 2 || rep.Ramp[1].TargetRate != 160 || rep.MaxHeld != 320 {
		t.Errorf("ramp %v, max held %v", rep.Ramp, rep.MaxHeld)
	}
}

// staticHits answers every query with k empty passages.
type staticHits struct{}

func (staticHits) Retrieve(_ context.Context, queries []string, k int) ([][]search.Hit, error) {
	out := make([][]search.Hit, len(queries))
	for i := range out {
		out[i] = make([]search.Hit, k)
	}
	return out, nil
}
