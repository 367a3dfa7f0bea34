package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/schollz/progressbar/v3"
)

// TestPlainProgress: on a non-terminal a progress bar becomes one plain
// line per interval plus its final state, with no '\r'; other text passes.
func TestPlainProgress(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(0, 0)
	p := newPlainProgress(&buf, 5*time.Second, func() time.Time { return clock })
	p.Write([]byte("a log line\n"))
	bar := progressbar.NewOptions(100, progressbar.OptionSetWriter(p), progressbar.OptionSetDescription("index"),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(0),
		progressbar.OptionOnCompletion(func() { p.Write([]byte("\n")) }))
	for i := 0; i < 100; i++ {
		clock = clock.Add(time.Second) // 100 s: about one line per 5 s
		bar.Add(1)
	}
	p.Write([]byte("done\n"))
	out := buf.String()
	if strings.ContainsRune(out, '\r') || strings.Contains(out, "\x1b[") {
		t.Fatalf("carriage returns or ANSI codes left:\n%q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] != "a log line" || lines[len(lines)-1] != "done" {
		t.Fatalf("pass-through text lost:\n%s", out)
	}
	bars := lines[1 : len(lines)-1]
	if len(bars) < 15 || len(bars) > 22 {
		t.Fatalf("%d progress lines for 100 s at one per 5 s:\n%s", len(bars), out)
	}
	if last := bars[len(bars)-1]; !strings.Contains(last, "100/100") || !strings.HasPrefix(last, "index") {
		t.Fatalf("last progress line %q is not the finished bar", last)
	}
}
