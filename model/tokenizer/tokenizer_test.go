package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/cas-engine/cas/internal/testfile"
)

// smallBPE returns a minimal byte-level BPE tokenizer.json of the kind the
// demo trains: the 256-character alphabet with ids equal to the byte
// values, a few merges, the default ByteLevel pre-tokenizer (GPT-2 regex)
// and added tags. pairs selects the ["a","b"] merges form.
func smallBPE(t testing.TB, pairs bool) []byte {
	t.Helper()
	alpha := newByteLevelAlphabet()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[alpha.byteToStr[b]] = b
	}
	merges := [][2]string{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"Ġw", "o"}}
	for i, m := range merges {
		vocab[m[0]+m[1]] = 256 + i
	}
	var mergesJSON any
	if pairs {
		mergesJSON = merges
	} else {
		var lines []string
		for _, m := range merges {
			lines = append(lines, m[0]+" "+m[1])
		}
		mergesJSON = lines
	}
	doc := map[string]any{
		"version": "1.0",
		"added_tokens": []map[string]any{
			{"id": 262, "content": "<search>", "special": false, "normalized": false},
			{"id": 263, "content": "</search>", "special": false, "normalized": false},
			{"id": 264, "content": "<|endoftext|>", "special": true, "normalized": false},
		},
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel"},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": mergesJSON},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustParse(t testing.TB, data []byte) *Tokenizer {
	t.Helper()
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSmallBPE(t *testing.T) {
	for _, pairs := range []bool{false, true} {
		tok := mustParse(t, smallBPE(t, pairs))
		for _, tc := range []struct {
			text string
			want []int
		}{
			{"hello world", []int{259, 261, 'r', 'l', 'd'}},
			{"hello", []int{259}},
			{"hellohe", []int{259, 256}},
			{"a<search>b</search>", []int{'a', 262, 'b', 263}},
			{"<|endoftext|>hello", []int{264, 259}},
			{" ", []int{alphaID(' ')}},
			{"", nil},
			{"é", []int{0xC3, 0xA9}},
		} {
			got := tok.Encode(tc.text)
			if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("pairs=%v Encode(%q) = %v, want %v", pairs, tc.text, got, tc.want)
			}
			if dec := tok.Decode(got, false); dec != tc.text {
				t.Errorf("pairs=%v Decode(Encode(%q)) = %q", pairs, tc.text, dec)
			}
		}
		if got := tok.Decode([]int{264, 259, 262}, true); got != "hello<search>" {
			t.Errorf("Decode skipping special = %q, want %q", got, "hello<search>")
		}
		if n := tok.VocabSize(); n != 256+6+3 {
			t.Errorf("VocabSize = %d, want %d", n, 256+6+3)
		}
		if id, ok := tok.TokenID("<search>"); !ok || id != 262 {
			t.Errorf("TokenID(<search>) = %d, %v", id, ok)
		}
		if s, ok := tok.IDToken(261); !ok || s != "Ġwo" {
			t.Errorf("IDToken(261) = %q, %v", s, ok)
		}
		if _, ok := tok.IDToken(9999); ok {
			t.Error("IDToken(9999) found")
		}
	}
}

// alphaID is the id of a byte in smallBPE (its own value).
func alphaID(b byte) int { return int(b) }

func TestQwen3Basics(t *testing.T) {
	tok := qwen3(t)
	if n := tok.VocabSize(); n != 151669 {
		t.Errorf("VocabSize = %d, want 151669", n)
	}
	if f := tok.Family(); f != FamilyQwen3 {
		t.Errorf("Family = %q, want %q", f, FamilyQwen3)
	}
	for _, tc := range []struct {
		tok string
		id  int
	}{
		{"<|endoftext|>", 151643}, {"<|im_start|>", 151644}, {"<|im_end|>", 151645},
		{"<think>", 151667}, {"</think>", 151668},
	} {
		if id, ok := tok.TokenID(tc.tok); !ok || id != tc.id {
			t.Errorf("TokenID(%q) = %d, %v; want %d", tc.tok, id, ok, tc.id)
		}
	}
	// Special tokens inside the text are single ids; EncodeWithSpecial adds
	// nothing for Qwen (ByteLevel post-processor).
	ids := tok.Encode("<|im_start|>user\nHi<|im_end|>")
	if ids[0] != 151644 || ids[len(ids)-1] != 151645 {
		t.Errorf("Encode with special tokens = %v", ids)
	}
	if w := tok.EncodeWithSpecial("Hi"); !slices.Equal(w, tok.Encode("Hi")) {
		t.Errorf("EncodeWithSpecial(Hi) = %v, want Encode", w)
	}
	if got := tok.Decode(ids, true); got != "user\nHi" {
		t.Errorf("Decode(skip special) = %q", got)
	}
	// A lone byte of a multi-byte character decodes to U+FFFD.
	e := tok.Encode("é")
	if len(e) != 1 {
		t.Fatalf("Encode(é) = %v", e)
	}
	if got := tok.Decode([]int{e[0], -1, 1 << 30}, false); got != "é" {
		t.Errorf("Decode ignoring unknown ids = %q", got)
	}
}

