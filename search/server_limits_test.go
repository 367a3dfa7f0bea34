package search

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// bigRetriever answers every query with k hits of size bytes of contents.
type bigRetriever struct {
	size  int
	delay time.Duration
}

func (b bigRetriever) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	if b.delay > 0 {
		select {
		case <-time.After(b.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	text := strings.Repeat("x", b.size)
	out := make([][]Hit, len(queries))
	for i := range out {
		for j := 0; j < k; j++ {
			out[i] = append(out[i], Hit{Doc: Doc{ID: fmt.Sprint(j), Contents: text}, Score: 1})
		}
	}
	return out, nil
}

func postRetrieve(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url+"/retrieve", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestServerLimits: each cap answers with its status and names its limit.
func TestServerLimits(t *testing.T) {
	// queries × topk and response bytes.
	_, ts := newTestServer(t, bigRetriever{size: 1000}, func(c *ServerConfig) { c.MaxResults = 500; c.MaxResponseBytes = 50_000 })
	if resp, body := postRetrieve(t, ts.URL, `{"queries": ["a","b","c","d","e","f"], "topk": 100}`); resp.StatusCode != 400 || !strings.Contains(body, "max_results") {
		t.Errorf("600 results: %d %s", resp.StatusCode, body)
	}
	if resp, body := postRetrieve(t, ts.URL, `{"queries": ["a"], "topk": 100}`); resp.StatusCode != 413 || !strings.Contains(body, "max_response_bytes") {
		t.Errorf("100 kB response: %d %s", resp.StatusCode, body)
	}
	if resp, body := postRetrieve(t, ts.URL, `{"queries": ["a"], "topk": 10}`); resp.StatusCode != 200 || len(body) < 10_000 {
		t.Errorf("10 kB response: %d (%d bytes)", resp.StatusCode, len(body))
	}

	// In-flight requests: the second concurrent one is a 503 with Retry-After.
	s, ts2 := newTestServer(t, bigRetriever{size: 10, delay: 300 * time.Millisecond}, func(c *ServerConfig) { c.MaxInFlight = 1; c.RetryAfter = 2 * time.Second })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); postRetrieve(t, ts2.URL, `{"queries": ["slow"]}`) }()
	time.Sleep(100 * time.Millisecond)
	resp, body := postRetrieve(t, ts2.URL, `{"queries": ["a"]}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(body, "max_in_flight") {
		t.Errorf("second in-flight request: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	wg.Wait()
	if h := s.Health(); h.Rejected != 1 {
		t.Errorf("rejected %d, want 1", h.Rejected)
	}
}

// TestServeConnectionCap: beyond MaxConns open connections, a new one is
// answered 503 with Retry-After and closed; once one closes, service resumes.
func TestServeConnectionCap(t *testing.T) {
	cfg := DefaultServerConfig()
	cfg.MaxConns = 2
	_, addr, cancel, _ := serveLoopback(t, &fakeRetriever{}, cfg, time.Second)
	defer cancel()
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	time.Sleep(50 * time.Millisecond) // let the server accept them
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("third connection: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), "max_conns") {
		t.Errorf("third connection: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	held[0].Close()
	time.Sleep(50 * time.Millisecond)
	if resp, _ := postRetrieve(t, "http://"+addr, `{"queries": ["a"]}`); resp.StatusCode != 200 {
		t.Errorf("after a connection closed: %d", resp.StatusCode)
	}
	held[1].Close()
}

// TestServerDropsNonReader: a client that sends a request with a large
// answer and never reads it is dropped after the write timeout, freeing
// its in-flight slot.
func TestServerDropsNonReader(t *testing.T) {
	cfg := DefaultServerConfig()
	cfg.WriteTimeout = 200 * time.Millisecond
	cfg.MaxInFlight = 1
	s, addr, cancel, _ := serveLoopback(t, bigRetriever{size: 2000}, cfg, time.Second)
	defer cancel()
	tcpAddr, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTCP("tcp", nil, tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadBuffer(4096)
	body := `{"queries": [` + strings.Repeat(`"q",`, 99) + `"q"], "topk": 100}` // 20 MB of hits
	fmt.Fprintf(c, "POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// While it is stuck, the single in-flight slot is taken; after the
	// write timeout it is free again.
	time.Sleep(100 * time.Millisecond)
	if resp, body := postRetrieve(t, "http://"+addr, `{"queries": ["a"], "topk": 1}`); resp.StatusCode != 503 {
		t.Fatalf("while the non-reader holds the only slot: %d %s, want 503", resp.StatusCode, body)
	}
	start := time.Now()
	deadline := start.Add(5 * time.Second)
	for {
		resp, _ := postRetrieve(t, "http://"+addr, `{"queries": ["a"], "topk": 1}`)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the non-reading client still holds the server after 5 s (status %d)", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("non-reading client dropped; slot free again %v after the first 503", time.Since(start).Round(time.Millisecond))
	if h := s.Health(); h.Errors < 2 {
		t.Errorf("health %+v: the dropped response should count as an error", h)
	}
}

// TestFairQueueInterleaves: a large request is handed out FairChunk queries
// at a time, and a small request queued behind it is in the first batch.
func TestFairQueueInterleaves(t *testing.T) {
	q := newFairQueue(48, 256, 10, 1, 1024) // 48 results: 16 queries of topk 3
	big := &retrieveJob{ctx: context.Background(), queries: make([]string, 1000), k: 3, done: make(chan jobResult, 1)}
	small := &retrieveJob{ctx: context.Background(), queries: []string{"a"}, k: 3, done: make(chan jobResult, 1)}
	if err := q.push(big); err != nil {
		t.Fatal(err)
	}
	if err := q.push(small); err != nil {
		t.Fatal(err)
	}
	batch, n, large := q.take(nil, 0, false)
	if n != 17 || len(batch) != 2 || batch[0].job != big || batch[0].hi != 16 || batch[1].job != small || !large {
		t.Fatalf("first batch %+v (%d queries, large %v), want 16 of the big request and the small one", batch, n, large)
	}
	// While that batch runs, the one large-batch slot is taken: another
	// worker gets no slice of the big request, but does get a new small one.
	small2 := &retrieveJob{ctx: context.Background(), queries: []string{"b", "c"}, k: 3, done: make(chan jobResult, 1)}
	if err := q.push(small2); err != nil {
		t.Fatal(err)
	}
	if b, n, l := q.take(nil, 0, false); n != 2 || len(b) != 1 || b[0].job != small2 || l {
		t.Fatalf("second worker's batch %+v (%d queries, large %v), want only the new small request", b, n, l)
	}
	q.doneLarge()
	q.finish(batch[1], [][]Hit{{}}, nil)
	select {
	case r := <-small.done:
		if r.err != nil || len(r.hits) != 1 {
			t.Fatalf("small: %+v", r)
		}
	default:
		t.Fatal("the small request was not answered after its slice")
	}
	q.finish(batch[0], make([][]Hit, 16), nil)
	// The rest of the big request: 984 queries in slices of 16, one per take.
	for taken := 16; taken < 1000; {
		b, n, l := q.take(nil, 0, false)
		if len(b) != 1 || n > 16 || !l {
			t.Fatalf("batch %+v (large %v)", b, l)
		}
		q.doneLarge()
		taken += n
		q.finish(b[0], make([][]Hit, n), nil)
	}
	if r := <-big.done; r.err != nil || len(r.hits) != 1000 {
		t.Fatalf("big: %d hits, %v", len(r.hits), r.err)
	}
}

// TestFairQueueTopK: a large request of topk 100 is not mixed into a batch
// of topk-3 requests, and goes first in the next batch so that one worker
// cannot starve it.
func TestFairQueueTopK(t *testing.T) {
	q := newFairQueue(1, 256, 10, 1, 1024) // 1 result: one query of any topk
	big := &retrieveJob{ctx: context.Background(), queries: make([]string, 100), k: 100, done: make(chan jobResult, 1)}
	small := &retrieveJob{ctx: context.Background(), queries: []string{"a"}, k: 3, done: make(chan jobResult, 1)}
	q.push(small)
	q.push(big)
	if b, n, l := q.take(nil, 0, false); n != 1 || b[0].job != small || l {
		t.Fatalf("first batch %+v (large %v), want the small request alone", b, l)
	}
	small2 := &retrieveJob{ctx: context.Background(), queries: []string{"b"}, k: 3, done: make(chan jobResult, 1)}
	q.push(small2)
	b, n, l := q.take(nil, 0, false)
	if n != 2 || b[0].job != big || b[0].hi != 1 || b[1].job != small2 || !l {
		t.Fatalf("second batch %+v (large %v), want one query of the large request first, then the new small one", b, l)
	}
}

// TestClientHonoursRetryAfter: a 503 with Retry-After: 1 makes the client
// wait a second (not its 100 ms backoff) before retrying.
func TestClientHonoursRetryAfter(t *testing.T) {
	var calls int
	var first time.Time
	var gap time.Duration
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			first = time.Now()
			w.Header().Set("Retry-After", "1")
			writeJSONError(w, http.StatusServiceUnavailable, "busy")
			return
		}
		gap = time.Since(first)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"result": [[{"document": {"id": "1", "contents": "x"}, "score": 1}]]}`)
	}))
	defer ts.Close()
	hits, err := NewClient(ts.URL).Retrieve(context.Background(), []string{"q"}, 1)
	if err != nil || len(hits) != 1 {
		t.Fatalf("%v %v", hits, err)
	}
	if calls != 2 || gap < 900*time.Millisecond {
		t.Errorf("%d calls, retried after %v, want 2 calls and about 1 s", calls, gap)
	}
}
