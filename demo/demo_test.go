package demo

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/cas-engine/cas/train"
)

// cancelOn is a log writer that cancels a context at the first line
// containing a marker, so a test can interrupt a run at a chosen point.
type cancelOn struct {
	mu     sync.Mutex
	marker string
	cancel context.CancelFunc
	hit    bool
	buf    bytes.Buffer
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if !c.hit && strings.Contains(c.buf.String(), c.marker) {
		c.hit = true
		c.cancel()
	}
	return len(p), nil
}

// TestQuickDemo is `cas demo --quick` end to end: it is interrupted right
// after the first GRPO checkpoint (as by Ctrl-C), resumed to the end, and
// its numbers are checked against the claims: EM with search above
// EM without, EM after GRPO no worse than after the warm start beyond
// noise, APS coverage on the test split within two standard deviations of
// 1 − α. A third invocation resumes every stage and changes nothing.
func TestQuickDemo(t *testing.T) {
	// The soft heap limit `cas demo` sets: without it the CPU backend's
	// buffer pools hold several GB.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(DefaultMemoryLimitMiB << 20))
	out := t.TempDir()
	cfg := QuickConfig(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logw := &cancelOn{marker: "checkpoint " + filepath.Join(out, "grpo", VariantCAS), cancel: cancel}
	_, err := Run(ctx, cfg, out, Options{Log: logw})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted run: err = %v, want ErrInterrupted (log:\n%s)", err, logw.buf.String())
	}
	if _, err := train.LatestCheckpoint(filepath.Join(out, "grpo", VariantCAS)); err != nil {
		t.Fatalf("no GRPO checkpoint after the interruption: %v", err)
	}
	var log bytes.Buffer
	res, err := Run(context.Background(), cfg, out, Options{Log: &log})
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "resumed cas at step 1") {
		t.Errorf("the GRPO run did not resume from its checkpoint:\n%s", log.String())
	}
	for _, st := range res.Timings[:4] { // world, index, aps, warm
		if !st.Resumed {
			t.Errorf("stage %s ran again after the interruption", st.Stage)
		}
	}
	t.Logf("wall %.0f s (resumed part)\n%s", res.Wall, log.String())

	nr, ok1 := res.Eval(EvalNoRetrieval)
	ws, ok2 := res.Eval(EvalWarmStart)
	cas, ok3 := res.Eval(VariantCAS)
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("missing evaluations: %+v", res.Evals)
	}
	for _, e := range res.Evals {
		t.Logf("%-13s EM %.3f (1-hop %.3f, 2-hop %.3f) searches %.2f docs %.2f valid %.2f", e.Name, e.EM, e.EMSingle, e.EMTwoHop,
			e.SearchCalls, e.DocsPerSearch, e.FormatValid)
		if e.Questions != cfg.World.Test {
			t.Errorf("%s: %d questions evaluated, want %d", e.Name, e.Questions, cfg.World.Test)
		}
	}
	if !(ws.EM > nr.EM) {
		t.Errorf("EM with search %.3f is not above EM without search %.3f", ws.EM, nr.EM)
	}
	noise := 2 * math.Sqrt(max(ws.EM*(1-ws.EM), 1/float64(ws.Questions))/float64(ws.Questions))
	if cas.EM < ws.EM-noise {
		t.Errorf("EM after GRPO %.3f below EM after the warm start %.3f − noise %.3f", cas.EM, ws.EM, noise)
	}
	aps := res.APS["0.2"]
	if aps.Test < 50 || aps.TestCoverage < aps.CoverageBound || aps.CoverageBound < 0.7 {
		t.Errorf("APS test coverage %.3f over %d queries, bound %.3f", aps.TestCoverage, aps.Test, aps.CoverageBound)
	}
	if ws.DocsPerSearch < 1 || ws.DocsPerSearch > 5 {
		t.Errorf("warm start keeps %.2f docs per search, outside APS's clamp [1, 5]", ws.DocsPerSearch)
	}
	for _, v := range cfg.Variants {
		if ms := res.Metrics[v.Name]; len(ms) != cfg.GRPO.Steps {
			t.Errorf("variant %s: %d metric lines, want %d", v.Name, len(ms), cfg.GRPO.Steps)
		}
	}
	if w := res.Warm; w.Steps != cfg.Warm.Steps || !(tail(w.Losses, 5) < w.Losses[0]/2) {
		t.Errorf("warm start: %d steps, cross-entropy %.3f → %.3f", w.Steps, w.Losses[0], tail(w.Losses, 5))
	}

	report, err := os.ReadFile(filepath.Join(out, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| CAS: GRPO + APS + ACI |", "| No retrieval (direct answer) |", "## APS on retrieval", "figure2.png"} {
		if !bytes.Contains(report, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, f := range []string{train.Figure2PNG, train.RewardPNG, APSHistogramPNG, WarmLossPNG, EvalPNG} {
		b, err := os.ReadFile(filepath.Join(out, PlotsDir, f))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("plot %s: not a PNG (%v)", f, err)
		}
	}

	// A finished run resumes every stage and reports the same numbers.
	again, err := Run(context.Background(), cfg, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range again.Timings {
		if !st.Resumed {
			t.Errorf("stage %s ran again on a finished run", st.Stage)
		}
	}
	if a, _ := again.Eval(VariantCAS); a.EM != cas.EM {
		t.Errorf("rerun changed CAS EM %.3f → %.3f", cas.EM, a.EM)
	}
	// Another config in the same folder is refused.
	other := cfg
	other.Seed = 2
	if _, err := Run(context.Background(), other, out, Options{}); err == nil || !strings.Contains(err.Error(), "different run") {
		t.Errorf("a different config in the same folder: err = %v", err)
	}
}
