package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"mime"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ServerConfig bounds what one request may ask and how requests are batched.
type ServerConfig struct {
	DefaultTopK  int   // topk when the request omits it (Search-R1's retriever: 3)
	MaxTopK      int   // topk above this is a 400
	MaxQueries   int   // queries per request above this is a 400
	MaxResults   int   // queries × topk above this is a 400 (0: no cap)
	MaxBodyBytes int64 // larger bodies are a 413
	// MaxResponseBytes: a response that would be larger is a 413 naming the
	// limit (checked before anything is written; responses are streamed).
	MaxResponseBytes int64
	Timeout          time.Duration // per request, queueing included (paper: 30 s)
	// WriteTimeout bounds the writing of each piece (one query's hits) of a
	// response: a client that stops reading is dropped after it, and with
	// it the memory its response holds.
	WriteTimeout time.Duration
	// MaxInFlight requests are read, retrieved and written at once; beyond
	// it a request is answered 503 with Retry-After at once.
	MaxInFlight int
	// LargeResults: a request asking more than this many results (queries ×
	// topk) is large; at most MaxLargeInFlight large requests are served at
	// once, one more is a 503 with Retry-After. This keeps a few clients
	// looping the largest request from filling MaxInFlight and the workers.
	LargeResults     int
	MaxLargeInFlight int
	// MaxConns bounds open connections (Serve only): one more is answered
	// 503 with Retry-After and closed.
	MaxConns int
	// RetryAfter is the Retry-After of every 503 (whole seconds, ≥ 1).
	RetryAfter time.Duration
	// Batching: a worker takes every waiting small request (at most
	// LargeResults results) whole, least served first, and at most
	// FairChunkResults results (queries × topk, at least one query) of a
	// large one, until the batch holds MaxBatch
	// queries, optionally waiting BatchWindow for more, and answers them
	// with one Retrieve call. A large request is thus served a slice at a
	// time, interleaved with the others, by at most Workers−1 workers at
	// once (at least one): it cannot starve small ones. With the default
	// window 0 batching adds no latency: batches grow only under load.
	MaxBatch         int
	FairChunkResults int
	BatchWindow      time.Duration
	Workers          int // concurrent batches (0: GOMAXPROCS)
	QueueSize        int // waiting requests beyond this get a 503
	// Kind and Docs are reported by /health.
	Kind string
	Docs int
	// Log receives one line per internal error (nil: discard).
	Log *log.Logger
}

// DefaultServerConfig returns the limits `cas serve` uses.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		DefaultTopK:      3,
		MaxTopK:          100,
		MaxQueries:       1024,
		MaxResults:       10000,
		MaxBodyBytes:     4 << 20,
		MaxResponseBytes: 32 << 20,
		Timeout:          30 * time.Second,
		WriteTimeout:     10 * time.Second,
		MaxInFlight:      64,
		LargeResults:     4096,
		MaxLargeInFlight: 16,
		MaxConns:         1024,
		RetryAfter:       time.Second,
		MaxBatch:         256,
		FairChunkResults: 256,
		QueueSize:        4096,
	}
}

