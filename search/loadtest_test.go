package search

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cas-engine/cas/internal/sharedtest"
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
	if _, err := RunLoad(context.Background(), LoadConfig{URL: "http://192.0.2.1", Queries: []string{"a"}, Rate: 1, Duration: time.Second, TopK: 1}); err == nil {
		t.Error("RunLoad against a non-loopback host: want an error")
	}
}

// TestLoadBM25 is the short version of `cas bench serve`: 120 queries/s for
// 3 s over the 10k-passage BM25 index, one query per request, zero errors.
func TestLoadBM25(t *testing.T) {
	r := openBM25_10k(t)
	cfg := DefaultServerConfig()
	s, err := NewServer(r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	qa := readQA(t, sharedtest.Path(t, "data", "qa", "nq_test_1k.jsonl"), 1000)
	queries := make([]string, len(qa))
	for i, q := range qa {
		queries[i] = q.Question
	}
	rep, err := RunLoad(context.Background(), LoadConfig{URL: ts.URL, Queries: queries, Rate: 120, Duration: 3 * time.Second, TopK: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	if rep.Errors != 0 || !rep.Held || rep.OK != 360 {
		t.Errorf("load test not held: %v", rep)
	}
	if rep.P99 > time.Second {
		t.Errorf("p99 %v > 1 s", rep.P99)
	}
}