func TestBERTBasics(t *testing.T) {
	tok := bert(t)
	if n := tok.VocabSize(); n != 30522 {
		t.Errorf("VocabSize = %d, want 30522", n)
	}
	if tok.NumSpecialTokens() != 2 {
		t.Errorf("NumSpecialTokens = %d, want 2", tok.NumSpecialTokens())
	}
	for _, tc := range []struct {
		text string
		want []int // with [CLS] … [SEP]
	}{
		{"query: who", []int{101, 23032, 1024, 2040, 102}},
		{"", []int{101, 102}},
		{"[CLS] hello [SEP]", []int{101, 101, 7592, 102, 102}},
	} {
		if got := tok.EncodeWithSpecial(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("EncodeWithSpecial(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
	// A word over max_input_chars_per_word (100) is one [UNK].
	if got := tok.Encode(strings.Repeat("a", 101)); !slices.Equal(got, []int{100}) {
		t.Errorf("Encode(101 a's) = %v, want [100]", got)
	}
	for _, tc := range []struct{ text, want string }{
		// The cleanup runs per token, as in Hugging Face, so " ' " never matches.
		{"Hello, World! Don't stop.", "hello, world! don ' t stop."},
		{"Café  naïve", "cafe naive"},
		{"tokenization", "tokenization"},
		{"中文", "中 文"},
	} {
		got := tok.Decode(tok.EncodeWithSpecial(tc.text), true)
		if got != tc.want {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestBertNormalizer(t *testing.T) {
	n := bertNormalizer{cleanText: true, chinese: true, stripAccents: true, lowercase: true}
	for _, tc := range []struct{ in, want string }{
		{"Hello\tWorld\n", "hello world "},
		{"a\x00b\x07c\u200bd\ufffde", "abcde"}, // NUL, BEL, ZWSP (Cf), U+FFFD removed
		{"Ça va? ÉLÈVE", "ca va? eleve"},
		{"x\u00a0y\u3000z", "x y z"},
		{"日本語abc", " 日  本  語 abc"},
		{"İstanbul", "istanbul"}, // NFD strips U+0307 before lowercasing
		{"ǅ", "ǆ"},               // titlecase digraph: no canonical decomposition
		{"e\u0301", "e"},
		{"\u0085x", "x"}, // NEL is a control character: removed
	} {
		if got := n.normalize(tc.in); got != tc.want {
			t.Errorf("normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	lower := bertNormalizer{lowercase: true}
	if got := lower.normalize("İ"); got != "i\u0307" {
		t.Errorf("lowercase İ = %q, want i + U+0307", got)
	}
}

func TestLossyUTF8(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", "abc"},
		{"a\xffb", "a\ufffdb"},
		{"\xe2\x82", "\ufffd"},                 // truncated 3-byte sequence: one U+FFFD
		{"\xe2\x82a", "\ufffda"},               // … followed by ASCII
		{"\xf0\x9f\x98", "\ufffd"},             // truncated 4-byte sequence
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"}, // surrogate: not a prefix of a valid sequence
		{"\xc0\xaf", "\ufffd\ufffd"},           // overlong
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"é\xff", "é\ufffd"},
	} {
		if got := lossyUTF8(tc.in); got != tc.want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"unigram", `{"model":{"type":"Unigram","vocab":[["a",0.0]]}}`, `unsupported model type "Unigram"`},
		{"no merges", `{"model":{"type":"BPE","vocab":{"a":0}}}`, "no merges table"},
		{"null merges", `{"model":{"type":"BPE","vocab":{"a":0},"merges":null}}`, "no merges table"},
		{"no model", `{"added_tokens":[]}`, "no model"},
		{"invalid utf8", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"\xff\":0},\"merges\":[]}}", "invalid UTF-8 at byte 33"},
		{"bad json", `{"model":{"type":"BPE",`, "JSON at byte"},
		{"trailing", `{"model":{"type":"BPE","vocab":{},"merges":[]}} x`, "after the top-level value"},
		{"merge oov", `{"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}}`, "token not in the vocab"},
		{"merge result oov", `{"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":[["a","b"]]}}`, `merged token "ab" not in the vocab`},
		{"bad merge line", `{"model":{"type":"BPE","vocab":{"a":0},"merges":["a"]}}`, "two tokens separated by one space"},
		{"dup id", `{"model":{"type":"BPE","vocab":{"a":0,"b":0},"merges":[]}}`, "id 0 is used by both"},
		{"float id", `{"model":{"type":"BPE","vocab":{"a":0.5},"merges":[]}}`, "want an integer"},
		{"unk missing", `{"model":{"type":"WordPiece","vocab":{"a":0}}}`, `unk_token "[UNK]" is not in the vocab`},
		{"bad pretok", `{"pre_tokenizer":{"type":"Metaspace"},"model":{"type":"BPE","vocab":{},"merges":[]}}`, `unsupported pre_tokenizer type "Metaspace"`},
		{"bad normalizer", `{"normalizer":{"type":"Precompiled"},"model":{"type":"BPE","vocab":{},"merges":[]}}`, `unsupported normalizer type "Precompiled"`},
		{"bad decoder", `{"decoder":{"type":"CTC"},"model":{"type":"BPE","vocab":{},"merges":[]}}`, `unsupported decoder type "CTC"`},
		{"bad regex", `{"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(("},"behavior":"Isolated"},"model":{"type":"BPE","vocab":{},"merges":[]}}`, "compile regex"},
		{"untyped decoder", `{"decoder":{"content":"x"},"model":{"type":"BPE","vocab":{},"merges":[]}}`, "decoder without a type"},
		{"bad post_processor", `{"post_processor":{"type":"Metaspace"},"model":{"type":"BPE","vocab":{},"merges":[]}}`, `unsupported post_processor type "Metaspace"`},
		{"replace no pattern", `{"normalizer":{"type":"Replace","content":"x"},"model":{"type":"BPE","vocab":{},"merges":[]}}`, "normalizer Replace: missing pattern"},
		{"replace empty pattern", `{"decoder":{"type":"Replace","pattern":{},"content":""},"model":{"type":"BPE","vocab":{},"merges":[]}}`, "decoder Replace: pattern has neither String nor Regex"},
		{"sequence member", `{"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Digits"},{"type":"Split","behavior":"Isolated"}]},"model":{"type":"BPE","vocab":{},"merges":[]}}`, "pre_tokenizer Sequence[1]: pre_tokenizer Split: missing pattern"},
		{"sequence null member", `{"normalizer":{"type":"Sequence","normalizers":[null,{"type":"X"}]},"model":{"type":"BPE","vocab":{},"merges":[]}}`, `normalizer Sequence[1]: unsupported normalizer type "X"`},
		{"object separator", `{"model":{"type":"BPE" "vocab":{}}}`, "want ',' or '}' in object"},
		{"array separator", `{"extra":[1 2],"model":{"type":"BPE","vocab":{},"merges":[]}}`, "want ',' or ']' in array"},
		{"added twice", `{"added_tokens":[{"id":1,"content":"<x>"},{"id":2,"content":"<x>"}],"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, "listed with ids 1 and 2"},
		{"added conflict", `{"added_tokens":[{"id":1,"content":"a"}],"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, "model vocab has it as 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, []byte(`{"model":{"type":"WordLevel","vocab":{}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, dir} {
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "WordLevel") {
			t.Errorf("Load(%s) error = %v, want the file name and the model type", p, err)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

func TestLoadFolderReadsConfig(t *testing.T) {
	dir := t.TempDir()
	// Each step adds a file to the folder; Load then detects the family.
	for _, step := range []struct {
		file, data, want, why string
	}{
		{"tokenizer.json", string(smallBPE(t, false)), "", "without config or ChatML tokens"},
		{"tokenizer_config.json", `{"chat_template": "{{ 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}"}`, FamilyQwen25, "from config"},
		{"chat_template.jinja", "{{ '<|im_start|>' }}{% if enable_thinking is defined %}{% endif %}", FamilyQwen3, "from chat_template.jinja"},
	} {
		testfile.Write(t, dir, step.file, []byte(step.data))
		tok, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Family() != step.want {
			t.Errorf("Family %s = %q, want %q", step.why, tok.Family(), step.want)
		}
	}
}

// TestRoundTripGolden decodes every golden Qwen3 encoding back to the NFC
// form of its text.
func TestRoundTripGolden(t *testing.T) {
	tok := qwen3(t)
	for i, c := range readGolden(t, "golden", "tokenizer", "qwen3.jsonl") {
		if got, want := tok.Decode(c.IDs, false), norm.NFC.String(c.Text); got != want {
			t.Errorf("line %d: Decode = %q, want %q", i+1, got, want)
		}
	}
}

// TestConcurrentEncode checks that goroutines sharing a tokenizer (and its
// word cache) get the serial results.
func TestConcurrentEncode(t *testing.T) {
	tok := qwen3(t)
	cases := readGolden(t, "golden", "tokenizer", "qwen3.jsonl")
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < len(cases); i += 2 {
				if !slices.Equal(tok.Encode(cases[i].Text), cases[i].IDs) {
					errs <- cases[i].Text
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("concurrent Encode(%q) differs", e)
	}
}