func (c *ServerConfig) validate() error {
	// Each limit with the test that rejects it, in the order they are
	// checked; the error reads "server: <what> <value> <rel>".
	for _, l := range []struct {
		bad  bool
		what string
		v    any
		rel  string
	}{
		{c.MaxTopK < 1, "max topk", c.MaxTopK, "< 1"},
		{c.DefaultTopK < 1 || c.DefaultTopK > c.MaxTopK, "default topk", c.DefaultTopK, fmt.Sprintf("outside [1, %d]", c.MaxTopK)},
		{c.MaxQueries < 1, "max queries", c.MaxQueries, "< 1"},
		{c.MaxResults < 0, "max results", c.MaxResults, "< 0"},
		{c.MaxBodyBytes < 64, "body limit", c.MaxBodyBytes, "bytes is too small"},
		{c.Timeout <= 0, "timeout", c.Timeout, "≤ 0"},
		{c.MaxBatch < 1, "max batch", c.MaxBatch, "< 1"},
		{c.QueueSize < 1, "queue size", c.QueueSize, "< 1"},
		{c.BatchWindow < 0, "batch window", c.BatchWindow, "< 0"},
		{c.MaxResponseBytes < 64, "response limit", c.MaxResponseBytes, "bytes is too small"},
		{c.WriteTimeout <= 0, "write timeout", c.WriteTimeout, "≤ 0"},
		{c.MaxInFlight < 1, "max in-flight requests", c.MaxInFlight, "< 1"},
		{c.MaxConns < 0, "max connections", c.MaxConns, "< 0"},
		{c.LargeResults < 1 || c.MaxLargeInFlight < 1, fmt.Sprintf("large requests (> %d results) limited to", c.LargeResults), c.MaxLargeInFlight, "in flight: both must be ≥ 1"},
		{c.FairChunkResults < 1, "fair chunk of", c.FairChunkResults, "results < 1"},
	} {
		if l.bad {
			return fmt.Errorf("server: %s %v %s", l.what, l.v, l.rel)
		}
	}
	if c.RetryAfter < time.Second {
		c.RetryAfter = time.Second
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	return nil
}

// RetrieveRequest is the body of POST /retrieve (Search-R1's QueryRequest).
type RetrieveRequest struct {
	Queries      []string
	TopK         int // already defaulted and range-checked
	ReturnScores bool
}

// RequestError is a client error: its Status is 400 or 413.
type RequestError struct {
	Status int
	Msg    string
}

func (e *RequestError) Error() string { return e.Msg }

func badRequest(format string, args ...any) *RequestError {
	return &RequestError{Status: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

func tooLarge(format string, args ...any) *RequestError {
	return &RequestError{Status: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf(format, args...)}
}

// DecodeRetrieveRequest parses and validates a /retrieve body:
//
//	{"queries": [string, ...], "topk": int (optional), "return_scores": bool (optional)}
//
// Keys match exactly (Go's encoding/json would accept "queriEs"); an unknown
// key or a key given twice is an error naming it. Missing or null "queries",
// a non-string query, a non-integer topk, topk < 1 or > max, too many
// queries, queries × topk above MaxResults, malformed JSON or trailing data
// are errors. An absent or null topk takes the default. It never panics.
func DecodeRetrieveRequest(body []byte, cfg ServerConfig) (RetrieveRequest, error) {
	fields, err := decodeStrictObject(body, "queries", "topk", "return_scores")
	if err != nil {
		return RetrieveRequest{}, err
	}
	var req RetrieveRequest
	rawQueries, rawTopK, rawScores := fields["queries"], fields["topk"], fields["return_scores"]
	if isNull(rawQueries) {
		return req, badRequest(`missing "queries" (a list of strings)`)
	}
	if err := json.Unmarshal(rawQueries, &req.Queries); err != nil {
		return req, badRequest(`"queries" must be a list of strings`)
	}
	if req.Queries == nil {
		return req, badRequest(`"queries" must be a list of strings`)
	}
	if len(req.Queries) > cfg.MaxQueries {
		return req, badRequest(`%d queries exceed the limit of %d per request (max_queries)`, len(req.Queries), cfg.MaxQueries)
	}
	req.TopK = cfg.DefaultTopK
	if !isNull(rawTopK) {
		var f float64
		if err := json.Unmarshal(rawTopK, &f); err != nil || f != math.Trunc(f) {
			return req, badRequest(`"topk" must be an integer, got %.40q`, rawTopK)
		}
		if f < 1 || f > float64(cfg.MaxTopK) {
			return req, badRequest(`"topk" = %v outside [1, %d]`, f, cfg.MaxTopK)
		}
		req.TopK = int(f)
	}
	if cfg.MaxResults > 0 && len(req.Queries)*req.TopK > cfg.MaxResults {
		return req, badRequest(`%d queries × topk %d = %d results exceed the limit of %d per request (max_results)`,
			len(req.Queries), req.TopK, len(req.Queries)*req.TopK, cfg.MaxResults)
	}
	if !isNull(rawScores) {
		if err := json.Unmarshal(rawScores, &req.ReturnScores); err != nil {
			return req, badRequest(`"return_scores" must be a boolean`)
		}
	}
	return req, nil
}

// decodeStrictObject decodes body as one JSON object whose keys are among
// allowed, spelled exactly, each at most once; it returns the raw values.
func decodeStrictObject(body []byte, allowed ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, badRequest("malformed JSON body: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, badRequest("malformed JSON body: want an object, got %s", jsonKind(tok))
	}
	fields := make(map[string]json.RawMessage, len(allowed))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, badRequest("malformed JSON body: %v", err)
		}
		key, _ := tok.(string)
		if !slices.Contains(allowed, key) {
			return nil, badRequest("unknown key %.60q (allowed: %s)", key, strings.Join(allowed, ", "))
		}
		if _, dup := fields[key]; dup {
			return nil, badRequest("duplicate key %q", key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, badRequest("malformed JSON body: value of %q: %v", key, err)
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, badRequest("malformed JSON body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest("malformed JSON body: data after the object")
	}
	return fields, nil
}

func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "an array"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return "null"
	}
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// apiDocument is a passage as Search-R1's server returns it.
type apiDocument struct {
	ID       string `json:"id"`
	Contents string `json:"contents"`
}

type apiScored struct {
	Document apiDocument `json:"document"`
	Score    float32     `json:"score"`
}

// EncodeRetrieveResponse renders hits as Search-R1's /retrieve response:
// {"result": [[{"document": {...}, "score": s}, ...], ...]} with scores, or
// {"result": [[{...}, ...], ...]} without.
func EncodeRetrieveResponse(hits [][]Hit, withScores bool) ([]byte, error) {
	var buf bytes.Buffer
	err := writeRetrieveResponse(&buf, hits, withScores, nil)
	return buf.Bytes(), err
}

// writeRetrieveResponse streams the response one query's hit list at a
// time, calling before (when set) ahead of each write.
func writeRetrieveResponse(w io.Writer, hits [][]Hit, withScores bool, before func()) error {
	write := func(b []byte) error {
		if before != nil {
			before()
		}
		_, err := w.Write(b)
		return err
	}
	if err := write([]byte(`{"result":[`)); err != nil {
		return err
	}
	var piece []byte
	for i, hs := range hits {
		piece = piece[:0]
		if i > 0 {
			piece = append(piece, ',')
		}
		b, err := encodeHitList(hs, withScores)
		if err != nil {
			return err
		}
		if err := write(append(piece, b...)); err != nil {
			return err
		}
	}
	return write([]byte(`]}`))
}

// encodeHitList renders one query's hits.
func encodeHitList(hs []Hit, withScores bool) ([]byte, error) {
	if withScores {
		out := make([]apiScored, len(hs))
		for j, h := range hs {
			out[j] = apiScored{Document: apiDocument{ID: h.Doc.ID, Contents: h.Doc.Contents}, Score: h.Score}
		}
		return json.Marshal(out)
	}
	out := make([]apiDocument, len(hs))
	for j, h := range hs {
		out[j] = apiDocument{ID: h.Doc.ID, Contents: h.Doc.Contents}
	}
	return json.Marshal(out)
}

// responseSize returns the exact byte size of the response, computing it
// only when a cheap upper bound (every byte escaped as \u00XX) exceeds
// limit.
func responseSize(hits [][]Hit, withScores bool, limit int64) (int64, error) {
	bound := int64(len(`{"result":[]}`))
	for _, hs := range hits {
		bound += 3
		for _, h := range hs {
			bound += 6*int64(len(h.Doc.ID)+len(h.Doc.Contents)) + 96
		}
	}
	if bound <= limit {
		return bound, nil
	}
	var n countingWriter
	err := writeRetrieveResponse(&n, hits, withScores, nil)
	return int64(n), err
}

type countingWriter int64

func (c *countingWriter) Write(b []byte) (int, error) {
	*c += countingWriter(len(b))
	return len(b), nil
}

// Health is the body of GET /health.
type Health struct {
	Status   string `json:"status"`
	Kind     string `json:"kind,omitempty"`
	Docs     int    `json:"docs,omitempty"`
	Requests int64  `json:"requests"`
	Queries  int64  `json:"queries"`
	Errors   int64  `json:"errors"`
	Batches  int64  `json:"batches"`
	Rejected int64  `json:"rejected"` // 503s for load (in-flight, queue or connection caps)
}

// Server answers Search-R1's /retrieve API from any Retriever, batching
// concurrent requests into Retrieve calls with fair round-robin slices.
type Server struct {
	r        Retriever
	cfg      ServerConfig
	q        *fairQueue
	inflight chan struct{} // semaphore of MaxInFlight
	large    chan struct{} // semaphore of MaxLargeInFlight
	stop     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
	draining atomic.Bool // set when a graceful shutdown starts (reported by /health)

	requests, queries, errors, batches, rejected atomic.Int64
}

// NewServer validates cfg and starts the batching workers; Close stops them.
func NewServer(r Retriever, cfg ServerConfig) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{r: r, cfg: cfg, q: newFairQueue(cfg.FairChunkResults, cfg.MaxBatch, cfg.QueueSize, max(1, cfg.Workers-1), cfg.LargeResults),
		inflight: make(chan struct{}, cfg.MaxInFlight), large: make(chan struct{}, cfg.MaxLargeInFlight),
		stop: make(chan struct{})}
	for w := 0; w < cfg.Workers; w++ {
		s.wg.Add(1)
		go s.worker()
	}
	return s, nil
}

// Close stops the workers; requests still queued are answered with an error.
func (s *Server) Close() {
	s.once.Do(func() {
		s.draining.Store(true)
		s.q.close(errServerClosed)
		close(s.stop)
		s.wg.Wait()
	})
}

var (
	errServerClosed = errors.New("server is shutting down")
	errOverloaded   = errors.New("server overloaded: request queue full")
)

func (s *Server) worker() {
	defer s.wg.Done()
	for {
		select {
		case <-s.q.wake:
		case <-s.stop:
			return
		}
		batch, n, large := s.q.take(nil, 0, false)
		if len(batch) == 0 {
			continue
		}
		if s.cfg.BatchWindow > 0 && n < s.cfg.MaxBatch {
			timer := time.NewTimer(s.cfg.BatchWindow)
		collect:
			for n < s.cfg.MaxBatch {
				select {
				case <-s.q.wake:
					batch, n, large = s.q.take(batch, n, large)
				case <-timer.C:
					break collect
				case <-s.stop:
					break collect
				}
			}
			timer.Stop()
		}
		s.runBatch(batch)
		if large {
			s.q.doneLarge()
		}
	}
}

// runBatch answers a batch of slices with one Retrieve call (k = the
// largest asked; each request gets its own prefix).
func (s *Server) runBatch(batch []slice) {
	var queries []string
	k := 0
	jobs := map[*retrieveJob]bool{}
	for _, sl := range batch {
		queries = append(queries, sl.job.queries[sl.lo:sl.hi]...)
		k = max(k, sl.job.k)
		jobs[sl.job] = true
	}
	s.batches.Add(1)
	// The batch is cancelled once every request in it has given up.
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	var waiting atomic.Int32
	waiting.Store(int32(len(jobs)))
	for j := range jobs {
		stop := context.AfterFunc(j.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	hits, err := s.safeRetrieve(ctx, queries, k)
	if err == nil && len(hits) != len(queries) {
		err = fmt.Errorf("retriever returned %d result lists for %d queries", len(hits), len(queries))
	}
	at := 0
	for _, sl := range batch {
		n := sl.hi - sl.lo
		if err != nil {
			s.q.finish(sl, nil, err)
			continue
		}
		out := hits[at : at+n]
		at += n
		for i := range out {
			if len(out[i]) > sl.job.k {
				out[i] = out[i][:sl.job.k]
			}
		}
		s.q.finish(sl, out, nil)
	}
}

// safeRetrieve turns a retriever panic into an error: the server never dies
// on a request.
func (s *Server) safeRetrieve(ctx context.Context, queries []string, k int) (hits [][]Hit, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("retriever panic: %v", p)
		}
	}()
	return s.r.Retrieve(ctx, queries, k)
}

// Search submits queries through the batching queue and waits for them
// (what the HTTP handler does after decoding).
func (s *Server) Search(ctx context.Context, queries []string, k int) ([][]Hit, error) {
	if len(queries) == 0 {
		return [][]Hit{}, nil
	}
	j := &retrieveJob{ctx: ctx, queries: queries, k: k, done: make(chan jobResult, 1)}
	if err := s.q.push(j); err != nil {
		return nil, err
	}
	select {
	case r := <-j.done:
		return r.hits, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Handler returns the HTTP API: POST /retrieve, GET /health.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/retrieve", s.handleRetrieve)
	mux.HandleFunc("/health", s.handleHealth)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSONError(w, http.StatusNotFound, "not found: "+r.URL.Path+" (endpoints: POST /retrieve, GET /health)")
	})
	return s.recoverMiddleware(mux)
}

func (s *Server) recoverMiddleware(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.errors.Add(1)
				s.logf("panic serving %s: %v", r.URL.Path, p)
				writeJSONError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		h.ServeHTTP(w, r)
	})
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		s.cfg.Log.Printf(format, args...)
	}
}

