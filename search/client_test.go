package search

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientRoundTrip: hits through HTTP equal in-process hits exactly.
func TestClientRoundTrip(t *testing.T) {
	r := openBM25_10k(t)
	_, ts := newTestServer(t, r, nil)
	c := NewClient(ts.URL + "/")
	queries := []string{"who played bat masterson in the movie tombstone", "what is the name of the weapon the grim reaper carries", "zzzzqqqq"}
	want, err := r.Retrieve(context.Background(), queries, 5)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Retrieve(context.Background(), queries, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d lists, want %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("query %d: %d hits, want %d", i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Errorf("query %d hit %d: %+v, want %+v", i, j, got[i][j], want[i][j])
			}
		}
	}
	if len(got[2]) != 0 {
		t.Errorf("a query without matches got %d hits", len(got[2]))
	}
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "ok" || h.Docs != 7 {
		t.Errorf("health %+v, %v", h, err)
	}
	if _, err := c.Retrieve(context.Background(), queries, 0); err == nil {
		t.Error("k = 0: want an error")
	}
	if hits, err := c.Retrieve(context.Background(), nil, 3); err != nil || len(hits) != 0 {
		t.Errorf("no queries: %v, %v", hits, err)
	}
}

func TestClientRetry(t *testing.T) {
	tests := []struct {
		name     string
		failures int32 // leading 503s
		status   int   // status of those failures
		retries  int
		wantErr  bool
		attempts int32
	}{
		{"succeeds after two 503s", 2, http.StatusServiceUnavailable, 2, false, 3},
		{"gives up after retries", 5, http.StatusServiceUnavailable, 2, true, 3},
		{"429 is retried", 1, http.StatusTooManyRequests, 1, false, 2},
		{"400 is not retried", 5, http.StatusBadRequest, 3, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewServer(&fakeRetriever{}, DefaultServerConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var calls atomic.Int32
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) <= tc.failures {
					writeJSONError(w, tc.status, "try again")
					return
				}
				s.Handler().ServeHTTP(w, r)
			}))
			defer ts.Close()
			c := NewClient(ts.URL)
			c.Retries, c.Backoff = tc.retries, time.Millisecond
			hits, err := c.Retrieve(context.Background(), []string{"a"}, 2)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && (len(hits) != 1 || hits[0][0].Doc.ID != "a#0" || hits[0][0].Doc.Title != "T") {
				t.Errorf("hits %+v", hits)
			}
			var se *StatusError
			if tc.wantErr && (!errors.As(err, &se) || se.Status != tc.status || se.Msg != "try again") {
				t.Errorf("error %v does not carry status %d and the server's message", err, tc.status)
			}
			if calls.Load() != tc.attempts {
				t.Errorf("%d attempts, want %d", calls.Load(), tc.attempts)
			}
		})
	}
}

func TestClientTimeout(t *testing.T) {
	_, ts := newTestServer(t, &fakeRetriever{delay: 2 * time.Second}, nil)
	c := NewClient(ts.URL)
	c.Timeout, c.Retries, c.Backoff = 50*time.Millisecond, 1, time.Millisecond
	start := time.Now()
	if _, err := c.Retrieve(context.Background(), []string{"a"}, 1); err == nil {
		t.Fatal("want a timeout error")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("two 50 ms attempts took %v", d)
	}
	// A dead server fails fast with a transport error.
	dead := NewClient("http://127.0.0.1:1")
	dead.Retries, dead.Backoff = 1, time.Millisecond
	if _, err := dead.Retrieve(context.Background(), []string{"a"}, 1); err == nil {
		t.Error("dead server: want an error")
	}
}

// FuzzDecodeRetrieveResponse: any server answer gives one hit list per
// query, every hit with its contents, or an error; never a panic.
func FuzzDecodeRetrieveResponse(f *testing.F) {
	for _, s := range []string{
		`{"result": [[{"document": {"id": "7", "contents": "\"T\"\nbody"}, "score": 1.5}]]}`,
		`{"result": [[{"document": {"id": 7, "contents": "x"}, "score": 1}], []]}`,
		`{"result": [[{"document": {"id": null, "contents": null}}]]}`,
		`{"result": [[{"document": {"id": 1e400, "contents": "x"}}]]}`,
		`{"result": null}`, `{"result": [[null]]}`, `[]`, `{"error": "x"}`, ``,
	} {
		f.Add([]byte(s), 1)
	}
	f.Fuzz(func(t *testing.T, raw []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		hits, err := DecodeRetrieveResponse(raw, n)
		if err != nil {
			return
		}
		if len(hits) != n {
			t.Fatalf("%d hit lists for %d queries", len(hits), n)
		}
		for _, hs := range hits {
			for _, h := range hs {
				if h.Doc.Title != "" && !strings.Contains(h.Doc.Contents, h.Doc.Title) {
					t.Fatalf("title %q not in contents %q", h.Doc.Title, h.Doc.Contents)
				}
			}
		}
	})
}
