package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cas-engine/cas/search"
)

// LoadConfig describes an open-loop load test against a retrieval server.
// It is loopback-only and bounded: the URL must resolve to a loopback
// address, Duration and the request count are capped (MaxLoadDuration,
// MaxLoadRequests), and at most MaxInFlight
// requests are outstanding (a request that would exceed it counts as an
// error, so an overloaded server fails the test instead of being hidden).
type LoadConfig struct {
	URL               string        // server root, e.g. http://127.0.0.1:8000
	Queries           []string      // cycled in order
	Rate              float64       // requests per second
	Duration          time.Duration // sending time (≤ MaxLoadDuration)
	TopK              int           // topk of every request
	QueriesPerRequest int           // queries per request (default 1, as one agent turn)
	MaxInFlight       int           // outstanding-request bound (default 512)
	Timeout           time.Duration // per request (default 30 s)
}

// MaxLoadDuration and MaxLoadRequests cap one load test.
const (
	MaxLoadDuration = 10 * time.Minute
	MaxLoadRequests = 2_000_000
)

// LoadReport is the outcome of RunLoad. Latency is measured from each
// request's scheduled send time, so a server that falls behind shows it
// (no coordinated omission).
type LoadReport struct {
	TargetRate  float64       `json:"target_rate"`  // requests/s asked
	Duration    time.Duration `json:"duration_ns"`  // sending time
	Sent        int           `json:"sent"`         // requests scheduled
	OK          int           `json:"ok"`           // 200 with the right shape
	Errors      int           `json:"errors"`       // everything else
	Queries     int           `json:"queries"`      // queries answered
	Throughput  float64       `json:"throughput"`   // answered queries/s over Duration
	P50         time.Duration `json:"p50_ns"`       // latency percentiles of OK requests
	P90         time.Duration `json:"p90_ns"`       //
	P99         time.Duration `json:"p99_ns"`       //
	Max         time.Duration `json:"max_ns"`       //
	FirstError  string        `json:"first_error"`  // one example, when Errors > 0
	Held        bool          `json:"held"`         // no errors and throughput ≥ 98% of target
	QueriesRate float64       `json:"queries_rate"` // target queries/s (Rate × QueriesPerRequest)
}

// String formats the report as one line.
func (r LoadReport) String() string {
	s := fmt.Sprintf("rate %.0f q/s for %v: %d requests, %d ok, %d errors, throughput %.1f q/s, p50 %v, p90 %v, p99 %v, max %v, held %v",
		r.QueriesRate, r.Duration, r.Sent, r.OK, r.Errors, r.Throughput,
		r.P50.Round(10*time.Microsecond), r.P90.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond), r.Held)
	if r.FirstError != "" {
		s += " (first error: " + r.FirstError + ")"
	}
	return s
}

// CheckLoopback returns an error unless rawURL is http(s) on a loopback host.
func CheckLoopback(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("load test URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("load test URL %q: scheme must be http or https", rawURL)
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("load test URL %q: refusing a non-loopback host (load tests run on 127.0.0.1 only)", rawURL)
	}
	return nil
}

// RunLoad sends Rate requests per second for Duration, waits for the
// outstanding ones, and reports throughput and latency percentiles.
func RunLoad(ctx context.Context, cfg LoadConfig) (LoadReport, error) {
	if err := CheckLoopback(cfg.URL); err != nil {
		return LoadReport{}, err
	}
	switch {
	case len(cfg.Queries) == 0:
		return LoadReport{}, errors.New("load test: no queries")
	case !(cfg.Rate > 0) || cfg.Rate > 1e6:
		return LoadReport{}, fmt.Errorf("load test: rate %v outside (0, 1e6]", cfg.Rate)
	case cfg.Duration <= 0 || cfg.Duration > MaxLoadDuration:
		return LoadReport{}, fmt.Errorf("load test: duration %v outside (0, %v]", cfg.Duration, MaxLoadDuration)
	case cfg.TopK < 1:
		return LoadReport{}, fmt.Errorf("load test: topk %d < 1", cfg.TopK)
	case cfg.Rate*cfg.Duration.Seconds() > MaxLoadRequests:
		return LoadReport{}, fmt.Errorf("load test: %.0f requests exceed the cap of %d", cfg.Rate*cfg.Duration.Seconds(), MaxLoadRequests)
	}
	qpr := max(cfg.QueriesPerRequest, 1)
	inflight := cfg.MaxInFlight
	if inflight <= 0 {
		inflight = 512
	}
	client := search.NewClient(cfg.URL)
	client.Retries = 0
	if cfg.Timeout > 0 {
		client.Timeout = cfg.Timeout
	}
	tr := &http.Transport{MaxIdleConnsPerHost: inflight, MaxConnsPerHost: inflight, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client.HTTP = &http.Client{Transport: tr}

	total := int(cfg.Rate * cfg.Duration.Seconds())
	if total < 1 {
		total = 1
	}
	var (
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, total)
		rep       = LoadReport{TargetRate: cfg.Rate, Duration: cfg.Duration, QueriesRate: cfg.Rate * float64(qpr)}
		wg        sync.WaitGroup
		slots     = make(chan struct{}, inflight)
	)
	fail := func(msg string) {
		mu.Lock()
		rep.Errors++
		if rep.FirstError == "" {
			rep.FirstError = msg
		}
		mu.Unlock()
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	for i := 0; i < total; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				wg.Wait()
				return rep, ctx.Err()
			case <-t.C:
			}
		}
		rep.Sent++
		select {
		case slots <- struct{}{}:
		default:
			fail(fmt.Sprintf("more than %d requests outstanding", inflight))
			continue
		}
		qs := make([]string, qpr)
		for j := range qs {
			qs[j] = cfg.Queries[(i*qpr+j)%len(cfg.Queries)]
		}
		wg.Add(1)
		go func(due time.Time, qs []string) {
			defer wg.Done()
			defer func() { <-slots }()
			hits, err := client.Retrieve(ctx, qs, cfg.TopK)
			lat := time.Since(due)
			if err == nil && len(hits) != len(qs) {
				err = fmt.Errorf("%d result lists for %d queries", len(hits), len(qs))
			}
			if err != nil {
				fail(err.Error())
				return
			}
			mu.Lock()
			rep.OK++
			rep.Queries += len(qs)
			latencies = append(latencies, lat)
			mu.Unlock()
		}(due, qs)
	}
	wg.Wait()
	elapsed := max(time.Since(start), cfg.Duration)
	rep.Throughput = float64(rep.Queries) / elapsed.Seconds()
	slices.Sort(latencies)
	rep.P50, rep.P90, rep.P99 = percentile(latencies, 0.50), percentile(latencies, 0.90), percentile(latencies, 0.99)
	if n := len(latencies); n > 0 {
		rep.Max = latencies[n-1]
	}
	rep.Held = rep.Errors == 0 && rep.Throughput >= 0.98*rep.QueriesRate
	return rep, nil
}

