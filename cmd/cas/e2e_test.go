package main

// Tests that run the built `cas` binary the way the README tells a user to:
// from a fresh working directory, with relative paths, interrupted by a
// signal and run again.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cas-engine/cas/demo"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/train"
	"github.com/cas-engine/cas/train/traintest"
)

var (
	casBinOnce sync.Once
	casBinPath string
	casBinErr  error
)

// casBinary builds ./cmd/cas once per test process (go build, the
// Makefile's way) and returns the binary's path.
func casBinary(t *testing.T) string {
	t.Helper()
	casBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cas-bin-")
		if err != nil {
			casBinErr = err
			return
		}
		casBinPath = filepath.Join(dir, "cas")
		cmd := exec.Command("go", "build", "-o", casBinPath, ".")
		cmd.Dir = filepath.Join(sharedtest.RepoRoot(), "cmd", "cas")
		if out, err := cmd.CombinedOutput(); err != nil {
			casBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if casBinErr != nil {
		t.Fatal(casBinErr)
	}
	return casBinPath
}

// casRun is one invocation of the binary in a working directory.
type casRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	mu             sync.Mutex
	lines          chan string // stderr lines, as they come
	done           chan struct{}
	err            error
}

// startCas starts `cas args...` in dir with stderr a pipe (not a terminal).
func startCas(t *testing.T, dir string, args ...string) *casRun {
	t.Helper()
	r := &casRun{cmd: exec.Command(casBinary(t), args...), lines: make(chan string, 4096), done: make(chan struct{})}
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), "CAS_SHARED="+sharedtest.Root())
	r.cmd.Stdout = &r.stdout
	pipe, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			r.mu.Lock()
			r.stderr.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
			select {
			case r.lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, pipe)
		r.err = r.cmd.Wait()
		close(r.lines)
		close(r.done)
	}()
	return r
}

// waitFor reads stderr lines until one contains marker; false if the
// process ended first or timeout passed.
func (r *casRun) waitFor(marker string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				return false
			}
			if strings.Contains(l, marker) {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// wait waits for the process and returns its exit status.
func (r *casRun) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	go func() {
		for range r.lines {
		}
	}()
	select {
	case <-r.done:
	case <-time.After(timeout):
		r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("cas %s: still running after %v\n%s", strings.Join(r.cmd.Args[1:], " "), timeout, r.stderrText())
	}
	return r.cmd.ProcessState.ExitCode()
}

func (r *casRun) stderrText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

// runCasBin runs `cas args...` in dir to completion and returns its exit
// status, stdout and stderr.
func runCasBin(t *testing.T, dir string, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	r := startCas(t, dir, args...)
	code := r.wait(t, timeout)
	return code, r.stdout.String(), r.stderrText()
}

// shellRun runs a POSIX shell script in dir with the built binary first on
// PATH (as `cas`) and returns its combined output.
func shellRun(ctx context.Context, t *testing.T, dir, script string) (string, error) {
	t.Helper()
	bin := casBinary(t)
	cmd := exec.CommandContext(ctx, "sh", "-euc", script)
	cmd.Dir = dir
	path := filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	if shim := curlOnPath(t); shim != "" {
		path = shim + string(os.PathListSeparator) + path
	}
	cmd.Env = append(os.Environ(), "PATH="+path, "CAS_SHARED="+sharedtest.Root())
	// Its own process group, so that a server the script left in the
	// background is stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return buf.String(), err
}

