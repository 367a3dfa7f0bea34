package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// runTokenize runs `cas tokenize args...` with stdin.
func runTokenize(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	out, _, err := runCasIn(t, stdin, append([]string{"tokenize"}, args...)...)
	return out, err
}

func TestTokenizeCmd(t *testing.T) {
	qwen := filepath.Dir(sharedtest.Path(t, "tokenizers", "qwen3", "tokenizer.json"))
	bertTok := sharedtest.Path(t, "tokenizers", "bert-base-uncased", "tokenizer.json")
	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"encode", "\"Hello, world!\"\n", []string{"--tokenizer", qwen}, "{\"ids\":[9707,11,1879,0]}\n"},
		{"decode", "{\"ids\":[151644,9707,11,1879,0]}\n", []string{"--tokenizer", qwen, "--decode", "--skip-special"}, "\"Hello, world!\"\n"},
		{"chat", "[{\"role\":\"user\",\"content\":\"Hi\"}]\n", []string{"--tokenizer", qwen, "--chat", "--think=false"},
			"{\"ids\":[151644,872,198,13048,151645,198,151644,77091,198,151667,271,151668,271]}\n"},
		{"bert special", "\"query: hello world\"\n", []string{"--tokenizer", bertTok, "--special"}, "{\"ids\":[101,23032,1024,7592,2088,102]}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runTokenize(t, tc.stdin, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTokenizeCmdFiles(t *testing.T) {
	qwen := sharedtest.Path(t, "tokenizers", "qwen3", "tokenizer.json")
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(in, []byte("\"a b\"\n\"x\xffy\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runTokenize(t, "", "--tokenizer", qwen, "--in", in, "--out", out)
	if err == nil || !strings.Contains(err.Error(), in+":2: invalid UTF-8") {
		t.Fatalf("error %v, want it to name %s:2", err, in)
	}
	if _, statErr := os.Stat(out); !os.IsNotExist(statErr) {
		t.Errorf("output %s exists after a failed run", out)
	}
	if err := os.WriteFile(in, []byte("\"a b\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runTokenize(t, "", "--tokenizer", qwen, "--in", in, "--out", out); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); string(got) != "{\"ids\":[64,293]}\n" {
		t.Errorf("output %q", got)
	}
	if _, err := runTokenize(t, "", "--tokenizer", qwen, "--decode", "--chat"); err == nil {
		t.Error("--decode --chat accepted")
	}
}
