package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// findCmd returns the subcommand at path ("calibrate aps").
func findCmd(t *testing.T, path string) *cobra.Command {
	t.Helper()
	c, _, err := newRootCmd().Find(strings.Fields(path))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFlagVocabulary: each concept has one flag name in every subcommand;
// the old names still parse (hidden, deprecated) into the same value.
func TestFlagVocabulary(t *testing.T) {
	aliases := []struct {
		cmd, old, name, value string
	}{
		{"calibrate aps", "server", "retriever", "http://127.0.0.1:8000"},
		{"calibrate aps", "topk", "candidates", "17"},
		{"calibrate aps", "max-len", "encoder-max-len", "128"},
		{"calibrate aps", "tokenizer", "encoder-tokenizer", "t.json"},
		{"serve", "quiet", "no-error-log", "true"},
		{"serve", "tokenizer", "encoder-tokenizer", "t.json"},
		{"index build", "tokenizer", "encoder-tokenizer", "t.json"},
		{"index search", "max-len", "encoder-max-len", "64"},
		{"train", "quiet", "no-progress", "true"},
		{"train warm-start", "chat-family", "chat-template", "qwen3"},
		{"embed", "model", "encoder", "e5"},
		{"embed", "batch", "encoder-batch", "8"},
	}
	for _, a := range aliases {
		c := findCmd(t, a.cmd)
		if err := c.ParseFlags([]string{"--" + a.old + "=" + a.value}); err != nil {
			t.Errorf("%s --%s: %v", a.cmd, a.old, err)
			continue
		}
		if got := c.Flags().Lookup(a.name).Value.String(); got != a.value {
			t.Errorf("%s --%s=%s gave --%s %q", a.cmd, a.old, a.value, a.name, got)
		}
		if f := c.Flags().Lookup(a.old); !f.Hidden || f.Deprecated == "" {
			t.Errorf("%s --%s is not a hidden deprecated alias", a.cmd, a.old)
		}
	}
	// One name per concept: no visible flag uses a retired name.
	retired := map[string]string{"server": "retriever", "family": "chat-template", "chat-family": "chat-template",
		"quiet": "no-progress", "max-len": "encoder-max-len", "no-thinking": "think"}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if want, bad := retired[f.Name]; bad && !f.Hidden {
				t.Errorf("%s has --%s; the vocabulary's name is --%s", c.CommandPath(), f.Name, want)
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	root := newRootCmd()
	if !strings.Contains(root.Long, "--retriever URL") || !strings.Contains(root.Long, "exits 130") {
		t.Errorf("cas --help does not document the vocabulary:\n%s", root.Long)
	}
	// Qwen3 thinking has the same default in tokenize --chat and generate --chat.
	tk, gen := findCmd(t, "tokenize").Flags().Lookup("think"), findCmd(t, "generate").Flags().Lookup("think")
	if tk == nil || gen == nil || tk.DefValue != gen.DefValue {
		t.Errorf("--think defaults differ: tokenize %v, generate %v", tk, gen)
	}
}
