package train

import (
	"bytes"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/safetensors"
)

// TestCheckpointPruneAndLatest: checkpoints are complete folders named by
// step, "latest" follows the newest, older ones beyond keep are deleted and
// leftover temporary folders of an interrupted write are removed.
func TestCheckpointPruneAndLatest(t *testing.T) {
	m := tinyModel(t, "qwen2-tiny")
	aci, err := conformal.NewACI(conformal.DefaultACIConfig(), []float64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, CheckpointsDir)
	if err := os.MkdirAll(filepath.Join(root, ".step-000009.tmp-123"), 0o755); err != nil {
		t.Fatal(err)
	}
	rngState, err := rand.NewPCG(1, 2).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 4; step++ {
		st := TrainerState{Step: step, TotalSteps: 4, Data: Cursor{Epoch: 0, Pos: step}, RNG: rngState}
		if _, err := WriteCheckpoint(dir, m, aci, st, CheckpointSource{}, safetensors.BF16, 2); err != nil {
			t.Fatal(err)
		}
	}
	steps, err := listCheckpoints(root)
	if err != nil || len(steps) != 2 || steps[0] != 3 || steps[1] != 4 {
		t.Fatalf("kept %v (%v), want [3 4]", steps, err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(root, ".step-*")); len(tmps) != 0 {
		t.Errorf("temporary folders left: %v", tmps)
	}
	latest, err := LatestCheckpoint(dir)
	if err != nil || filepath.Base(latest) != CheckpointName(4) {
		t.Fatalf("latest %s (%v)", latest, err)
	}
	st, err := ReadTrainerState(latest)
	if err != nil || st.Step != 4 || st.Data.Pos != 4 || st.WeightsDType != "BF16" || !bytes.Equal(st.RNG, rngState) {
		t.Fatalf("state %+v (%v)", st, err)
	}
	back, err := ReadACIState(latest)
	if err != nil || back.QHat() != aci.QHat() || len(back.Window()) != 3 {
		t.Fatalf("ACI state %v", err)
	}
	// config.json was written from the model's config (no source folder).
	if b, err := os.ReadFile(filepath.Join(latest, "config.json")); err != nil || !strings.Contains(string(b), "Qwen2ForCausalLM") {
		t.Errorf("config.json: %v", err)
	}
	// After a crash: step 5 written but "latest" still naming 4 (the crash
	// came between the rename and "latest"), and keep lowered to 1, as when
	// a crash came between a checkpoint and its pruning. Resuming drops the
	// uncommitted step 5 and prunes to keep around latest.
	st5 := TrainerState{Step: 5, TotalSteps: 5, RNG: rngState}
	if _, err := WriteCheckpoint(dir, m, aci, st5, CheckpointSource{}, safetensors.BF16, 0); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(filepath.Join(root, LatestFile), []byte(CheckpointName(4)+"\n")); err != nil {
		t.Fatal(err)
	}
	if steps, _ := listCheckpoints(root); !slices.Equal(steps, []int{3, 4, 5}) {
		t.Fatalf("crash state %v, want [3 4 5]", steps)
	}
	if err := pruneCheckpoints(root, 1, CheckpointName(4)); err != nil {
		t.Fatal(err)
	}
	if steps, err := listCheckpoints(root); err != nil || !slices.Equal(steps, []int{4}) {
		t.Fatalf("after the resume prune: %v (%v), want [4]", steps, err)
	}
	// A "latest" naming something odd is an error, not a path escape.
	if err := os.WriteFile(filepath.Join(root, LatestFile), []byte("../../etc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LatestCheckpoint(dir); err == nil {
		t.Error("bad latest accepted")
	}
	if _, err := LatestCheckpoint(t.TempDir()); err == nil {
		t.Error("a folder without checkpoints gave a latest one")
	}
}

// TestOptimizerStateRoundTrip: the optimiser variables of a trained policy
// are saved and restored exactly into a fresh context, and the restored
// learner's next step equals the original's.
func TestOptimizerStateRoundTrip(t *testing.T) {
	cfg := testLearnerConfig()
	cfg.Loss.KLCoef = 0
	cfg.MiniBatchGroups = 0
	trajs := synthTrajectories(5, 384, 2, 3)
	a := tinyModel(t, "qwen2-tiny")
	la, err := NewLearner(a, nil, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la.Step(trajs); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := SaveOptimizerState(a.Context(), filepath.Join(dir, OptimizerFile)); err != nil {
		t.Fatal(err)
	}
	if err := writeHFFolder(dir, a, CheckpointSource{}, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	b, err := qwen.Load(dir, backendtest.Shared(t), qwen.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := RestoreOptimizerState(b.Context(), dir); err != nil {
		t.Fatal(err)
	}
	lb, err := NewLearner(b, nil, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	next := synthTrajectories(6, 384, 2, 3)
	ra, err := la.Step(next)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := lb.Step(next)
	if err != nil {
		t.Fatal(err)
	}
	if ra.Loss != rb.Loss || ra.GradNorm != rb.GradNorm || ra.LR != rb.LR {
		t.Errorf("restored learner differs: loss %v vs %v, |g| %v vs %v, lr %v vs %v", ra.Loss, rb.Loss, ra.GradNorm, rb.GradNorm, ra.LR, rb.LR)
	}
	const w = "model.layers.0.self_attn.o_proj.weight"
	if d := maxDiff(weightValues(t, a, w), weightValues(t, b, w)); d != 0 {
		t.Errorf("weights after the restored step differ by %g", d)
	}
}

func TestMetricsTruncateAndRead(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenMetrics(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 5; s++ {
		if err := w.Write(StepMetrics{Step: s, Reward: float64(s) / 10}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	// A crash tears the last line.
	f, _ := os.OpenFile(filepath.Join(dir, MetricsFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step": 6, "rew`)
	f.Close()
	ms, err := ReadMetrics(filepath.Join(dir, MetricsFile))
	if err != nil || len(ms) != 5 {
		t.Fatalf("read %d lines (%v), want 5 (torn line skipped)", len(ms), err)
	}
	// Resuming from step 3 drops steps 4–6.
	w, err = OpenMetrics(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(StepMetrics{Step: 4, Reward: 0.9}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	ms, err = ReadMetrics(filepath.Join(dir, MetricsFile))
	if err != nil || len(ms) != 4 || ms[3].Reward != 0.9 || ms[2].Reward != 0.3 {
		t.Fatalf("after resume: %+v (%v)", ms, err)
	}
}

func TestNewStepMetrics(t *testing.T) {
	trajs := []*agent.Trajectory{
		{IDs: make([]int, 10), PromptLen: 4, Mask: []uint8{0, 0, 0, 0, 1, 1, 0, 0, 1, 1}, Outcome: agent.Outcome{Reward: 1, Valid: true}, EM: true,
			Searches: []agent.SearchCall{{Kept: make([]string, 3)}, {Kept: make([]string, 1)}}, Turns: 3},
		{IDs: make([]int, 6), PromptLen: 4, Mask: []uint8{0, 0, 0, 0, 1, 1}, Turns: 1},
	}
	res := &StepResult{Advantages: []float64{0.7, -0.7}, Scores: []float64{1, 3}, HasACI: true,
		ACI: conformal.ACIStep{Alpha: 0.25, QHat: 2, AlphaNext: 0.24}, LowConfidence: 0.5, GradNorm: 1.5}
	m := NewStepMetrics(7, trajs, res, 2e9, 4e9)
	want := StepMetrics{Step: 7, Reward: 0.5, RewardStd: 0.5, EM: 0.5, FormatValid: 0.5, SearchCalls: 1, Searched: 0.5, EMSearched: 1, Redundant: 0.5, DocsPerSearch: 2,
		Turns: 2, ResponseLen: 4, PolicyTokens: 3, Trajectories: 2, Alpha: 0.25, AlphaNext: 0.24, QHat: 2, LowConfidence: 0.5,
		ScoreMean: 2, Scores: []float64{1, 3}, GradNorm: 1.5, AdvAbsMean: 0.7, TokensPerSec: 4, StepTime: 4, RolloutTime: 2}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("metrics\n got %+v\nwant %+v", m, want)
	}
}

// TestWritePlots draws Figure 2 and the reward curves for two runs and
// checks the PNGs: three and two panels wide, with both runs' colours.
func TestWritePlots(t *testing.T) {
	dirs := []string{filepath.Join(t.TempDir(), "cas"), filepath.Join(t.TempDir(), "no-aci")}
	for k, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := OpenMetrics(d, -1)
		if err != nil {
			t.Fatal(err)
		}
		for s := 1; s <= 30; s++ {
			x := float64(s)
			w.Write(StepMetrics{Step: s, SearchCalls: 1 + x/30 + float64(k), LowConfidence: 0.25 + 0.1*float64(k), Alpha: 0.25 - x/1000,
				Reward: x / 40, EM: x / 50, DocsPerSearch: 3.4})
		}
		w.Close()
	}
	runs, err := LoadPlotRuns(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Name != "cas" || runs[1].Name != "no-aci" || len(runs[0].Metrics) != 30 {
		t.Fatalf("runs %q %q", runs[0].Name, runs[1].Name)
	}
	out := t.TempDir()
	files, err := WritePlots(runs, out, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("files %v", files)
	}
	for i, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		b := img.Bounds()
		if want := []int{3, 3}[i]; b.Dx() < want*300 || b.Dy() < 200 {
			t.Errorf("%s: %dx%d pixels", f, b.Dx(), b.Dy())
		}
		colours := map[uint32]bool{}
		for y := b.Min.Y; y < b.Max.Y; y += 2 {
			for x := b.Min.X; x < b.Max.X; x += 2 {
				r, g, bb, _ := img.At(x, y).RGBA()
				if r != g || g != bb { // not grey: a data line
					colours[(r>>8)<<16|(g>>8)<<8|bb>>8] = true
				}
			}
		}
		if len(colours) < 2 {
			t.Errorf("%s: %d line colours, want the two runs'", f, len(colours))
		}
	}
	if _, err := LoadPlotRuns(t.TempDir()); err == nil {
		t.Error("a folder without metrics was plotted")
	}
}
