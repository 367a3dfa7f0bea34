package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// A fenced ```sh block of README.md or configs/README.md runs in
// TestReadmeCommands unless the line before it says
//
//	<!-- test: parse-only (reason) -->
//
// (it needs a download or a GPU); then every cas command in it is still
// parsed by the real command tree: the subcommand exists, its flags are
// known and it takes the arguments given. ```console blocks are parse-only.
const parseOnlyMark = "<!-- test: parse-only"

// mdBlock is one fenced block of a Markdown file.
type mdBlock struct {
	file      string
	line      int
	lang      string
	text      string
	parseOnly bool
}

// readmeBlocks returns the fenced sh/console blocks of a Markdown file.
func readmeBlocks(t *testing.T, path string) []mdBlock {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var out []mdBlock
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "```") || len(l) == 3 {
			continue
		}
		b := mdBlock{file: filepath.Base(path), line: i + 1, lang: strings.TrimPrefix(l, "```")}
		for j := i - 1; j >= 0; j-- {
			if p := strings.TrimSpace(lines[j]); p != "" {
				b.parseOnly = strings.HasPrefix(p, parseOnlyMark)
				break
			}
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		b.text = strings.Join(body, "\n") + "\n"
		if b.lang == "sh" || b.lang == "console" {
			out = append(out, b)
		}
	}
	return out
}

// casCommands returns the cas command lines of a block (continuations
// joined, comments and prompts stripped, pipelines and & cut), as argument
// lists without the leading cas.
func casCommands(text string) [][]string {
	text = strings.ReplaceAll(text, "\\\n", " ")
	var cmds [][]string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "$ "))
		for _, part := range regexp.MustCompile(`\s(\||&&|;|&)\s?`).Split(" "+l+" ", -1) {
			// Shell variables ($a, ${s}) stand for plausible values.
			part = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`).ReplaceAllString(part, "1")
			words := shellWords(strings.TrimSpace(part))
			if len(words) == 0 {
				continue
			}
			if w := words[0]; w == "cas" || w == "bin/cas" || strings.HasSuffix(w, "/cas") {
				cmds = append(cmds, words[1:])
			}
		}
	}
	return cmds
}

// shellWords splits a command line like a POSIX shell would for the
// purpose of flag parsing: quotes removed, $variables kept as words, a #
// comment dropped.
func shellWords(s string) []string {
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '#' && !in:
			return words
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// parseCasCommand checks a cas command line against the command tree.
func parseCasCommand(args []string) error {
	root := newRootCmd()
	c, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if c == root {
		return fmt.Errorf("no subcommand")
	}
	if err := c.ParseFlags(rest); err != nil {
		return err
	}
	if c.HasSubCommands() && len(c.Flags().Args()) > 0 {
		return fmt.Errorf("unknown command %q for %q", c.Flags().Arg(0), c.CommandPath())
	}
	return c.ValidateArgs(c.Flags().Args())
}

// freePort returns a TCP port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// TestReadmeCommands parses every cas command of README.md and
// configs/README.md and runs, in order and in one fresh working directory
// beside a link to the shared data (so ../shared/… resolves as it does
// from the repository root), every block not marked parse-only. The only
// changes to the blocks: port 8000 becomes a free port and a bench's
// --duration 30s becomes 3s.
func TestReadmeCommands(t *testing.T) {
	repo := sharedtest.RepoRoot()
	shared := sharedtest.Path(t, "data", "corpus", "wiki18_harvested_10k.jsonl")
	shared = filepath.Dir(filepath.Dir(filepath.Dir(shared)))
	base := t.TempDir()
	if err := os.Symlink(shared, filepath.Join(base, "shared")); err != nil {
		t.Fatal(err)
	}
	wd := filepath.Join(base, "work")
	if err := os.Mkdir(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	// The runbook runs from the repository root: its configs must be there.
	if err := os.Symlink(filepath.Join(repo, "configs"), filepath.Join(wd, "configs")); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	ran := 0
	for _, md := range []string{"README.md", filepath.Join("configs", "README.md")} {
		for _, b := range readmeBlocks(t, filepath.Join(repo, md)) {
			name := fmt.Sprintf("%s:%d", b.file, b.line)
			cmds := casCommands(b.text)
			for _, args := range cmds {
				if err := parseCasCommand(args); err != nil {
					t.Errorf("%s: cas %s: %v", name, strings.Join(args, " "), err)
				}
			}
			if b.parseOnly || b.lang != "sh" || len(cmds) == 0 {
				continue
			}
			script := strings.ReplaceAll(b.text, "8000", port)
			script = strings.ReplaceAll(script, "--duration 30s", "--duration 3s")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			start := time.Now()
			out, err := shellRun(ctx, t, wd, script)
			cancel()
			if err != nil {
				t.Errorf("%s: the block fails (%v):\n%s\n--- output:\n%s", name, err, b.text, out)
				continue
			}
			ran++
			t.Logf("%s: ran in %.1fs", name, time.Since(start).Seconds())
		}
	}
	if ran < 4 {
		t.Errorf("only %d README blocks ran", ran)
	}
}

// TestCasCommandsParser: the README checker rejects what a user's shell
// would reject from cas (an unknown command, flag or stray argument).
func TestCasCommandsParser(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
	}{
		{"cas eval --model m --qa a.jsonl --qa b.jsonl --index ix --out o", true},
		{"cas eval --model m --qa a.jsonl b.jsonl --index ix --out o", false},
		{"bin/cas index search --index ix --query \"who wrote x\" -k 3", true},
		{"cas calibrate aps --qa q --index ix --candidates 20", true},
		{"cas index frobnicate", false},
		{"cas train --config c.yaml --outt x", false},
	}
	for _, tc := range tests {
		cmds := casCommands(tc.line)
		if len(cmds) != 1 {
			t.Fatalf("%q: %d commands", tc.line, len(cmds))
		}
		if err := parseCasCommand(cmds[0]); (err == nil) != tc.ok {
			t.Errorf("%q: err = %v, want ok=%v", tc.line, err, tc.ok)
		}
	}
}