func (s *Server) handleRetrieve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.fail(w, http.StatusMethodNotAllowed, "use POST /retrieve")
		return
	}
	if !s.admit(w, s.inflight, "server busy: %d requests in flight (max_in_flight)", s.cfg.MaxInFlight) {
		return
	}
	defer func() { <-s.inflight }()
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		s.fail(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %.60q: want application/json", r.Header.Get("Content-Type")))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		s.fail(w, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	req, err := DecodeRetrieveRequest(body, s.cfg)
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			s.fail(w, re.Status, re.Msg)
		} else {
			s.fail(w, http.StatusBadRequest, err.Error())
		}
		return
	}
	if len(req.Queries)*req.TopK > s.cfg.LargeResults {
		if !s.admit(w, s.large, "server busy: %d large requests (over %d results) in flight (max_large_in_flight)",
			s.cfg.MaxLargeInFlight, s.cfg.LargeResults) {
			return
		}
		defer func() { <-s.large }()
	}
	s.queries.Add(int64(len(req.Queries)))
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	hits, err := s.Search(ctx, req.Queries, req.TopK)
	if err != nil {
		s.errors.Add(1)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			s.unavailable(w, fmt.Sprintf("request timed out after %v", s.cfg.Timeout))
		case errors.Is(err, context.Canceled):
			// The client went away; nobody reads the answer.
		case errors.Is(err, errOverloaded), errors.Is(err, errServerClosed):
			s.rejected.Add(1)
			s.unavailable(w, err.Error())
		default:
			s.logf("retrieve: %v", err)
			writeJSONError(w, http.StatusInternalServerError, "retrieval failed: "+err.Error())
		}
		return
	}
	size, err := responseSize(hits, req.ReturnScores, s.cfg.MaxResponseBytes)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, "encoding response: "+err.Error())
		return
	}
	if size > s.cfg.MaxResponseBytes {
		s.fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"response of %d bytes exceeds the limit of %d bytes (max_response_bytes): ask fewer queries or a smaller topk", size, s.cfg.MaxResponseBytes))
		return
	}
	// Stream one query's hit list at a time (chunked encoding), each write
	// due within WriteTimeout: a client that does not read is dropped.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	deadline := func() {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		// Encoding a large answer is CPU-bound; yield between pieces so
		// that small requests are not held behind it.
		runtime.Gosched()
	}
	if err := writeRetrieveResponse(w, hits, req.ReturnScores, deadline); err != nil {
		s.errors.Add(1)
		s.logf("writing response: %v", err)
		panic(http.ErrAbortHandler) // drop the connection: the body is incomplete
	}
}

