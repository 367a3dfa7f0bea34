package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCPUProfileFlag runs the binary with --cpuprofile and a relative path
// from a fresh directory: a command that succeeds, and one that fails on
// bad input, each leave a gzip-compressed pprof profile; an unwritable path
// is an error naming the flag, with a non-zero exit.
func TestCPUProfileFlag(t *testing.T) {
	wd := t.TempDir()
	for _, tc := range []struct {
		name     string
		args     []string
		wantExit int
	}{
		{"ok", []string{"--cpuprofile", "ok.pprof", "version"}, 0},
		{"fails", []string{"--cpuprofile", "fails.pprof", "tokenize", "--in", "missing.jsonl"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCasBin(t, wd, time.Minute, tc.args...)
			if code != tc.wantExit {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.wantExit, stdout, stderr)
			}
			raw, err := os.ReadFile(filepath.Join(wd, tc.args[1]))
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) < 2 || !bytes.Equal(raw[:2], []byte{0x1f, 0x8b}) {
				t.Fatalf("%s: %d bytes, not a gzip-compressed profile", tc.args[1], len(raw))
			}
		})
	}
	code, _, stderr := runCasBin(t, wd, time.Minute, "--cpuprofile", filepath.Join("no", "such", "dir", "p.pprof"), "version")
	if code == 0 || !strings.Contains(stderr, "--cpuprofile") {
		t.Fatalf("unwritable profile path: exit %d, stderr %q", code, stderr)
	}
}
