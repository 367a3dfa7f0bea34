package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runWorld(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, _, err := runCas(t, append([]string{"world"}, args...)...)
	return out, err
}

func TestWorldCmd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "w")
	out, err := runWorld(t, "--seed", "2", "--size", "small", "--out", dir,
		"--train", "100", "--aps-calib", "20", "--aci-calib", "10", "--test", "30", "--vocab", "400", "--two-hop", "0.4")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"train       100 questions (60 single-hop, 40 two-hop)", "test         30 questions", "tokenizer: 400 tokens"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	lines := map[string]int{"train.jsonl": 100, "aps_calib.jsonl": 20, "aci_calib.jsonl": 10, "test.jsonl": 30}
	for name, n := range lines {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Count(b, []byte("\n")); got != n {
			t.Errorf("%s: %d lines, want %d", name, got, n)
		}
	}
	for _, name := range []string{"corpus.jsonl", "tokenizer.json", "world.json"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", name, err)
		}
	}
}

func TestWorldCmdErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no out", []string{"--seed", "1"}, "--out is required"},
		{"bad size", []string{"--out", t.TempDir(), "--size", "huge"}, "unknown world size"},
		{"too many questions", []string{"--out", t.TempDir(), "--size", "small", "--test", "5000"}, "candidate questions"},
		{"out is a file", []string{"--out", file, "--size", "small"}, file},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runWorld(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
