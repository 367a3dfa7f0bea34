package tokenizer

import (
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

func BenchmarkEncodeQwen3(b *testing.B) {
	tok := qwen3(b)
	text := goldenCorpus(b, "qwen3.jsonl")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text)
	}
}

func BenchmarkEncodeBERT(b *testing.B) {
	tok := bert(b)
	text := goldenCorpus(b, "bert-base-uncased.jsonl")
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text)
	}
}
