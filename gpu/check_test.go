// Package gpu_test rehearses the GPU check on the CPU: it builds the bundle
// of gpu/bundle.sh (the layout `make gpu-bundle` makes, here without the
// xla tag: the first cgo build of go-xla takes minutes on two cores) and
// runs the bundle's check.sh with --backend gocpu from a fresh folder, so
// that a broken bundle or script fails CI rather than the device call.
package gpu_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// checkReport is the part of gpu_check.json the test reads.
type checkReport struct {
	Backend  string `json:"backend"`
	Device   string `json:"device"`
	HFStatus string `json:"hf_status"`
	Tests    map[string]struct {
		Exit, Passed, Failed, Skipped int
	} `json:"tests"`
	Bench struct {
		Backend string `json:"backend"`
		Decode  []struct {
			Shape       string             `json:"shape"`
			Precision   string             `json:"precision"`
			PrefillTokS float64            `json:"prefill_tok_s"`
			Decode      map[string]float64 `json:"decode_tok_s"`
			WeightBytes int64              `json:"weight_bytes"`
		} `json:"decode"`
		GRPO []struct {
			Precision    string  `json:"precision"`
			Prompts      int     `json:"prompts"`
			Group        int     `json:"group"`
			RolloutS     float64 `json:"rollout_s"`
			ScoreS       float64 `json:"score_s"`
			UpdateS      float64 `json:"update_s"`
			StepS        float64 `json:"step_s"`
			PolicyTokens float64 `json:"policy_tokens_mean"`
			PeakMemBytes int64   `json:"peak_mem_bytes"`
		} `json:"grpo"`
		Errors []string `json:"errors"`
	} `json:"bench"`
	Failed []string `json:"failed"`
}

