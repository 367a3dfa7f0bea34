package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/model/qwen"
)

var errKilled = errors.New("killed (simulated)")

// warmFixture is a tiny warm start: a 1-layer Qwen3, 24 random
// trajectories, 12 steps of 4 with a save every 3 and the annealing from
// step 9, the passages in the loss at λ = 0.25.
type warmFixture struct {
	t        *testing.T
	qc       *qwen.Config
	examples []*agent.Trajectory
	w        WarmSettings
	tok      string
	// afterStep is passed to the warm start (the SIGKILL test's child).
	afterStep func(int)
}

func newWarmFixture(t *testing.T) *warmFixture {
	mc := ModelConfig{Hidden: 32, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16, Intermediate: 64, MaxPositions: 256}
	qc, err := mc.QwenConfig(300, 299)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	tok := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(tok, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &warmFixture{t: t, qc: qc, tok: tok,
		examples: randomTrajectories(rng, 24, 5, 20, 10, 40, 299, func() bool { return rng.IntN(3) > 0 }),
		w:        WarmSettings{Steps: 12, Batch: 4, LR: 1e-2, Warmup: 2, Chunks: 4, AnnealFrom: 0.75, AnnealFactor: 0.3, EnvWeight: 0.25}}
}

// run runs (or resumes) the warm start in root; crash, when set, is the
// save hook; cancelAt > 0 cancels the context before that step.
func (f *warmFixture) run(root string, crash func(string) error, cancelAt int) (*qwen.Model, WarmReport, error) {
	be, err := backend.New()
	if err != nil {
		f.t.Fatal(err)
	}
	saver := &warmSaver{root: root, tokPath: f.tok, crash: crash}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rep WarmReport
	wr := &warmRun{w: f.w, seed: 1, saver: saver, logf: func(string, ...any) {},
		fresh: func() (*qwen.Model, error) { return qwen.NewRandom(f.qc, be, 5) },
		load:  func(dir string) (*qwen.Model, error) { return saver.load(dir, be) }}
	wr.afterStep = func(step int) {
		if f.afterStep != nil {
			f.afterStep(step)
		}
		if step == cancelAt-1 {
			cancel()
		}
	}
	m, _, err := wr.train(ctx, f.examples, &rep)
	return m, rep, err
}

func weightsOf(t *testing.T, m *qwen.Model) map[string][]float32 {
	out := map[string][]float32{}
	if err := m.ForEachWeight(func(name string, _ []int, v []float32) error {
		out[name] = slices.Clone(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWarmStartResumesExactly kills the warm start at every point of a
// save where the disk state differs (model written, folder written, folder
// renamed, latest moved) and by Ctrl-C between steps, resumes it, and
// checks that the resumed run ends with the same per-step cross-entropies
// and bit-identical weights as an uninterrupted run, with one committed
// save and no temporary folder left.
func TestWarmStartResumesExactly(t *testing.T) {
	f := newWarmFixture(t)
	ref, refRep, err := f.run(filepath.Join(t.TempDir(), warmSavesDir), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	refW := weightsOf(t, ref)
	cases := []struct {
		name     string
		point    string // save hook point of the second save (step 6)
		cancelAt int
	}{
		{"kill after the model is written", "model written", 0},
		{"kill after the save folder is written", "folder written", 0},
		{"kill after the folder is renamed", "folder renamed", 0},
		{"kill after latest moved", "latest moved", 0},
		{"kill at the final save", "final", 0},
		{"Ctrl-C before step 5", "", 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), warmSavesDir)
			var crash func(string) error
			if tc.point != "" {
				saves := 0
				crash = func(p string) error {
					if p == "model written" {
						saves++
					}
					if (tc.point == "final" && saves == 4 && p == "folder renamed") || (saves == 2 && p == tc.point) {
						return errKilled
					}
					return nil
				}
			}
			_, _, err := f.run(root, crash, tc.cancelAt)
			if err == nil {
				t.Fatal("the interrupted run did not stop")
			}
			m, rep, err := f.run(root, nil, 0)
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			if !slices.Equal(rep.Losses, refRep.Losses) || rep.Steps != refRep.Steps || rep.Tokens != refRep.Tokens {
				t.Fatalf("resumed losses %v (%d steps, %d tokens), uninterrupted %v (%d, %d)", rep.Losses, rep.Steps, rep.Tokens, refRep.Losses, refRep.Steps, refRep.Tokens)
			}
			for name, v := range weightsOf(t, m) {
				if !slices.Equal(v, refW[name]) {
					t.Fatalf("weight %s differs from the uninterrupted run's", name)
				}
			}
			entries, _ := os.ReadDir(root)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if strings.Join(names, ",") != "latest,step-000012" {
				t.Errorf("saves left: %v, want latest and step-000012", names)
			}
		})
	}
}

// TestWarmStartSIGKILL runs the warm start in a child process, kills it
// with SIGKILL at points around its steps and saves (after step k is
// reported, plus a random delay of up to 4 ms: inside the step that
// follows or inside the save), resumes it here, and checks the resumed run
// against the uninterrupted one, bit for bit.
func TestWarmStartSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	f := newWarmFixture(t)
	ref, refRep, err := f.run(filepath.Join(t.TempDir(), warmSavesDir), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	refW := weightsOf(t, ref)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for _, after := range []int{1, 3, 3, 6, 8, 9, 12} {
		root := filepath.Join(t.TempDir(), warmSavesDir)
		child := exec.Command(exe, "-test.run=^TestWarmStartChild$", "-test.count=1")
		child.Env = append(os.Environ(), "CAS_WARM_CHILD_ROOT="+root)
		out, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(rng.IntN(4000)) * time.Microsecond
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == fmt.Sprintf("step %d", after) {
				time.Sleep(delay)
				child.Process.Kill()
				break
			}
		}
		go io.Copy(io.Discard, out)
		child.Wait()
		var left []string // what the kill left on disk
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			left = append(left, e.Name())
		}
		m, rep, err := f.run(root, nil, 0)
		if err != nil {
			t.Fatalf("kill after step %d + %v: resume: %v", after, delay, err)
		}
		if !slices.Equal(rep.Losses, refRep.Losses) {
			t.Fatalf("kill after step %d + %v: resumed losses %v, uninterrupted %v", after, delay, rep.Losses, refRep.Losses)
		}
		for name, v := range weightsOf(t, m) {
			if !slices.Equal(v, refW[name]) {
				t.Fatalf("kill after step %d + %v: weight %s differs", after, delay, name)
			}
		}
		t.Logf("SIGKILL after step %d + %v (left %v): resumed to identical losses and weights", after, delay, left)
	}
}

// TestWarmStartChild is TestWarmStartSIGKILL's child process (it does
// nothing otherwise): it runs the fixture's warm start in
// $CAS_WARM_CHILD_ROOT, printing "step N" after each step.
func TestWarmStartChild(t *testing.T) {
	root := os.Getenv("CAS_WARM_CHILD_ROOT")
	if root == "" {
		t.Skip("child process of TestWarmStartSIGKILL")
	}
	f := newWarmFixture(t)
	f.afterStep = func(step int) { fmt.Fprintf(os.Stdout, "step %d\n", step) }
	if _, _, err := f.run(root, nil, 0); err != nil {
		t.Fatal(err)
	}
}

// FuzzWarmState: any latest pointer and warm_state.json give a save the
// sampler accepts, or an error naming the file; never a panic.
func FuzzWarmState(f *testing.F) {
	f.Add("step-000002", []byte(`{"report":{"steps":2,"losses":[1,2]},"sft":{"rng":"cGNnOgAAAAAAAAABAAAAAAAAAAI=","order":[[0,1],[2,3]],"pos":1}}`))
	f.Add("step-000002", []byte(`{"report":{"steps":2,"losses":[1,2]},"sft":{"rng":"AA==","order":[[0,9]],"pos":5}}`))
	f.Add("step-2", []byte(`{}`))
	f.Add("../x", []byte(`[`))
	f.Fuzz(func(t *testing.T, latest string, state []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "step-000002")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, warmStateFile), state, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, warmLatestFile), []byte(latest), 0o644); err != nil {
			t.Fatal(err)
		}
		ws := &warmSaver{root: root}
		d, st, ok, err := ws.latest()
		if err != nil || !ok {
			return
		}
		if filepath.Dir(d) != root {
			t.Fatalf("save %s outside %s", d, root)
		}
		if err := st.SFT.Check(2, 4); err != nil {
			return
		}
		for _, b := range st.SFT.Order[st.SFT.Pos:] {
			for _, i := range b {
				if i < 0 || i >= 4 {
					t.Fatalf("accepted an example index %d outside [0, 4)", i)
				}
			}
		}
	})
}
