package tokenizer

import (
	"slices"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// FuzzParse feeds arbitrary bytes to the tokenizer.json loader: it must
// return an error or a tokenizer that encodes and decodes, never panic.
func FuzzParse(f *testing.F) {
	f.Add(smallBPE(f, false))
	f.Add(smallBPE(f, true))
	for _, s := range []string{
		`{"model":{"type":"WordPiece","vocab":{"[UNK]":0,"a":1,"##b":2}},"normalizer":{"type":"BertNormalizer"},"pre_tokenizer":{"type":"BertPreTokenizer"},"decoder":{"type":"WordPiece"}}`,
		`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"],"unk_token":"a","fuse_unk":true}}`,
		`{"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"String":" "},"behavior":"MergedWithNext"},{"type":"Digits","individual_digits":true}]},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`,
		`{"normalizer":{"type":"Sequence","normalizers":[{"type":"NFKC"},{"type":"Replace","pattern":{"Regex":"\\s+"},"content":" "}]},"model":{"type":"BPE","vocab":{"a":0},"merges":[],"byte_fallback":true}}`,
		`{"model":{"type":"BPE","vocab":{"\u00e9":0},"merges":[]}}`,
		`{"model":{"type":"BPE","vocab":{"a":99999999},"merges":[]}}`,
		`{"model":`, `[]`, `null`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data)
		if err != nil {
			return
		}
		ids := tok.EncodeWithSpecial("Hello wörld <search> 12 'S \u00a0\n")
		tok.Decode(ids, true)
		tok.Decode([]int{0, 1, 2, -5, 1 << 40}, false)
		tok.RenderChat([]Message{{Role: "user", Content: "x"}}, ChatOptions{})
	})
}

// FuzzEncodeSmall checks decode(encode(s)) == s for a byte-level BPE
// without normalizer (invalid UTF-8 first becomes U+FFFD).
func FuzzEncodeSmall(f *testing.F) {
	tok := mustParse(f, smallBPE(f, false))
	for _, s := range []string{"hello world", "a<search>b</search>", "<|endoftext|>", "\xff\xfe", "  \n\t", "中文😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		if got, want := tok.Decode(ids, false), lossyUTF8(s); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q (ids %v)", s, got, want, ids)
		}
	})
}

// seedGolden adds every n-th text of a golden tokenizer file to the corpus.
func seedGolden(f *testing.F, name string, n int) {
	for i, c := range readGolden(f, "golden", "tokenizer", name) {
		if i%n == 0 {
			f.Add(c.Text)
		}
	}
}

// FuzzEncodeQwen3 checks decode(encode(s)) == NFC(s) with the real Qwen3
// tokenizer, and that encoding is deterministic.
func FuzzEncodeQwen3(f *testing.F) {
	tok := qwen3(f)
	seedGolden(f, "qwen3.jsonl", 50)
	f.Add("e\u0301<|im_end|>\u0301 'ſ")
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		if got, want := tok.Decode(ids, false), norm.NFC.String(lossyUTF8(s)); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
		if again := tok.Encode(s); !slices.Equal(again, ids) {
			t.Fatalf("Encode(%q) not deterministic: %v then %v", s, ids, again)
		}
	})
}

// FuzzEncodeBERT checks that every id BERT produces is in the vocabulary.
func FuzzEncodeBERT(f *testing.F) {
	tok := bert(f)
	seedGolden(f, "bert-base-uncased.jsonl", 30)
	f.Add("Ünïcödé 中文 \x00\u200b [CLS]")
	f.Fuzz(func(t *testing.T, s string) {
		for _, id := range tok.EncodeWithSpecial(s) {
			if _, ok := tok.IDToken(id); !ok {
				t.Fatalf("Encode(%q) produced unknown id %d", s, id)
			}
		}
	})
}
