package demo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWarmStageResumes runs the demo's real warm stage (a small quick
// world, 6 steps saved every 2) through Run: interrupted by Ctrl-C after
// the save of step 4, then resumed and stopped once stage 4 starts. The
// resumed warm start continues from step 4 and leaves the exported policy,
// warm_start.json with all 6 steps and no saves behind.
func TestWarmStageResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a world")
	}
	out := t.TempDir()
	cfg := QuickConfig(1)
	cfg.World.Train, cfg.World.APSCalib, cfg.World.ACICalib, cfg.World.Test = 400, 100, 60, 40
	cfg.Warm.Steps, cfg.Warm.Chunks, cfg.Warm.Warmup = 6, 3, 2
	// Demonstrations that answer from memory or after the first hop, as
	// the design of issue 20 measured them (their counts survive the resume).
	cfg.Warm.NoSearch, cfg.Warm.OneSearch = 0.3, 0.5
	for i, marker := range []string{"  step 4/6", "stage 4:"} {
		ctx, cancel := context.WithCancel(context.Background())
		logw := &cancelOn{marker: marker, cancel: cancel}
		_, err := Run(ctx, cfg, out, Options{Log: logw})
		cancel()
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("run %d: err = %v, want ErrInterrupted (log:\n%s)", i+1, err, logw.buf.String())
		}
		log := logw.buf.String()
		switch i {
		case 0:
			if _, err := os.Stat(filepath.Join(out, warmSavesDir, "step-000004", warmStateFile)); err != nil {
				t.Fatalf("no save of step 4 after the interruption: %v\n%s", err, log)
			}
		case 1:
			if !strings.Contains(log, "stage 3: warm start resumed at step 4 of 6") {
				t.Fatalf("the warm start did not resume at step 4:\n%s", log)
			}
		}
	}
	var rep WarmReport
	if err := readJSON(filepath.Join(out, "warm_start.json"), &rep); err != nil || rep.Steps != 6 || len(rep.Losses) != 6 {
		t.Fatalf("warm_start.json: %+v (%v)", rep, err)
	}
	if n := float64(rep.NoSearchExamples) / float64(rep.AgentExamples); n < 0.2 || n > 0.4 || rep.OneSearchExamples == 0 {
		t.Errorf("%d of %d demonstrations answer without a search (want about 30%%), %d after one of two hops (want > 0)",
			rep.NoSearchExamples, rep.AgentExamples, rep.OneSearchExamples)
	}
	if _, err := os.Stat(filepath.Join(out, "warm", configFile)); err != nil {
		t.Errorf("no exported warm policy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, warmSavesDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("warm saves left behind: %v", err)
	}
}
