package tokenizer

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// goldenCorpus concatenates the texts of a golden file.
func goldenCorpus(b *testing.B, name string) string {
	var sb strings.Builder
	for _, c := range readGolden(b, "golden", "tokenizer", name) {
		sb.WriteString(c.Text)
		sb.WriteByte('\n')
	}
	return sb.String()
}

func BenchmarkLoadQwen3(b *testing.B) {
	path := sharedtest.Path(b, "tokenizers", "qwen3", "tokenizer.json")
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeGolden encodes each golden corpus with its tokenizer.
func BenchmarkEncodeGolden(b *testing.B) {
	for _, tc := range []struct {
		name, corpus string
		tok          func(testing.TB) *Tokenizer
	}{{"qwen3", "qwen3.jsonl", qwen3}, {"bert", "bert-base-uncased.jsonl", bert}} {
		b.Run(tc.name, func(b *testing.B) {
			tok := tc.tok(b)
			text := goldenCorpus(b, tc.corpus)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tok.Encode(text)
			}
		})
	}
}

// wikiText is the passages of the shared 1k-passage Wikipedia sample.
func wikiText(b *testing.B) string {
	path := sharedtest.Path(b, "data", "corpus", "wiki18_sample_1k.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var p struct {
			Contents string `json:"contents"`
		}
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			b.Fatal(err)
		}
		sb.WriteString(p.Contents)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// BenchmarkEncodeWiki encodes English Wikipedia passages, one Encode per
// passage as the retriever and the agent do.
func BenchmarkEncodeWiki(b *testing.B) {
	passages := strings.SplitAfter(wikiText(b), "\n")
	n := 0
	for _, p := range passages {
		n += len(p)
	}
	for _, tc := range []struct {
		name string
		tok  func(testing.TB) *Tokenizer
	}{{"qwen3", qwen3}, {"bert", bert}} {
		b.Run(tc.name, func(b *testing.B) {
			tok := tc.tok(b)
			b.SetBytes(int64(n))
			var ids []int
			for b.Loop() {
				for _, p := range passages {
					ids = tok.AppendEncode(ids[:0], p)
				}
			}
		})
	}
}