// fail counts an error and answers it with status and msg.
func (s *Server) fail(w http.ResponseWriter, status int, msg string) {
	s.errors.Add(1)
	writeJSONError(w, status, msg)
}

// admit takes a slot of the semaphore sem for the request, or counts it
// rejected and answers 503 with Retry-After and the message format, args
// (the caller releases a slot taken).
func (s *Server) admit(w http.ResponseWriter, sem chan struct{}, format string, args ...any) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
		s.errors.Add(1)
		s.rejected.Add(1)
		s.unavailable(w, fmt.Sprintf(format, args...))
		return false
	}
}

// unavailable answers 503 with Retry-After.
func (s *Server) unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(s.cfg.RetryAfter/time.Second)))
	writeJSONError(w, http.StatusServiceUnavailable, msg)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSONError(w, http.StatusMethodNotAllowed, "use GET /health")
		return
	}
	h := s.Health()
	status := http.StatusOK
	if h.Status != "ok" {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(h)
}

// Health reports the server's state and counters.
func (s *Server) Health() Health {
	h := Health{
		Status: "ok", Kind: s.cfg.Kind, Docs: s.cfg.Docs,
		Requests: s.requests.Load(), Queries: s.queries.Load(),
		Errors: s.errors.Load(), Batches: s.batches.Load(), Rejected: s.rejected.Load(),
	}
	if s.draining.Load() {
		h.Status = "shutting down"
	}
	return h
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{msg})
}

// Serve serves the API on ln until ctx is cancelled, then shuts down
// gracefully: it stops accepting, lets in-flight requests finish (up to
// grace), and stops the workers.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.cfg.Timeout + 10*time.Second,
		WriteTimeout:      s.cfg.Timeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.cfg.Log,
	}
	if s.cfg.MaxConns > 0 {
		ln = &limitListener{Listener: ln, sem: make(chan struct{}, s.cfg.MaxConns), s: s}
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := hs.Shutdown(sctx)
	s.Close()
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// limitListener admits at most cap(sem) open connections; one more is
// answered 503 with Retry-After and closed, without reading its request.
type limitListener struct {
	net.Listener
	sem chan struct{}
	s   *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			l.s.rejected.Add(1)
			go l.refuse(c)
		}
	}
}

func (l *limitListener) refuse(c net.Conn) {
	defer c.Close()
	body := fmt.Sprintf(`{"error":"server busy: %d connections open (max_conns)"}`+"\n", cap(l.sem))
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		int(l.s.cfg.RetryAfter/time.Second), len(body), body)
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
