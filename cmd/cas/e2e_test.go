package main

// Tests that run the built `cas` binary the way the README tells a user to:
// from a fresh working directory, with relative paths, interrupted by a
// signal and run again.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", casBinPath, ".")
		cmd.Dir = filepath.Dir(file)
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
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CAS_SHARED="+sharedtest.Root())
	out, err := cmd.CombinedOutput()
	return string(out), err
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
	code, stdout, stderr := runCasBin(t, wd, limit, "train", "--resume", "moved", "--quiet")
	if code != 0 || !strings.Contains(stdout, "trained 4 of 4 steps") {
		t.Fatalf("resume: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCasBin(t, wd, limit, "train", "--config", "run.yaml", "--out", "straight", "--quiet")
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
