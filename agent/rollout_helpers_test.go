package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/internal/piecetok"
	"github.com/cas-engine/cas/internal/scriptpolicy"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/search"
)

// newPieceTok is the piece tokenizer (internal/piecetok) of the tiny golden
// models: the fixed parts of the prompts and observations, then tags and
// corpus words cycled to fill the range.
func newPieceTok(vocab int, family string) piecetok.Tokenizer {
	return piecetok.Tokenizer{Vocab: vocab, Fam: family, Fixed: fixedPieces, Cycled: tinyPieces}
}

var fixedPieces = []string{
	QwenSystemPrompt, Instruction, DirectInstruction, RAGInstruction, InvalidActionMessage,
	"<|im_start|>system\n", "<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n",
	"<|im_start|>user\n", "<think>\n\n</think>\n\n", "\nQuestion: ", "<information>", "</information>",
	"Doc ", " (Title: ", ")\n",
}

var tinyPieces = []string{
	"<search>", " south", "</search>", "<answer>", " world", "</answer>",
	"<think>", " family", "</think>", " California", " school", " state",
}

// tinyModel loads a golden tiny model once per test binary.
var tinyModels sync.Map // name → *qwen.Model

func tinyModel(t testing.TB, name string) *qwen.Model {
	t.Helper()
	dir := filepath.Dir(sharedtest.Path(t, "golden", name, "config.json"))
	if m, ok := tinyModels.Load(name); ok {
		return m.(*qwen.Model)
	}
	m, err := qwen.Load(dir, backendtest.Shared(t), qwen.LoadOptions{})
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	tinyModels.Store(name, m)
	return m
}

// testCorpus is a small BM25 retriever over the first n passages of the
// shared wiki-18 sample, plus the passages by id.
type testCorpus struct {
	retriever *search.BM25Retriever
	contents  map[string]string
}

var corpusOnce sync.Map // n → *testCorpus

func bm25Corpus(t testing.TB, n int) *testCorpus {
	t.Helper()
	src := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.jsonl")
	if c, ok := corpusOnce.Load(n); ok {
		return c.(*testCorpus)
	}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir, err := os.MkdirTemp("", "agent-bm25-")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "corpus.jsonl")
	var lines []string
	contents := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for len(lines) < n && sc.Scan() {
		var d struct {
			ID       string `json:"id"`
			Contents string `json:"contents"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, sc.Text())
		contents[d.ID] = d.Contents
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	corpus, err := search.BuildCorpusOffsets(path, filepath.Join(dir, "offsets.bin"), nil)
	if err != nil {
		t.Fatal(err)
	}
	an, err := search.NewAnalyzer(search.DefaultAnalyzerSettings())
	if err != nil {
		t.Fatal(err)
	}
	b, err := search.NewBM25Builder(an, search.DefaultBM25Params())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		d, err := search.ParseDocLine([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		b.AddText(d.Contents)
	}
	r, err := search.NewBM25Retriever(b.Finish(), corpus)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCorpus{retriever: r, contents: contents}
	corpusOnce.Store(n, c)
	return c
}

// scriptPolicy is the scripted model of internal/scriptpolicy as a Policy.
type scriptPolicy struct{ scriptpolicy.Policy }

func (p *scriptPolicy) NewSession(batch, capacity int, seed uint64) (Session, error) {
	return p.Start(batch), nil
}

// retrieverFunc adapts a function to search.Retriever.
type retrieverFunc func(ctx context.Context, queries []string, k int) ([][]search.Hit, error)

func (f retrieverFunc) Retrieve(ctx context.Context, queries []string, k int) ([][]search.Hit, error) {
	return f(ctx, queries, k)
}
