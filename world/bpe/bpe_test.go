package bpe

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

var gpt2Regex = regexp2.MustCompile(GPT2Pattern, regexp2.Unicode)

// regexSplit splits s with regexp2 running GPT2Pattern: the reference
// SplitWords must agree with.
func regexSplit(t testing.TB, s string) []string {
	var out []string
	m, err := gpt2Regex.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = gpt2Regex.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatalf("regexp2 on %q: %v", s, err)
	}
	return out
}

func split(s string) []string {
	var out []string
	SplitWords(s, func(w string) { out = append(out, w) })
	return out
}

var splitCases = []string{
	"", "a", " ", "Hello world", "Hello  world", "Hello   world!", "It's don't we'll I'M 'S",
	"''s !'s '", "  \n\na", "a\r\nb", "trailing  ", " leading", "\t\tx", "x\t",
	"1952 and 19 and 2024.", "naïve café 東京 — 12345", "\u00a0x\u2003y", "x\u00a0\u00a0y",
	"emoji 🤖🤖 ok", "Doc 1 (Title: Tarsk)\nTarsk is a city.", "<think>x</think>", "a  b   c    d",
	"\n\n\n", " \n \n ", "$%^&*() +-=", "Ⅻ ² ¾ ٣", "x'sy", "'ll'll", "\u2028\u2029z",
}

func TestSplitWordsMatchesRegex(t *testing.T) {
	for _, s := range splitCases {
		got, want := split(s), regexSplit(t, s)
		if !slices.Equal(got, want) {
			t.Errorf("SplitWords(%q) = %q, regexp2 gives %q", s, got, want)
		}
		if strings.Join(got, "") != s {
			t.Errorf("SplitWords(%q) pieces do not concatenate back", s)
		}
	}
}

func FuzzSplitWords(f *testing.F) {
	for _, s := range splitCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		got, want := split(s), regexSplit(t, s)
		if !slices.Equal(got, want) {
			t.Fatalf("SplitWords(%q) = %q, regexp2 gives %q", s, got, want)
		}
	})
}

func TestTrainLearnsMostFrequentPairsFirst(t *testing.T) {
	tests := []struct {
		name   string
		texts  map[string]int
		vocab  int
		merges []string // "left right" in byte-level characters
	}{
		{
			// "ab" occurs 5 times, then "abc" (ab+c) 3 times; "cd" twice.
			name:   "frequency order",
			texts:  map[string]int{"ab": 2, "abc": 3, "cd": 2},
			vocab:  256 + 3,
			merges: []string{"a b", "ab c", "c d"},
		},
		{
			// "xy" and "yz" tie at 4: the lexicographically smaller pair wins.
			name:   "ties broken by token strings",
			texts:  map[string]int{"yz": 4, "xy": 4},
			vocab:  256 + 2,
			merges: []string{"x y", "y z"},
		},
		{
			// Leading spaces are part of words: " a" is "Ġa".
			name:   "byte-level space",
			texts:  map[string]int{"a a a a": 1},
			vocab:  256 + 1,
			merges: []string{"Ġ a"},
		},
		{
			// minFrequency 2 stops before pairs seen once.
			name:   "min frequency",
			texts:  map[string]int{"qq": 2, "rs": 1},
			vocab:  256 + 5,
			merges: []string{"q q"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTrainer(nil)
			keys := make([]string, 0, len(tc.texts))
			for k := range tc.texts {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				tr.Add(k, tc.texts[k])
			}
			m, err := tr.Train(tc.vocab, 2)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range m.Merges {
				got = append(got, m.Vocab[p[0]]+" "+m.Vocab[p[1]])
			}
			if !slices.Equal(got, tc.merges) {
				t.Errorf("merges = %q, want %q", got, tc.merges)
			}
		})
	}
}

func TestTrainReusesExistingTokens(t *testing.T) {
	// "ab c" and "a bc" can both make "abc": the vocabulary must hold it once.
	tr := NewTrainer(nil)
	tr.Add("ab ab ab ab ab ab abc abc", 1)
	tr.Add("bc bc bc bc bc bc bc", 1)
	tr.Add("xabcx xabcx xbcx", 1)
	m, err := tr.Train(256+40, 1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range m.Vocab {
		if seen[v] {
			t.Fatalf("token %q twice in the vocabulary", v)
		}
		seen[v] = true
	}
	if len(m.MergeTo) != len(m.Merges) {
		t.Fatalf("%d merge results for %d merges", len(m.MergeTo), len(m.Merges))
	}
}

func testModel(t testing.TB) *Model {
	t.Helper()
	tr := NewTrainer([]AddedToken{{Content: "<|im_end|>", Special: true}, {Content: "<think>"}, {Content: "</think>"}})
	for range 5 {
		for _, s := range splitCases {
			tr.Add(s, 3)
		}
		tr.Add("<think>The director of The Silent Harbor was born in Tarsk in 1952.</think><|im_end|>", 20)
		tr.Add("Tarsk is a city in Velmoria. It's the capital, isn't it? 東京 café", 1)
	}
	m, err := tr.Train(256+3+120, 2)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	m := testModel(t)
	for _, s := range append(splitCases, "<think>Tarsk</think>\n<|im_end|>", "unseen wörds ☃ and <think", "<|im_end|><|im_end|>") {
		ids := m.Encode(s)
		if got := m.Decode(ids, false); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
	}
	ids := m.Encode("a<|im_end|>b<think>")
	end, _ := m.TokenID("<|im_end|>")
	think, _ := m.TokenID("<think>")
	if !slices.Contains(ids, end) || !slices.Contains(ids, think) {
		t.Errorf("added tokens not matched whole: %v", ids)
	}
	if got := m.Decode(ids, true); got != "ab<think>" {
		t.Errorf("Decode(skipSpecial) = %q, want %q", got, "ab<think>")
	}
	// Merges shorten the encoding of the training text.
	if s := "The director of The Silent Harbor"; len(m.Encode(s)) >= len(s)/2 {
		t.Errorf("%q: %d tokens for %d bytes: merges not applied", s, len(m.Encode(s)), len(s))
	}
}

func FuzzEncodeDecode(f *testing.F) {
	m := testModel(f)
	for _, s := range splitCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if got := m.Decode(m.Encode(s), false); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
	})
}

