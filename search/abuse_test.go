package search_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cas-engine/cas/bench"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/search"
)

// Bounds of TestLoadUnderAbuse (see README, Reliability).
const (
	abuseP99Factor = 5                    // loaded p99 ≤ factor × unloaded p99 …
	abuseP99Floor  = 5 * time.Millisecond // … or this, whichever is larger (timer and scheduler noise of a 2-core machine)
	abuseRSSBound  = 600 << 20            // process RSS while the abusive clients run
)

// TestLoadUnderAbuse is the bounded loopback version of the hostile-load
// probe: normal traffic (one query, topk 3, 100 requests/s, as agent
// rollouts send it) is measured alone, then again while
//   - 2 clients loop the largest request allowed (100 queries × topk 100,
//     ≈ 7 MB of JSON each) and read the answers, and
//   - 20 clients send it and never read (reconnecting each second).
//
// The retriever is paced: each query takes 2 ms of wall time (a sleep,
// like a remote index) and returns passages of 700 bytes, so that the
// test measures the server's scheduling and memory, not the CPU share a
// shared 2-core machine happens to leave it. Least-served-first batching
// keeps the normal requests' p99 within abuseP99Factor of the unloaded one
// (first-come batching would queue them behind 200 ms per large request);
// caps and write deadlines keep the process's RSS under abuseRSSBound
// (before, 20 non-readers cost 2.3 GB).
func TestLoadUnderAbuse(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	r := paced{perQuery: 2 * time.Millisecond, size: 700}
	cfg := search.DefaultServerConfig()
	cfg.WriteTimeout = 500 * time.Millisecond
	s, addr, cancel, served := search.ServeLoopback(t, r, cfg, 2*time.Second)
	defer func() { cancel(); <-served }()
	url := "http://" + addr

	qa := search.ReadQA(t, sharedtest.Path(t, "data", "qa", "nq_test_1k.jsonl"), 1000)
	queries := make([]string, len(qa))
	for i, q := range qa {
		queries[i] = q.Question
	}
	normal := func() bench.LoadReport {
		rep, err := bench.RunLoad(context.Background(), bench.LoadConfig{URL: url, Queries: queries, Rate: 100, Duration: 1500 * time.Millisecond, TopK: 3})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	bigQueries := make([]string, 100)
	for i := range bigQueries {
		bigQueries[i] = queries[i*7%len(queries)]
	}
	bigBody := fmt.Sprintf(`{"queries": [%s], "topk": 100, "return_scores": true}`, `"`+strings.Join(bigQueries, `", "`)+`"`)
	bodyFile := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(bodyFile, []byte(bigBody), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var peakRSS atomic.Int64
	sampling, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampling.Err() == nil {
			if v := rssBytes(); v > peakRSS.Load() {
				peakRSS.Store(v)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	normal() // warm up (page cache, connection pool)
	// A latency bound on a shared machine can be broken by a neighbour:
	// up to three attempts, each measuring normal traffic alone and then
	// under abuse; the test passes when one attempt holds the bound.
	var alone, loaded bench.LoadReport
	var abuseRep []byte
	ok := false
	for attempt := 1; attempt <= 3 && !ok; attempt++ {
		alone = normal()
		// The abusive clients run in a child process (this test binary
		// running TestAbusiveClients), as they would on another machine: in
		// this process they would compete with the server for its Go
		// scheduler.
		report := filepath.Join(t.TempDir(), "abuse.txt")
		child := exec.Command(exe, "-test.run=^TestAbusiveClients$", "-test.count=1")
		child.Env = append(os.Environ(), "CAS_ABUSE_URL="+url, "CAS_ABUSE_BODY="+bodyFile, "CAS_ABUSE_REPORT="+report)
		child.Stdout, child.Stderr = io.Discard, io.Discard
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		// On another machine the clients would not take the server's CPU;
		// here they share its cores, so they run at the lowest priority.
		search.LowPriority(child.Process.Pid)
		time.Sleep(500 * time.Millisecond) // let the abuse build up
		loaded = normal()
		child.Process.Signal(os.Interrupt)
		killer := time.AfterFunc(10*time.Second, func() { child.Process.Kill() })
		child.Wait()
		killer.Stop()
		abuseRep, _ = os.ReadFile(report)
		bound := max(abuseP99Factor*alone.P99, abuseP99Floor)
		ok = alone.Errors == 0 && loaded.Errors == 0 && loaded.P99 <= bound
		t.Logf("attempt %d: alone: %v", attempt, alone)
		t.Logf("attempt %d: with abuse: %v (bound %v)", attempt, loaded, bound)
		t.Logf("attempt %d: abusive clients: %s", attempt, strings.TrimSpace(string(abuseRep)))
	}
	stopSampling()
	<-sampled
	t.Logf("server peak RSS %d MB; health %+v", peakRSS.Load()>>20, s.Health())

	if alone.Errors != 0 || loaded.Errors != 0 {
		t.Errorf("normal traffic had errors: alone %d, with abuse %d (%s)", alone.Errors, loaded.Errors, loaded.FirstError)
	}
	if bound := max(abuseP99Factor*alone.P99, abuseP99Floor); loaded.P99 > bound {
		t.Errorf("p99 with abuse %v > %v (%d× the unloaded %v, floor %v) in 3 attempts", loaded.P99, bound, abuseP99Factor, alone.P99, abuseP99Floor)
	}
	if !strings.Contains(string(abuseRep), "non-reading connections") || strings.HasSuffix(string(abuseRep), " 0 non-reading connections") {
		t.Errorf("the abuse did not run: %q", abuseRep)
	}
	if rss := peakRSS.Load(); rss > abuseRSSBound {
		t.Errorf("peak RSS %d MB > %d MB", rss>>20, abuseRSSBound>>20)
	}
}

// rssBytes is the process's resident set size (Linux; 0 elsewhere).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(rest)), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestAbusiveClients is the child process of TestLoadUnderAbuse (it does
// nothing otherwise): 2 clients loop the large request and read the
// answers, 20 send it and never read (reconnecting each second), until
// interrupted; then it writes a one-line report.
func TestAbusiveClients(t *testing.T) {
	url, bodyFile, report := os.Getenv("CAS_ABUSE_URL"), os.Getenv("CAS_ABUSE_BODY"), os.Getenv("CAS_ABUSE_REPORT")
	if url == "" {
		t.Skip("child process of TestLoadUnderAbuse")
	}
	body, err := os.ReadFile(bodyFile)
	if err != nil {
		t.Fatal(err)
	}
	abuse, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	host := strings.TrimPrefix(url, "http://")
	var wg sync.WaitGroup
	var bigOK, bigBytes, busy, conns atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{}
			for abuse.Err() == nil {
				req, _ := http.NewRequestWithContext(abuse, "POST", url+"/retrieve", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					continue
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					bigOK.Add(1)
					bigBytes.Store(n)
				} else {
					busy.Add(1)
				}
			}
		}()
	}
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for abuse.Err() == nil {
				c, err := net.Dial("tcp", host)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				c.(*net.TCPConn).SetReadBuffer(4096)
				fmt.Fprintf(c, "POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				conns.Add(1)
				select {
				case <-abuse.Done():
				case <-time.After(time.Second):
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	os.WriteFile(report, []byte(fmt.Sprintf("%d large answers read (%d bytes each), %d large requests turned away busy, %d non-reading connections",
		bigOK.Load(), bigBytes.Load(), busy.Load(), conns.Load())), 0o644)
}

// paced answers every query with k passages of size bytes after perQuery
// of wall time per query.
type paced struct {
	perQuery time.Duration
	size     int
}

func (p paced) Retrieve(ctx context.Context, queries []string, k int) ([][]search.Hit, error) {
	select {
	case <-time.After(p.perQuery * time.Duration(len(queries))):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return search.BigRetriever(p.size).Retrieve(ctx, queries, k)
}
