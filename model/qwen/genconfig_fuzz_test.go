package qwen

import (
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/testfile"
)

// FuzzLoadGenerationConfig: any generation_config.json next to a valid
// config.json gives EOS ids inside the vocabulary (config.json's first) or
// an error naming the file; never a panic.
func FuzzLoadGenerationConfig(f *testing.F) {
	for _, s := range []string{`{"eos_token_id": [98, 99]}`, `{"eos_token_id": 5}`, `{"eos_token_id": [100]}`,
		`{"eos_token_id": -1}`, `{"eos_token_id": "x"}`, `{"eos_token_id": 1e400}`, `{"eos_token_id": [1.5]}`, `[`, ``, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, gen []byte) {
		dir := t.TempDir()
		testfile.Write(t, dir, "config.json", []byte(minimalQwen2))
		path := testfile.Write(t, dir, "generation_config.json", gen)
		cfg, err := LoadConfig(dir)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name %s", err, path)
			}
			return
		}
		if len(cfg.EOSTokenID) == 0 || cfg.EOSTokenID[0] != 99 {
			t.Fatalf("config.json's EOS lost: %v", cfg.EOSTokenID)
		}
		for _, id := range cfg.EOSTokenID {
			if id < 0 || id >= cfg.VocabSize {
				t.Fatalf("EOS id %d outside [0, %d)", id, cfg.VocabSize)
			}
		}
		if len(slices.Compact(slices.Sorted(slices.Values(cfg.EOSTokenID)))) != len(cfg.EOSTokenID) {
			t.Fatalf("duplicate EOS ids %v", cfg.EOSTokenID)
		}
	})
}
