package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRetriever answers query q with k hits whose ids are "q#j" and scores
// k−j, optionally sleeping, and panics on the query "boom".
type fakeRetriever struct {
	delay   time.Duration
	mu      sync.Mutex
	batches []int
}

func (f *fakeRetriever) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	f.mu.Lock()
	f.batches = append(f.batches, len(queries))
	f.mu.Unlock()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := make([][]Hit, len(queries))
	for i, q := range queries {
		if q == "boom" {
			panic("boom")
		}
		if q == "fail" {
			return nil, errors.New("backend failure")
		}
		for j := 0; j < k; j++ {
			id := fmt.Sprintf("%s#%d", q, j)
			out[i] = append(out[i], Hit{Doc: Doc{ID: id, Contents: "\"T\"\n" + id, Title: "T", Text: id}, Score: float32(k - j)})
		}
	}
	return out, nil
}

func newTestServer(t *testing.T, r Retriever, mod func(*ServerConfig)) (*Server, *httptest.Server) {
	t.Helper()
	cfg := DefaultServerConfig()
	cfg.Kind, cfg.Docs = "fake", 7
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewServer(r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	return s, ts
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestServerStatusCodes(t *testing.T) {
	_, ts := newTestServer(t, &fakeRetriever{}, func(c *ServerConfig) { c.MaxBodyBytes = 1024; c.MaxQueries = 4; c.MaxResults = 200 })
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"ok", "POST", "/retrieve", `{"queries": ["a"], "topk": 2, "return_scores": true}`, 200},
		{"default topk", "POST", "/retrieve", `{"queries": ["a"]}`, 200},
		{"null topk", "POST", "/retrieve", `{"queries": ["a"], "topk": null}`, 200},
		{"integral float topk", "POST", "/retrieve", `{"queries": ["a"], "topk": 3.0}`, 200},
		{"empty queries", "POST", "/retrieve", `{"queries": []}`, 200},
		{"unknown field", "POST", "/retrieve", `{"queries": ["a"], "extra": 1}`, 400},
		{"key case", "POST", "/retrieve", `{"queriEs": ["a"]}`, 400},
		{"duplicate key", "POST", "/retrieve", `{"queries": ["a"], "queries": ["b"]}`, 400},
		{"escaped key", "POST", "/retrieve", `{"quer\u0069es": ["a"]}`, 200},
		{"results cap", "POST", "/retrieve", `{"queries": ["a","b","c"], "topk": 90}`, 400},
		{"GET retrieve", "GET", "/retrieve", ``, 405},
		{"malformed", "POST", "/retrieve", `{"queries": [`, 400},
		{"not an object", "POST", "/retrieve", `[1, 2]`, 400},
		{"empty body", "POST", "/retrieve", ``, 400},
		{"missing queries", "POST", "/retrieve", `{"topk": 3}`, 400},
		{"null queries", "POST", "/retrieve", `{"queries": null}`, 400},
		{"queries string", "POST", "/retrieve", `{"queries": "a"}`, 400},
		{"non-string query", "POST", "/retrieve", `{"queries": ["a", 3]}`, 400},
		{"topk 0", "POST", "/retrieve", `{"queries": ["a"], "topk": 0}`, 400},
		{"topk negative", "POST", "/retrieve", `{"queries": ["a"], "topk": -2}`, 400},
		{"topk too large", "POST", "/retrieve", `{"queries": ["a"], "topk": 101}`, 400},
		{"topk fraction", "POST", "/retrieve", `{"queries": ["a"], "topk": 2.5}`, 400},
		{"topk string", "POST", "/retrieve", `{"queries": ["a"], "topk": "3"}`, 400},
		{"return_scores string", "POST", "/retrieve", `{"queries": ["a"], "return_scores": "yes"}`, 400},
		{"trailing data", "POST", "/retrieve", `{"queries": ["a"]} {}`, 400},
		{"too many queries", "POST", "/retrieve", `{"queries": ["a","b","c","d","e"]}`, 400},
		{"body too large", "POST", "/retrieve", `{"queries": ["` + strings.Repeat("x", 2000) + `"]}`, 413},
		{"backend error", "POST", "/retrieve", `{"queries": ["fail"]}`, 500},
		{"panic", "POST", "/retrieve", `{"queries": ["boom"]}`, 500},
		{"after panic", "POST", "/retrieve", `{"queries": ["a"]}`, 200},
		{"health", "GET", "/health", ``, 200},
		{"health POST", "POST", "/health", ``, 405},
		{"unknown path", "GET", "/search", ``, 404},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d (body %s)", tc.name, resp.StatusCode, tc.status, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Errorf("%s: body is not a JSON object: %s", tc.name, body)
			continue
		}
		if _, ok := obj["error"]; (tc.status >= 400) != ok {
			t.Errorf("%s: status %d with body %s", tc.name, tc.status, body)
		}
	}
}