// percentile returns the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// RampConfig searches for the highest rate a server holds: it runs RunLoad
// at Start, Start·Factor, … for Step each, stopping at the first rate not
// held, at a p99 above MaxP99, or after MaxSteps.
type RampConfig struct {
	Load     LoadConfig // Rate and Duration are overridden
	Start    float64
	Factor   float64
	Step     time.Duration
	MaxSteps int
	MaxP99   time.Duration
}

// RunRamp returns every step's report and the highest rate held.
func RunRamp(ctx context.Context, cfg RampConfig, log io.Writer) ([]LoadReport, float64, error) {
	if !(cfg.Factor > 1) || !(cfg.Start > 0) || cfg.MaxSteps < 1 || cfg.Step <= 0 {
		return nil, 0, errors.New("ramp: need start > 0, factor > 1, steps ≥ 1, step > 0")
	}
	var (
		reports []LoadReport
		best    float64
	)
	rate := cfg.Start
	for s := 0; s < cfg.MaxSteps; s++ {
		lc := cfg.Load
		lc.Rate, lc.Duration = rate, cfg.Step
		r, err := RunLoad(ctx, lc)
		if err != nil {
			return reports, best, err
		}
		reports = append(reports, r)
		if log != nil {
			fmt.Fprintln(log, r)
		}
		if !r.Held || (cfg.MaxP99 > 0 && r.P99 > cfg.MaxP99) {
			break
		}
		best = r.QueriesRate
		rate *= cfg.Factor
	}
	return reports, best, nil
}

// ServeBenchConfig configures ServeBench.
type ServeBenchConfig struct {
	Server            search.ServerConfig
	Rate              float64       // the sustained test's requests/s (paper: 120)
	Duration          time.Duration // its length (paper: 30 s)
	TopK              int
	QueriesPerRequest int
	// Ramp, when MaxSteps > 0, then searches for the highest rate held.
	Ramp RampConfig
}

// ServeBenchReport is the outcome of ServeBench.
type ServeBenchReport struct {
	Sustained LoadReport   `json:"sustained"`
	Ramp      []LoadReport `json:"ramp,omitempty"`
	MaxHeld   float64      `json:"max_rate_held"` // queries/s, 0 without a ramp
	Addr      string       `json:"addr"`
}

// ServeBench serves r on an ephemeral loopback port, runs the sustained load
// test and the optional ramp against it, and shuts the server down.
func ServeBench(ctx context.Context, r search.Retriever, queries []string, cfg ServeBenchConfig, log io.Writer) (ServeBenchReport, error) {
	srv, err := search.NewServer(r, cfg.Server)
	if err != nil {
		return ServeBenchReport{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return ServeBenchReport{}, fmt.Errorf("listen on loopback: %w", err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln, 5*time.Second) }()
	defer func() {
		stop()
		<-served
	}()
	url := "http://" + ln.Addr().String()
	rep := ServeBenchReport{Addr: ln.Addr().String()}
	lc := LoadConfig{URL: url, Queries: queries, Rate: cfg.Rate, Duration: cfg.Duration, TopK: cfg.TopK, QueriesPerRequest: cfg.QueriesPerRequest}
	if rep.Sustained, err = RunLoad(ctx, lc); err != nil {
		return rep, err
	}
	if log != nil {
		fmt.Fprintln(log, rep.Sustained)
	}
	if cfg.Ramp.MaxSteps > 0 {
		rc := cfg.Ramp
		rc.Load = lc
		if rep.Ramp, rep.MaxHeld, err = RunRamp(ctx, rc, log); err != nil {
			return rep, err
		}
	}
	return rep, nil
}
