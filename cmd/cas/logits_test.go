package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/model/safetensors"
	"github.com/cas-engine/cas/model/safetensors/safetensorstest"
	"github.com/cas-engine/cas/model/tokenizer"
)

// runCas executes the cas root command in process with args.
func runCas(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runCasIn(t, "", args...)
}

// runCasIn executes the cas root command in process with stdin and args,
// returning its stdout, stderr and error.
func runCasIn(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// TestLogitsCmdGolden: `cas logits` on the golden inputs reproduces the
// reference logits where the mask is 1.
func TestLogitsCmdGolden(t *testing.T) {
	for _, name := range []string{"qwen2-tiny", "qwen3-tiny"} {
		t.Run(name, func(t *testing.T) {
			maxErr, maxAbs := goldenLogitErr(t, name)
			if maxErr > 1e-4*maxAbs {
				t.Errorf("max |Δlogit| %g > 1e-4 · %g", maxErr, maxAbs)
			}
		})
	}
}

// goldenLogitErr runs `cas logits` (with flags) on the golden inputs of
// model name and returns maskedLogitErr against its reference logits.
func goldenLogitErr(t *testing.T, name string, flags ...string) (maxErr, maxAbs float64) {
	t.Helper()
	dir := filepath.Dir(sharedtest.Path(t, "golden", name, "config.json"))
	in := filepath.Join(dir, "expected.safetensors")
	out := filepath.Join(t.TempDir(), "logits.safetensors")
	if _, stderr, err := runCas(t, append([]string{"logits", "--model", dir, "--in", in, "--out", out}, flags...)...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	return maskedLogitErr(t, readF32(t, out, "logits"), readF32(t, in, "logits"), readI64(t, in, "attention_mask"))
}

func TestLogitsCmdErrors(t *testing.T) {
	dir := filepath.Dir(sharedtest.Path(t, "golden", "qwen2-tiny", "config.json"))
	tmp := t.TempDir()
	noIDs := filepath.Join(tmp, "noids.safetensors")
	if err := safetensors.Write(noIDs, []safetensors.Tensor{safetensors.I64Tensor("ids", []int{1, 2}, []int64{1, 2})}, nil); err != nil {
		t.Fatal(err)
	}
	badID := filepath.Join(tmp, "badid.safetensors")
	if err := safetensors.Write(badID, []safetensors.Tensor{safetensors.I64Tensor("input_ids", []int{1, 2}, []int64{1, 384})}, nil); err != nil {
		t.Fatal(err)
	}
	badMask := filepath.Join(tmp, "badmask.safetensors")
	if err := safetensors.Write(badMask, []safetensors.Tensor{
		safetensors.I64Tensor("input_ids", []int{1, 2}, []int64{1, 2}),
		safetensors.I64Tensor("attention_mask", []int{2, 1}, []int64{1, 1}),
	}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in, model, want string
	}{
		{"missing input_ids", noIDs, dir, "input_ids"},
		{"id outside vocabulary", badID, dir, "outside the vocabulary"},
		{"mask shape", badMask, dir, "attention_mask has shape"},
		{"no model", noIDs, tmp, "config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCas(t, "logits", "--model", tc.model, "--in", tc.in, "--out", filepath.Join(tmp, "out.safetensors"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestGenerateCmd streams a greedy continuation of the tiny Qwen3 model
// decoded with the real Qwen3 tokenizer and checks it against the
// tokenizer's decoding of the golden greedy ids.
func TestGenerateCmd(t *testing.T) {
	dir := filepath.Dir(sharedtest.Path(t, "golden", "qwen3-tiny", "config.json"))
	tokPath := sharedtest.Path(t, "tokenizers", "qwen3", "tokenizer.json")
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	// Digits and operators are single byte-level tokens inside the tiny
	// model's 384-token vocabulary.
	prompt := "1+2="
	for _, id := range tok.Encode(prompt) {
		if id >= 384 {
			t.Fatalf("prompt token %d outside the tiny vocabulary", id)
		}
	}
	stdout, stderr, err := runCas(t, "generate", "--model", dir, "--tokenizer", tokPath, "--prompt", prompt,
		"--max-new-tokens", "6")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "6 generated") || !strings.Contains(stderr, "finish: length") {
		t.Errorf("summary %q", stderr)
	}
	if stdout == "" {
		t.Error("nothing streamed")
	}
	if _, _, err := runCas(t, "generate", "--model", dir, "--tokenizer", tokPath, "--prompt", "Hello world, this is long"); err == nil {
		t.Error("prompt outside the vocabulary accepted")
	}
}

func TestTextStream(t *testing.T) {
	// A fake decoder: token 1 is "é" split in two bytes, 2 is "a".
	decode := func(ids []int) string {
		var b []byte
		for _, id := range ids {
			switch id {
			case 1:
				b = append(b, 0xC3)
			case 11:
				b = append(b, 0xA9)
			case 2:
				b = append(b, 'a')
			}
		}
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	var out bytes.Buffer
	s := &textStream{w: &out, decode: decode}
	steps := []struct {
		id   int
		want string
	}{{2, "a"}, {1, "a"}, {11, "aé"}, {2, "aéa"}}
	for _, st := range steps {
		s.add(st.id)
		if out.String() != st.want {
			t.Fatalf("after %d: %q, want %q", st.id, out.String(), st.want)
		}
	}
}

func readF32(t *testing.T, path, name string) []float32 {
	t.Helper()
	v, _ := safetensorstest.Float32(t, safetensorstest.Open(t, path), name)
	return v
}

func readI64(t *testing.T, path, name string) []int64 {
	t.Helper()
	v, _ := safetensorstest.Int64(t, safetensorstest.Open(t, path), name)
	return v
}