func TestWriteReadJSON(t *testing.T) {
	m := testModel(t)
	var a bytes.Buffer
	if err := m.WriteJSON(&a); err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(a.Bytes(), &generic); err != nil {
		t.Fatalf("tokenizer.json is not valid JSON: %v", err)
	}
	model := generic["model"].(map[string]any)
	if model["type"] != "BPE" || len(model["vocab"].(map[string]any)) != len(m.Vocab) || len(model["merges"].([]any)) != len(m.Merges) {
		t.Errorf("model section: type %v, %d vocab, %d merges; want BPE, %d, %d",
			model["type"], len(model["vocab"].(map[string]any)), len(model["merges"].([]any)), len(m.Vocab), len(m.Merges))
	}
	if pt := generic["pre_tokenizer"].(map[string]any); pt["type"] != "ByteLevel" || pt["use_regex"] != true || pt["add_prefix_space"] != false {
		t.Errorf("pre_tokenizer = %v", pt)
	}
	back, err := ReadJSON(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Vocab, m.Vocab) || !slices.Equal(back.Merges, m.Merges) || !slices.Equal(back.Added, m.Added) {
		t.Fatal("read-back model differs")
	}
	var b bytes.Buffer
	if err := back.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("writing the read-back model gives different bytes")
	}
	s := "The director of The Silent Harbor<|im_end|>"
	if !slices.Equal(back.Encode(s), m.Encode(s)) {
		t.Error("read-back model encodes differently")
	}
}

func TestReadJSONErrors(t *testing.T) {
	m := testModel(t)
	var buf bytes.Buffer
	if err := m.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.String()
	tests := []struct{ name, in, want string }{
		{"not json", "{", "decode"},
		{"wordpiece", strings.Replace(good, `"type": "BPE"`, `"type": "WordPiece"`, 1), "want BPE"},
		{"missing byte", strings.Replace(good, `"!": 33`, `"!!!": 33`, 1), "want byte id"},
		{"unknown merge token", strings.Replace(good, `"merges": [`, `"merges": ["zzqq ab",`, 1), "unknown token"},
		{"bad merge form", strings.Replace(good, `"merges": [`, `"merges": [17,`, 1), "merges"},
		{"added id", strings.Replace(good, `{"id": `+itoa(len(m.Vocab)), `{"id": 3`, 1), "want"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadJSON(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func FuzzReadJSON(f *testing.F) {
	m := testModel(f)
	var buf bytes.Buffer
	if err := m.WriteJSON(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{},"merges":[]}}`))
	f.Add([]byte(`{"model":{"type":"BPE","merges":[["a","b"]]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		// A model that loads must encode and decode without panicking.
		s := "The Silent Harbor <think> x"
		_ = m.Decode(m.Encode(s), true)
	})
}

// hfCase is one line of testdata/hf/cases.jsonl: ids and decoding computed
// by Hugging Face's tokenizers library (Rust, via its Node bindings 0.23.2)
// from testdata/hf/tokenizer.json.
type hfCase struct {
	Text    string `json:"text"`
	IDs     []int  `json:"ids"`
	Decoded string `json:"decoded"`
}

func TestMatchesHuggingFace(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "hf", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "hf", "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var c hfCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("cases.jsonl line %d: %v", i+1, err)
		}
		if got := m.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("line %d: Encode(%.60q) = %v, Hugging Face gives %v", i+1, c.Text, got, c.IDs)
		}
		if got := m.Decode(c.IDs, false); got != c.Decoded {
			t.Errorf("line %d: Decode = %.60q, Hugging Face gives %.60q", i+1, got, c.Decoded)
		}
		n++
	}
	if n < 50 {
		t.Fatalf("only %d golden cases", n)
	}
	t.Logf("%d cases match Hugging Face id for id", n)
}

func BenchmarkEncode(b *testing.B) {
	m := testModel(b)
	text := strings.Repeat("The director of The Silent Harbor was born in Tarsk in 1952. It's a city in Velmoria.\n", 200)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		m.Encode(text)
	}
}

func BenchmarkTrain(b *testing.B) {
	var words []string
	for i := range 3000 {
		words = append(words, strings.Repeat(string(rune('a'+i%26)), 1+i%5)+string(rune('k'+i%13))+"or")
	}
	text := strings.Join(words, " ")
	for b.Loop() {
		tr := NewTrainer(nil)
		tr.Add(text, 1)
		if _, err := tr.Train(256+300, 2); err != nil {
			b.Fatal(err)
		}
	}
}
