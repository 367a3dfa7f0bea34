package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/search"
)

// bm25TestFolder builds a BM25 folder over a shared corpus in t.TempDir().
func bm25TestFolder(t *testing.T, corpusFile string) string {
	t.Helper()
	corpus := sharedtest.Path(t, "data", "corpus", corpusFile)
	dir := t.TempDir()
	if _, err := search.BuildBM25Folder(context.Background(), corpus, dir, search.DefaultBM25BuildOptions()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// syncBuffer is a goroutine-safe stderr capture.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeCmd starts `cas serve` on an ephemeral port, queries it, and stops
// it with a real SIGTERM: in-flight work finishes and the command returns nil.
func TestServeCmd(t *testing.T) {
	dir := bm25TestFolder(t, "wiki18_harvested_10k.jsonl")
	root := newRootCmd()
	var stderr syncBuffer
	root.SetArgs([]string{"serve", "--index", dir, "--addr", "127.0.0.1:0", "--topk", "2"})
	root.SetOut(io.Discard)
	root.SetErr(&stderr)
	done := make(chan error, 1)
	go func() { done <- root.Execute() }()
	re := regexp.MustCompile(`on http://(127\.0\.0\.1:\d+)`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited early: %v (%s)", err, stderr.String())
		default:
		}
	}
	if addr == "" {
		t.Fatalf("server did not start: %s", stderr.String())
	}
	c := search.NewClient("http://" + addr)
	hits, err := c.Retrieve(context.Background(), []string{"who played bat masterson in the movie tombstone"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || len(hits[0]) != 3 || hits[0][0].Doc.Title != "Mason Alan Dinehart" {
		t.Errorf("hits %+v", hits)
	}
	resp, err := http.Post("http://"+addr+"/retrieve", "application/json", strings.NewReader(`{"queries": ["bat masterson television series"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var plain struct {
		Result [][]map[string]any `json:"result"`
	}
	json.NewDecoder(resp.Body).Decode(&plain)
	resp.Body.Close()
	if len(plain.Result) != 1 || len(plain.Result[0]) != 2 {
		t.Errorf("--topk 2 default not applied: %v", plain.Result)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	if !strings.Contains(stderr.String(), "stopped after 2 requests") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

func TestServeCmdErrors(t *testing.T) {
	small := bm25TestFolder(t, "wiki18_sample_1k.jsonl")
	for _, args := range [][]string{
		{"serve"},
		{"serve", "--index", t.TempDir()},
		{"serve", "--index", small, "--max-topk", "0"},
		{"serve", "--index", small, "--addr", "256.0.0.1:1"},
	} {
		if _, _, err := runCas(t, args...); err == nil {
			t.Errorf("%q: want an error", args)
		}
	}
}

// TestCalibrateAPSCmd runs `cas calibrate aps` on NQ over the 10k BM25
// folder and checks the written JSON.
func TestCalibrateAPSCmd(t *testing.T) {
	dir := bm25TestFolder(t, "wiki18_harvested_10k.jsonl")
	qa := sharedtest.Path(t, "data", "qa", "nq_test_1k.jsonl")
	out := filepath.Join(t.TempDir(), "qhat.json")
	_, stderr, err := runCas(t, "calibrate", "aps", "--qa", qa, "--index", dir, "--candidates", "20", "--alpha", "0.2",
		"--n", "150", "--test", "300", "--seed", "3", "--gold-only", "--temperature", "1", "--no-progress", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("%s: mode %v, want 0644 (shareable)", out, st.Mode().Perm())
	}
	var rep struct {
		QHat         float64 `json:"qhat"`
		N            int     `json:"n"`
		Alpha        float64 `json:"alpha"`
		Coverage     float64 `json:"coverage"`
		CoverageKept float64 `json:"coverage_kept"`
		MeanKept     float64 `json:"mean_kept"`
		Histogram    []int   `json:"kept_histogram"`
		Test         int     `json:"test"`
		Fixed        struct {
			K        int     `json:"k"`
			MeanKept float64 `json:"mean_kept"`
		} `json:"fixed"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.N != 150 || rep.Alpha != 0.2 || rep.Test != 300 || rep.QHat <= 0 || rep.QHat > 1 ||
		rep.Coverage < 0.7 || rep.MeanKept < 1 || rep.MeanKept > 5 || rep.Fixed.K != 3 || rep.Fixed.MeanKept != 3 {
		t.Errorf("report %s", raw)
	}
	if !strings.Contains(stderr, "APS") || !strings.Contains(stderr, "top-3") {
		t.Errorf("summary missing: %s", stderr)
	}
	for _, args := range [][]string{
		{"calibrate", "aps", "--index", dir},
		{"calibrate", "aps", "--qa", qa},
		{"calibrate", "aps", "--qa", qa, "--index", dir, "--retriever", "http://127.0.0.1:1"},
		{"calibrate", "aps", "--qa", qa, "--index", dir, "--alpha", "1.5"},
		{"calibrate", "aps", "--qa", qa, "--index", dir, "--n", "5000"},
		{"calibrate", "aps", "--qa", qa, "--index", dir, "--preset", "nope"},
		{"calibrate", "aps", "--qa", filepath.Join(t.TempDir(), "missing.jsonl"), "--index", dir},
	} {
		if _, _, err := runCas(t, append(args, "--no-progress")...); err == nil {
			t.Errorf("%q: want an error", args)
		}
	}
}