// interruptAt starts `cas args...` in dir, sends sig once a stderr line
// contains marker, and checks the exit status and the resume hint.
func interruptAt(t *testing.T, dir, marker string, sig syscall.Signal, timeout time.Duration, args ...string) string {
	t.Helper()
	r := startCas(t, dir, args...)
	if !r.waitFor(marker, timeout) {
		r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("cas %s: no %q on stderr\n%s", strings.Join(args, " "), marker, r.stderrText())
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	code := r.wait(t, timeout)
	stderr := r.stderrText()
	if want := 128 + int(sig); code != want {
		t.Fatalf("cas %s interrupted by %v: exit %d, want %d\n%s", strings.Join(args, " "), sig, code, want, stderr)
	}
	if !strings.Contains(stderr, "Continue with:") {
		t.Errorf("interrupted run does not say how to continue:\n%s", stderr)
	}
	return stderr
}

// TestTrainBinaryInterruptResume: `cas train` on a small config with a
// relative --out, run from a fresh working directory, is stopped by SIGTERM
// after its first checkpoint (exit 143 and the command that continues it),
// the run folder is moved, and `cas train --resume` on the moved folder
// finishes (exit 0) with the same per-step metrics as an uninterrupted run.
func TestTrainBinaryInterruptResume(t *testing.T) {
	model := filepath.Dir(sharedtest.Path(t, "golden", "qwen2-tiny", "config.json"))
	wd := t.TempDir()
	if _, err := traintest.Write(filepath.Join(wd, "fixture"), 384); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`name: tiny
seed: 3
steps: 4
model: {path: %q, tokenizer: fixture/tokenizer.json}
data: {train: [fixture/questions.jsonl]}
retriever: {index: fixture/index}
aps: {qhat_file: fixture/qhat.json, candidates: 3}
rollout: {group_size: 2, max_turns: 2, max_turn_tokens: 10, max_obs_tokens: 20, max_response_tokens: 48}
grpo: {prompts_per_step: 2, mini_batch_prompts: 2, micro_batch: 4}
aci: {window: 30, calib_prompts: 3}
optim: {lr: 1.0e-3, warmup_ratio: 0}
checkpoint: {every: 1, keep: 2}
`, model)
	if err := os.WriteFile(filepath.Join(wd, "run.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const limit = 5 * time.Minute
	stderr := interruptAt(t, wd, "checkpoint run", syscall.SIGTERM, limit, "train", "--config", "run.yaml", "--out", "run")
	if !strings.Contains(stderr, "train --resume run") {
		t.Errorf("the resume hint does not name the run folder:\n%s", stderr)
	}
	saved, err := os.ReadFile(filepath.Join(wd, "run", train.RunConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(saved), filepath.Join(wd, "fixture", "questions.jsonl")) {
		t.Errorf("config.yaml does not record data.train as an absolute path:\n%s", saved)
	}
	// The run folder moves; its recorded paths still resolve.
	if err := os.Rename(filepath.Join(wd, "run"), filepath.Join(wd, "moved")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCasBin(t, wd, limit, "train", "--resume", "moved", "--no-progress")
	if code != 0 || !strings.Contains(stdout, "trained 4 of 4 steps") {
		t.Fatalf("resume: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCasBin(t, wd, limit, "train", "--config", "run.yaml", "--out", "straight", "--no-progress")
	if code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	resumed, err1 := train.ReadMetrics(filepath.Join(wd, "moved", train.MetricsFile))
	straight, err2 := train.ReadMetrics(filepath.Join(wd, "straight", train.MetricsFile))
	if err1 != nil || err2 != nil || len(resumed) != 4 || len(straight) != 4 {
		t.Fatalf("metrics: %d and %d lines (%v, %v)", len(resumed), len(straight), err1, err2)
	}
	for i := range straight {
		a, b := resumed[i].WithoutTiming(), straight[i].WithoutTiming()
		a.Run, b.Run = "", ""
		if fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
			t.Errorf("step %d differs after the interruption:\nresumed  %+v\nstraight %+v", i+1, a, b)
		}
	}
	// Results are shareable: files 0644, folders 0755.
	checkShareable(t, filepath.Join(wd, "moved"))
}

// checkShareable fails for a file under root that others cannot read
// (mode 0644) or a folder they cannot enter (0755).
func checkShareable(t *testing.T, root string) {
	t.Helper()
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o644)
		if fi.IsDir() {
			want = 0o755
		}
		if fi.Mode().Perm()&want != want {
			t.Errorf("%s: mode %v, want at least %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestQuickDemoBinary is the README's `cas demo --quick` as a new user runs
// it: from a fresh working directory with the default relative output
// folder, interrupted by Ctrl-C (SIGINT) right after the first GRPO
// checkpoint (exit 130, the command to continue), run again to the end
// (exit 0), then checked: report.md, result.json and the plots exist and
// the numbers meet the claims (EM with search above EM without, EM
// after GRPO no worse than after the warm start beyond noise, APS test
// coverage at its bound). A copy of the finished folder elsewhere resumes
// every stage; another seed in the same folder is refused.
func TestQuickDemoBinary(t *testing.T) {
	wd := t.TempDir()
	out := filepath.Join(wd, "runs", "demo-quick")
	const limit = 40 * time.Minute // 2.7 min per run on a quiet 2-core machine; generous for a loaded one
	stderr := interruptAt(t, wd, "checkpoint runs/demo-quick/grpo/"+demo.VariantCAS, syscall.SIGINT, limit, "demo", "--quick")
	if !strings.Contains(stderr, "demo --quick") {
		t.Errorf("the resume hint is not the same command:\n%s", stderr)
	}
	if _, err := train.LatestCheckpoint(filepath.Join(out, "grpo", demo.VariantCAS)); err != nil {
		t.Fatalf("no GRPO checkpoint after the interruption: %v", err)
	}
	code, stdout, stderr := runCasBin(t, wd, limit, "demo", "--quick")
	if code != 0 {
		t.Fatalf("resumed demo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "resumed cas at step 1") {
		t.Errorf("the GRPO run did not resume from its checkpoint:\n%s", stderr)
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("stderr is not a terminal but holds carriage-return progress frames")
	}
	t.Logf("resumed run:\n%s", stdout)

	var res demo.Result
	raw, err := os.ReadFile(filepath.Join(out, demo.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result.json: %v", err)
	}
	cfg := demo.QuickConfig(1)
	for _, st := range res.Timings[:4] { // world, index, aps, warm
		if !st.Resumed {
			t.Errorf("stage %s ran again after the interruption", st.Stage)
		}
	}
	nr, ok1 := res.Eval(demo.EvalNoRetrieval)
	ws, ok2 := res.Eval(demo.EvalWarmStart)
	cas, ok3 := res.Eval(demo.VariantCAS)
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
		ms, err := train.ReadMetrics(filepath.Join(out, "grpo", v.Name, train.MetricsFile))
		if err != nil || len(ms) != cfg.GRPO.Steps {
			t.Errorf("variant %s: %d metric lines, want %d (%v)", v.Name, len(ms), cfg.GRPO.Steps, err)
		}
	}
	if w := res.Warm; w == nil || w.Steps != cfg.Warm.Steps || len(w.Losses) < 6 ||
		!(mean(w.Losses[len(w.Losses)-5:]) < w.Losses[0]/2) {
		t.Errorf("warm start did not halve its loss: %+v", w)
	}
	report, err := os.ReadFile(filepath.Join(out, demo.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| CAS: GRPO + APS + ACI |", "| No retrieval (direct answer) |", "## APS on retrieval", "figure2.png",
		"## What GRPO and ACI did, measured", "### ACI's low-confidence ratio against ρ", "### Reliability: answer-span NLL bins against EM"} {
		if !bytes.Contains(report, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, e := range res.Evals {
		if len(e.Outcomes) != e.Questions || len(e.Reliability) == 0 || e.Redundant < 0 || e.Redundant > e.SearchCalls || e.TwoHopTwoSearches < 0 || e.TwoHopTwoSearches > 1 {
			t.Errorf("%s: measurements %d outcomes of %d, %d reliability bins, redundant %.3f of %.3f searches, two-hop chained %.3f",
				e.Name, len(e.Outcomes), e.Questions, len(e.Reliability), e.Redundant, e.SearchCalls, e.TwoHopTwoSearches)
		}
	}
	if ms, err := train.ReadMetrics(filepath.Join(out, "grpo", demo.VariantCAS, train.MetricsFile)); err == nil {
		for _, m := range ms {
			if len(m.Scores) != m.Trajectories {
				t.Errorf("step %d: %d ACI scores logged for %d trajectories", m.Step, len(m.Scores), m.Trajectories)
			}
		}
	}
	for _, f := range []string{train.Figure2PNG, train.RewardPNG, demo.APSHistogramPNG, demo.WarmLossPNG, demo.EvalPNG,
		demo.TrainingPNG, demo.SearchesPNG, demo.ACIPNG, demo.ReliabilityPNG} {
		b, err := os.ReadFile(filepath.Join(out, demo.PlotsDir, f))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("plot %s: not a PNG (%v)", f, err)
		}
	}
	checkShareable(t, out)

	// The finished folder, copied elsewhere, resumes every stage there and
	// reports the same numbers.
	elsewhere := filepath.Join(wd, "copy")
	if err := os.Mkdir(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	if o, err := exec.Command("cp", "-a", filepath.Join(wd, "runs"), elsewhere).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, o)
	}
	code, stdout, stderr = runCasBin(t, elsewhere, limit, "demo", "--quick")
	if code != 0 {
		t.Fatalf("finished demo copied elsewhere: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var again demo.Result
	if raw, err := os.ReadFile(filepath.Join(elsewhere, "runs", "demo-quick", demo.ResultFile)); err != nil || json.Unmarshal(raw, &again) != nil {
		t.Fatalf("copied result.json: %v", err)
	}
	for _, st := range again.Timings {
		if !st.Resumed {
			t.Errorf("stage %s ran again on a finished run", st.Stage)
		}
	}
	if a, _ := again.Eval(demo.VariantCAS); a.EM != cas.EM {
		t.Errorf("rerun changed CAS EM %.3f → %.3f", cas.EM, a.EM)
	}
	// Another config in the same folder is refused, with a non-zero exit.
	code, _, stderr = runCasBin(t, wd, limit, "demo", "--quick", "--seed", "2")
	if code != 1 || !strings.Contains(stderr, "different run") {
		t.Errorf("a different config in the same folder: exit %d\n%s", code, stderr)
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