func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestCheckRehearsal builds the bundle, checks its layout and size, runs
// check.sh --backend gocpu in a fresh folder, and reads every figure back
// from gpu_check.json; then breaks the bundle and checks that check.sh
// refuses it with a message and a non-zero exit.
func TestCheckRehearsal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bundle (about a minute)")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	shared := sharedtest.Root()
	sharedtest.Path(t, "golden", "qwen3-tiny", "config.json")
	sharedtest.Path(t, "tokenizers", "qwen3", "tokenizer.json")
	root := sharedtest.RepoRoot()
	tmp := t.TempDir()
	bundle := filepath.Join(tmp, "bundle")
	env := []string{"CAS_SHARED=" + shared, "GO=" + goTool()}
	out, err := run(t, root, env, "bash", "gpu/bundle.sh", "--tags", "none", "--out", bundle)
	if err != nil {
		t.Fatalf("bundle.sh: %v\n%s", err, out)
	}
	if !strings.Contains(out, "MiB") {
		t.Errorf("bundle.sh did not print the size:\n%s", out)
	}
	var size int64
	for _, rel := range []string{"check.sh", "hf_check.py", "MANIFEST", "bin/cas.gz", "bin/qwen.test.gz", "bin/bert.test.gz",
		"bin/train.test.gz", "shared/golden/qwen2-tiny/model.safetensors", "shared/golden/bert-tiny/model.safetensors",
		"shared/golden/grpo/loss_cases.json", "shared/tokenizers/qwen3/tokenizer.json.gz"} {
		st, err := os.Stat(filepath.Join(bundle, rel))
		if err != nil {
			t.Fatalf("bundle lacks %s: %v", rel, err)
		}
		size += st.Size()
	}
	if size > 64<<20 {
		t.Errorf("bundle is %d bytes, over 64 MiB", size)
	}

	// Dry run: the commands a GPU run would execute.
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, work, nil, "bash", filepath.Join(bundle, "check.sh"), "--backend", "gocpu", "--dry-run")
	if err != nil || !strings.Contains(out, "bench gpu --shapes tiny") || !strings.Contains(out, "qwen.test -test.v") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}

	// The xla branch's discovery on a fake pip layout: the plugin given, the
	// nvidia-* libraries on LD_LIBRARY_PATH, the CUDA data dir in XLA_FLAGS.
	site := filepath.Join(tmp, "site-packages")
	plugin := filepath.Join(site, "jax_plugins", "xla_cuda13", "xla_cuda_plugin.so")
	for _, f := range []string{plugin, filepath.Join(site, "nvidia", "cu13", "lib", "libcudart.so.13"),
		filepath.Join(site, "nvidia", "cu13", "nvvm", "libdevice", "libdevice.10.bc")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err = run(t, work, nil, "bash", filepath.Join(bundle, "check.sh"), "--plugin", plugin, "--dry-run")
	for _, want := range []string{
		"backend xla:" + plugin + ",preallocate=false",
		"LD_LIBRARY_PATH=" + filepath.Join(site, "nvidia", "cu13", "lib"),
		"XLA_FLAGS=--xla_gpu_cuda_data_dir=" + filepath.Join(site, "nvidia", "cu13"),
		"bench gpu --shapes qwen2.5-0.5b,qwen2.5-3b --batches 1,64",
		"--grpo-shape qwen2.5-0.5b --grpo-precision bf16 --prompts 8 --group 5",
	} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("xla dry run lacks %q (err %v):\n%s", want, err, out)
		}
	}

	// The rehearsal, from a fresh folder with a relative output path.
	out, err = run(t, work, nil, "bash", filepath.Join(bundle, "check.sh"), "--backend", "gocpu", "--out", "out")
	if err != nil {
		t.Fatalf("check.sh --backend gocpu: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(work, "out", "gpu_check.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r checkReport
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("gpu_check.json: %v\n%s", err, raw)
	}
	if r.Backend != "gocpu" || len(r.Failed) != 0 {
		t.Errorf("backend %q, failed %v", r.Backend, r.Failed)
	}
	for _, name := range []string{"qwen", "bert", "train"} {
		tr, ok := r.Tests[name]
		if !ok || tr.Exit != 0 || tr.Failed != 0 || tr.Skipped != 0 || tr.Passed < 3 {
			t.Errorf("tests %s: %+v (present %v)", name, tr, ok)
		}
	}
	if r.HFStatus != "skipped" && r.HFStatus != "passed" {
		t.Errorf("hf_status %q", r.HFStatus)
	}
	if r.HFStatus == "skipped" && !strings.Contains(out, "(b) skipped: python3 with torch") {
		t.Errorf("the skipped transformers check has no message:\n%s", out)
	}
	if len(r.Bench.Decode) != 1 || len(r.Bench.GRPO) != 1 || len(r.Bench.Errors) != 0 {
		t.Fatalf("bench: %d decode rows, %d grpo rows, errors %v", len(r.Bench.Decode), len(r.Bench.GRPO), r.Bench.Errors)
	}
	d := r.Bench.Decode[0]
	if d.Shape != "tiny" || d.Precision != "bf16" || d.PrefillTokS <= 0 || d.Decode["batch1"] <= 0 || d.Decode["batch4"] <= 0 || d.WeightBytes <= 0 {
		t.Errorf("decode row %+v", d)
	}
	g := r.Bench.GRPO[0]
	if g.Precision != "bf16" || g.Prompts != 2 || g.Group != 2 || g.RolloutS <= 0 || g.ScoreS <= 0 || g.UpdateS <= 0 ||
		g.StepS < g.RolloutS+g.ScoreS || g.PeakMemBytes <= 0 || g.PolicyTokens <= 0 {
		t.Errorf("grpo row %+v", g)
	}
	for _, f := range []string{"bench.json", "bench.log", "test_qwen.log", "test_bert.log", "test_train.log", "device.txt"} {
		if !fileExists(filepath.Join(work, "out", f)) {
			t.Errorf("output lacks %s", f)
		}
	}

	// A broken bundle is refused before anything runs.
	if err := os.Remove(filepath.Join(bundle, "bin", "train.test.gz")); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, work, nil, "bash", filepath.Join(bundle, "check.sh"), "--backend", "gocpu", "--out", "out2")
	if err == nil || !strings.Contains(out, "bundle lacks bin/train.test") {
		t.Errorf("check.sh on a bundle without train.test: err %v\n%s", err, out)
	}
	out, err = run(t, work, nil, "bash", filepath.Join(bundle, "check.sh"), "--backend", "tpu")
	if err == nil || !strings.Contains(out, "want xla or gocpu") {
		t.Errorf("check.sh --backend tpu: err %v\n%s", err, out)
	}
}
