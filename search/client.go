package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client calls a Search-R1-compatible retrieval server (this package's
// Server or Search-R1's Python one) and implements Retriever.
type Client struct {
	// BaseURL is the server root, e.g. "http://127.0.0.1:8000".
	BaseURL string
	// HTTP is the client used (nil: a client with keep-alive pooling).
	HTTP *http.Client
	// Timeout bounds each attempt (paper: 30 s).
	Timeout time.Duration
	// Retries is the number of extra attempts after a transport error, a
	// 5xx or a 429; a 4xx other than 429 is never retried.
	Retries int
	// Backoff is the wait before the first retry; it doubles each time. A
	// 503 or 429 with Retry-After waits that long instead when longer (at
	// most MaxRetryAfter).
	Backoff       time.Duration
	MaxRetryAfter time.Duration
	// MaxResponseBytes bounds a response body.
	MaxResponseBytes int64
}

// NewClient returns a client with the paper's 30 s timeout, 2 retries and
// 100 ms initial backoff.
func NewClient(baseURL string) *Client {
	return &Client{
		BaseURL:          strings.TrimRight(baseURL, "/"),
		HTTP:             &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}},
		Timeout:          30 * time.Second,
		Retries:          2,
		Backoff:          100 * time.Millisecond,
		MaxRetryAfter:    10 * time.Second,
		MaxResponseBytes: 256 << 20,
	}
}

// StatusError is a non-2xx answer from the server.
type StatusError struct {
	Status int
	Msg    string
	// RetryAfter is the server's Retry-After (0 when absent).
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("retrieval server: HTTP %d: %s", e.Status, e.Msg)
}

func (e *StatusError) retryable() bool {
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests
}

// Retrieve posts {"queries", "topk": k, "return_scores": true} to /retrieve
// and decodes the hits (title and text split from contents).
func (c *Client) Retrieve(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	if k < 1 {
		return nil, fmt.Errorf("retrieve: k = %d, want ≥ 1", k)
	}
	if len(queries) == 0 {
		return [][]Hit{}, nil
	}
	body, err := json.Marshal(map[string]any{"queries": queries, "topk": k, "return_scores": true})
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodPost, "/retrieve", body, &raw); err != nil {
		return nil, err
	}
	return DecodeRetrieveResponse(raw, len(queries))
}

// DecodeRetrieveResponse parses a /retrieve response with scores
// ({"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}) for
// nQueries queries into hits (title and text split from contents). A wrong
// number of result lists, a hit without contents or a malformed id is an
// error naming the query and hit; it never panics.
func DecodeRetrieveResponse(raw []byte, nQueries int) ([][]Hit, error) {
	var resp struct {
		Result [][]struct {
			Document struct {
				ID       json.RawMessage `json:"id"`
				Contents *string         `json:"contents"`
			} `json:"document"`
			Score float32 `json:"score"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("retrieval server: decode response: %w", err)
	}
	if len(resp.Result) != nQueries {
		return nil, fmt.Errorf("retrieval server: %d result lists for %d queries", len(resp.Result), nQueries)
	}
	out := make([][]Hit, nQueries)
	for i, rs := range resp.Result {
		out[i] = make([]Hit, len(rs))
		for j, r := range rs {
			if r.Document.Contents == nil {
				return nil, fmt.Errorf("retrieval server: query %d hit %d has no contents", i, j)
			}
			id, err := parseID(r.Document.ID)
			if err != nil {
				return nil, fmt.Errorf("retrieval server: query %d hit %d: %w", i, j, err)
			}
			title, text := SplitContents(*r.Document.Contents)
			out[i][j] = Hit{Doc: Doc{ID: id, Contents: *r.Document.Contents, Title: title, Text: text}, Score: r.Score}
		}
	}
	return out, nil
}

// Health calls GET /health.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.do(ctx, http.MethodGet, "/health", nil, &h)
	return h, err
}

// do runs one call with bounded retries and decodes a JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	backoff := c.Backoff
	var last error
	for attempt := 0; attempt <= c.Retries; attempt++ {
		if attempt > 0 {
			wait := backoff
			var se *StatusError
			if errors.As(last, &se) && se.RetryAfter > wait {
				wait = min(se.RetryAfter, c.MaxRetryAfter)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%s %s: %w (last error: %v)", method, path, ctx.Err(), last)
			case <-t.C:
			}
			backoff *= 2
		}
		err := c.once(ctx, method, path, body, out)
		if err == nil {
			return nil
		}
		last = err
		var se *StatusError
		if errors.As(err, &se) && !se.retryable() {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
	}
	return fmt.Errorf("%s %s: %d attempts failed: %w", method, path, c.Retries+1, last)
}

func (c *Client) once(ctx context.Context, method, path string, body []byte, out any) error {
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	limit := c.MaxResponseBytes
	if limit <= 0 {
		limit = 256 << 20
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if int64(len(raw)) > limit {
		return fmt.Errorf("response exceeds %d bytes", limit)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error  string `json:"error"`
			Detail any    `json:"detail"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil {
			if e.Error != "" {
				msg = e.Error
			} else if e.Detail != nil {
				msg = fmt.Sprint(e.Detail)
			}
		}
		if len(msg) > 500 {
			msg = msg[:500] + "…"
		}
		se := &StatusError{Status: resp.StatusCode, Msg: msg}
		if sec, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && sec > 0 {
			se.RetryAfter = time.Duration(min(sec, 3600)) * time.Second
		}
		return se
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}