// TestServerAPIShape checks Search-R1's response layout on the real BM25
// index: with scores a list of {"document": {"id", "contents"}, "score"}
// per query, without scores the documents alone.
func TestServerAPIShape(t *testing.T) {
	r := openBM25_10k(t)
	_, ts := newTestServer(t, r, nil)
	queries := []string{"who played bat masterson in the movie tombstone", "who told the story of the prodigal son"}
	want, err := r.Retrieve(context.Background(), queries, 4)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"queries": queries, "topk": 4, "return_scores": true})
	status, raw := post(t, ts.URL+"/retrieve", string(body))
	if status != 200 {
		t.Fatalf("status %d: %s", status, raw)
	}
	var scored struct {
		Result [][]struct {
			Document map[string]any `json:"document"`
			Score    float32        `json:"score"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &scored); err != nil {
		t.Fatal(err)
	}
	if len(scored.Result) != 2 {
		t.Fatalf("%d result lists, want 2", len(scored.Result))
	}
	for i, list := range scored.Result {
		if len(list) != 4 {
			t.Fatalf("query %d: %d hits, want 4", i, len(list))
		}
		for j, h := range list {
			if len(h.Document) != 2 || h.Document["id"] != want[i][j].Doc.ID || h.Document["contents"] != want[i][j].Doc.Contents || h.Score != want[i][j].Score {
				t.Errorf("query %d hit %d: %v %v, want id %s score %v", i, j, h.Document["id"], h.Score, want[i][j].Doc.ID, want[i][j].Score)
			}
		}
	}
	status, raw = post(t, ts.URL+"/retrieve", `{"queries": ["who played bat masterson in the movie tombstone"]}`)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	var plain struct {
		Result [][]map[string]any `json:"result"`
	}
	if err := json.Unmarshal(raw, &plain); err != nil {
		t.Fatal(err)
	}
	if len(plain.Result) != 1 || len(plain.Result[0]) != 3 {
		t.Fatalf("default topk: got %d lists / %d hits, want 1 / 3", len(plain.Result), len(plain.Result[0]))
	}
	for _, d := range plain.Result[0] {
		if len(d) != 2 || d["id"] == nil || d["contents"] == nil {
			t.Errorf("document without scores = %v, want exactly id and contents", d)
		}
	}
	if plain.Result[0][0]["id"] != want[0][0].Doc.ID {
		t.Errorf("top id %v, want %s", plain.Result[0][0]["id"], want[0][0].Doc.ID)
	}
}

// TestServerBatching sends concurrent requests to one slow worker: they are
// answered in fewer Retrieve calls, each with its own queries and topk.
func TestServerBatching(t *testing.T) {
	f := &fakeRetriever{delay: 30 * time.Millisecond}
	s, ts := newTestServer(t, f, func(c *ServerConfig) { c.Workers = 1 })
	const n = 24
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k := 1 + i%4
			q := fmt.Sprintf("q%d", i)
			body := fmt.Sprintf(`{"queries": [%q, %q], "topk": %d, "return_scores": true}`, q, q+"b", k)
			resp, err := http.Post(ts.URL+"/retrieve", "application/json", strings.NewReader(body))
			if err != nil {
				bad.Add(1)
				return
			}
			defer resp.Body.Close()
			var out struct {
				Result [][]struct {
					Document apiDocument `json:"document"`
				} `json:"result"`
			}
			if json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Result) != 2 || len(out.Result[0]) != k || out.Result[0][0].Document.ID != q+"#0" || out.Result[1][k-1].Document.ID != fmt.Sprintf("%sb#%d", q, k-1) {
				bad.Add(1)
			}
		}(i)
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d requests got wrong answers", bad.Load())
	}
	f.mu.Lock()
	calls := len(f.batches)
	f.mu.Unlock()
	if calls >= n {
		t.Errorf("%d requests took %d Retrieve calls: no batching", n, calls)
	}
	if h := s.Health(); h.Requests != n || h.Queries != 2*n || h.Errors != 0 || h.Batches != int64(calls) {
		t.Errorf("health counters %+v (calls %d)", h, calls)
	}
	t.Logf("%d requests answered in %d batches", n, calls)
}

func TestServerTimeoutAndOverload(t *testing.T) {
	f := &fakeRetriever{delay: 300 * time.Millisecond}
	_, ts := newTestServer(t, f, func(c *ServerConfig) {
		c.Timeout = 50 * time.Millisecond
		c.Workers = 1
		c.QueueSize = 1
		c.MaxBatch = 1
	})
	codes := make(chan int, 6)
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, err := http.Post(ts.URL+"/retrieve", "application/json", strings.NewReader(fmt.Sprintf(`{"queries": ["q%d"]}`, i)))
			if err != nil {
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}(i)
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503 (timeout or overload)", c)
		}
	}
	resp, err := http.Get(ts.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("server unhealthy after timeouts: %v", err)
	}
	resp.Body.Close()
}

// TestServerGracefulShutdown: cancelling Serve's context lets an in-flight
// request finish, then stops accepting.
func TestServerGracefulShutdown(t *testing.T) {
	f := &fakeRetriever{delay: 200 * time.Millisecond}
	s, addr, cancel, done := serveLoopback(t, f, DefaultServerConfig(), 5*time.Second)
	url := "http://" + addr
	got := make(chan int, 1)
	go func() {
		resp, err := http.Post(url+"/retrieve", "application/json", strings.NewReader(`{"queries": ["slow"]}`))
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if code := <-got; code != 200 {
		t.Errorf("in-flight request: status %d, want 200", code)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := http.Post(url+"/retrieve", "application/json", strings.NewReader(`{"queries": ["a"]}`)); err == nil {
		t.Error("server still accepts after shutdown")
	}
	if _, err := s.Search(context.Background(), []string{"a"}, 1); err == nil {
		t.Error("Search after shutdown: want an error")
	}
}

// TestServerConfigValidate: each limit out of range is refused with a
// message naming it and its value; the first bad one in the order below
// wins; the defaults pass and RetryAfter is raised to a second.
func TestServerConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		set  func(*ServerConfig)
		want string
	}{
		{func(c *ServerConfig) { c.MaxTopK = 0 }, "server: max topk 0 < 1"},
		{func(c *ServerConfig) { c.DefaultTopK = 101 }, "server: default topk 101 outside [1, 100]"},
		{func(c *ServerConfig) { c.MaxQueries = -2 }, "server: max queries -2 < 1"},
		{func(c *ServerConfig) { c.MaxResults = -1 }, "server: max results -1 < 0"},
		{func(c *ServerConfig) { c.MaxBodyBytes = 63 }, "server: body limit 63 bytes is too small"},
		{func(c *ServerConfig) { c.Timeout = 0 }, "server: timeout 0s ≤ 0"},
		{func(c *ServerConfig) { c.MaxBatch = 0 }, "server: max batch 0 < 1"},
		{func(c *ServerConfig) { c.QueueSize = 0 }, "server: queue size 0 < 1"},
		{func(c *ServerConfig) { c.BatchWindow = -time.Millisecond }, "server: batch window -1ms < 0"},
		{func(c *ServerConfig) { c.MaxResponseBytes = 10 }, "server: response limit 10 bytes is too small"},
		{func(c *ServerConfig) { c.WriteTimeout = -time.Second }, "server: write timeout -1s ≤ 0"},
		{func(c *ServerConfig) { c.MaxInFlight = 0 }, "server: max in-flight requests 0 < 1"},
		{func(c *ServerConfig) { c.MaxConns = -1 }, "server: max connections -1 < 0"},
		{func(c *ServerConfig) { c.MaxLargeInFlight = 0 }, "server: large requests (> 4096 results) limited to 0 in flight: both must be ≥ 1"},
		{func(c *ServerConfig) { c.LargeResults = 0 }, "server: large requests (> 0 results) limited to 16 in flight: both must be ≥ 1"},
		{func(c *ServerConfig) { c.FairChunkResults = 0 }, "server: fair chunk of 0 results < 1"},
		{func(c *ServerConfig) { c.QueueSize, c.MaxQueries = 0, 0 }, "server: max queries 0 < 1"},
	} {
		c := DefaultServerConfig()
		tc.set(&c)
		if err := c.validate(); err == nil || err.Error() != tc.want {
			t.Errorf("validate() = %v, want %q", err, tc.want)
		}
	}
	c := DefaultServerConfig()
	c.RetryAfter = 0
	if err := c.validate(); err != nil || c.RetryAfter != time.Second {
		t.Errorf("defaults: %v, RetryAfter %v", err, c.RetryAfter)
	}
}

func FuzzDecodeRetrieveRequest(f *testing.F) {
	for _, s := range []string{
		`{"queries": ["a", "b"], "topk": 3, "return_scores": true}`,
		`{"queries": []}`, `{"queries": null}`, `{"topk": 1e400}`, `{"queries": ["a"], "topk": -0}`,
		`{"queries": ["\u0000"], "topk": 100}`, `{"queries": ["a"]} x`, `{"queriEs":[]}`, `{"queries":[],"queries":[]}`, `"str"`, ``, `{"queries": ["a"], "topk": 9007199254740993}`,
	} {
		f.Add([]byte(s))
	}
	cfg := DefaultServerConfig()
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeRetrieveRequest(b, cfg)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) || re.Status != 400 {
				t.Fatalf("error %v is not a 400 RequestError", err)
			}
			return
		}
		if req.Queries == nil || len(req.Queries) > cfg.MaxQueries || req.TopK < 1 || req.TopK > cfg.MaxTopK {
			t.Fatalf("accepted invalid request %+v from %q", req, b)
		}
		// Accepted: the body is one object whose keys are exactly the API's,
		// each once, with "queries" among them.
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(b, &keys); err != nil {
			t.Fatalf("accepted %q that encoding/json rejects: %v", b, err)
		}
		if _, ok := keys["queries"]; !ok {
			t.Fatalf("accepted a body without an exact \"queries\" key: %q", b)
		}
		for k := range keys {
			if k != "queries" && k != "topk" && k != "return_scores" {
				t.Fatalf("accepted unknown key %q in %q", k, b)
			}
		}
		if len(req.Queries)*req.TopK > cfg.MaxResults {
			t.Fatalf("accepted %d×%d results over the cap %d", len(req.Queries), req.TopK, cfg.MaxResults)
		}
	})
}

// BenchmarkServerRoundTrip measures one single-query /retrieve call through
// HTTP (client encode, server decode, batching queue, BM25 top-3, response)
// over the 10k-passage index.
func BenchmarkServerRoundTrip(b *testing.B) {
	r := openBM25_10k(b)
	s, err := NewServer(r, DefaultServerConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	c := NewClient(ts.URL)
	queries := []string{"who played bat masterson in the movie tombstone"}
	for b.Loop() {
		if _, err := c.Retrieve(context.Background(), queries, 3); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRetrieveRequest(b *testing.B) {
	body := []byte(`{"queries": ["who played bat masterson in the movie tombstone", "who told the story of the prodigal son"], "topk": 3, "return_scores": true}`)
	cfg := DefaultServerConfig()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodeRetrieveRequest(body, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeRetrieveRequestNamesKeys checks that strict decoding names the
// offending key and the limit in its messages.
func TestDecodeRetrieveRequestNamesKeys(t *testing.T) {
	cfg := DefaultServerConfig()
	tests := []struct{ body, want string }{
		{`{"queriEs": ["a"]}`, `unknown key "queriEs"`},
		{`{"queries": ["a"], "topK": 3}`, `unknown key "topK"`},
		{`{"queries": ["a"], "topk": 3, "topk": 4}`, `duplicate key "topk"`},
		{`{"queries": ["a"], "queries": ["a"]}`, `duplicate key "queries"`},
		{`{"queries": [` + strings.Repeat(`"q",`, 200) + `"q"], "topk": 100}`, `max_results`},
		{`["a"]`, `want an object, got an array`},
		{`"a"`, `want an object, got a string`},
	}
	for _, tc := range tests {
		_, err := DecodeRetrieveRequest([]byte(tc.body), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.40s: error %v, want it to contain %q", tc.body, err, tc.want)
		}
	}
}

func TestServerRequiresJSONContentType(t *testing.T) {
	_, ts := newTestServer(t, &fakeRetriever{}, nil)
	for ct, want := range map[string]int{
		"application/json": 200, "application/json; charset=utf-8": 200,
		"": 415, "application/x-www-form-urlencoded": 415, "text/plain": 415,
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/retrieve", strings.NewReader(`{"queries": ["a"]}`))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Content-Type %q: status %d, want %d", ct, resp.StatusCode, want)
		}
	}
}

// serveLoopback starts a Server over r on a free loopback port, draining
// for at most drain on shutdown. It returns the server, its address, the
// cancel that shuts it down and the channel that receives Serve's result.
func serveLoopback(t *testing.T, r Retriever, cfg ServerConfig, drain time.Duration) (*Server, string, context.CancelFunc, <-chan error) {
	t.Helper()
	s, err := NewServer(r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, drain) }()
	return s, ln.Addr().String(), cancel, done
}
