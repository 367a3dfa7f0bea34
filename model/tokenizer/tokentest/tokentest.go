// Package tokentest loads the real tokenizers of the shared data once per
// test binary, for the tests of the packages above model/tokenizer (its own
// tests cannot import this package).
package tokentest

import (
	"sync"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/model/tokenizer"
)

type loaded struct {
	once sync.Once
	tok  *tokenizer.Tokenizer
	err  error
}

var byPath sync.Map // path → *loaded

// Shared loads the tokenizer.json at the shared path rel (sharedtest.Path:
// a missing file skips the test, or fails it with CI=true) the first time
// it is asked for; a load error fails tb.
func Shared(tb testing.TB, rel ...string) *tokenizer.Tokenizer {
	tb.Helper()
	path := sharedtest.Path(tb, rel...)
	v, _ := byPath.LoadOrStore(path, &loaded{})
	l := v.(*loaded)
	l.once.Do(func() { l.tok, l.err = tokenizer.Load(path) })
	if l.err != nil {
		tb.Fatal(l.err)
	}
	return l.tok
}

// Qwen3 is the shared Qwen3 tokenizer (tokenizers/qwen3/tokenizer.json).
func Qwen3(tb testing.TB) *tokenizer.Tokenizer {
	tb.Helper()
	return Shared(tb, "tokenizers", "qwen3", "tokenizer.json")
}
