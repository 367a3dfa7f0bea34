package bert

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/model/tokenizer"
)

func loadTok(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load(sharedtest.Path(t, "tokenizers", "bert-base-uncased", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestTokenize(t *testing.T) {
	tok := loadTok(t)
	dir := filepath.Dir(sharedtest.Path(t, "golden", "bert-tiny", "model.safetensors"))
	enc, err := LoadWithOptions(dir, newBackend(t), Options{MaxLen: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	cls, _ := tok.TokenID("[CLS]")
	sep, _ := tok.TokenID("[SEP]")
	q, _ := tok.TokenID("query")
	colon, _ := tok.TokenID(":")
	hello, _ := tok.TokenID("hello")
	for _, tc := range []struct {
		text, prefix string
		want         []int
	}{
		{"Hello", QueryPrefix, []int{cls, q, colon, hello, sep}},
		{"", "", []int{cls, sep}},
	} {
		got := enc.Tokenize(tok, []string{tc.text}, tc.prefix)[0]
		if !slices.Equal(got, tc.want) {
			t.Errorf("Tokenize(%q, %q) = %v, want %v", tc.text, tc.prefix, got, tc.want)
		}
	}
	// Truncation keeps [CLS] + the first MaxLen-2 ids + [SEP], as
	// sentence-transformers does.
	long := enc.Tokenize(tok, []string{strings.Repeat("hello ", 50)}, QueryPrefix)[0]
	want := []int{cls, q, colon, hello, hello, hello, hello, sep}
	if !slices.Equal(long, want) {
		t.Errorf("truncated %v, want %v", long, want)
	}
}

func TestEmbedJSONL(t *testing.T) {
	tok := loadTok(t)
	dir := filepath.Dir(sharedtest.Path(t, "golden", "bert-tiny", "model.safetensors"))
	enc, err := LoadWithOptions(dir, newBackend(t), Options{BatchSize: 2, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	in := `"what is the capital of france"
{"id": "1", "contents": "\"Paris\"\nParis is the capital of France."}

{"title": "Paris", "text": "Paris is the capital of France."}
{"question": "who wrote hamlet"}
{"query": "e5 retrieval"}
`
	var out bytes.Buffer
	var calls []int
	n, err := enc.EmbedJSONL(tok, strings.NewReader(in), &out, PassagePrefix, 3, func(d int) { calls = append(calls, d) })
	if err != nil {
		t.Fatal(err)
	}
	H := enc.Dim()
	if n != 5 || out.Len() != 5*H*4 || len(calls) != 2 || calls[1] != 5 {
		t.Fatalf("n=%d bytes=%d progress=%v, want 5 rows of %d floats", n, out.Len(), calls, H)
	}
	vec := func(i int) []float32 {
		v := make([]float32, H)
		for h := range v {
			v[h] = math.Float32frombits(binary.LittleEndian.Uint32(out.Bytes()[(i*H+h)*4:]))
		}
		return v
	}
	// The title/text record renders exactly like the wiki-18 "contents" one.
	if !slices.Equal(vec(1), vec(2)) {
		t.Error("title+text record must embed like the equivalent contents record")
	}
	want, err := enc.EmbedTexts(tok, []string{"who wrote hamlet"}, PassagePrefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vec(3), want) {
		t.Error("streamed vector differs from EmbedTexts")
	}

	for _, tc := range []struct{ in, want string }{
		{"{\"x\": 1}\n", "line 1: no \"contents\""},
		{"\"ok\"\n[1,2\n", "line 2: not a JSON string or object"},
	} {
		if _, err := enc.EmbedJSONL(tok, strings.NewReader(tc.in), &bytes.Buffer{}, "", 0, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

func FuzzTextFromJSONLine(f *testing.F) {
	for _, s := range []string{`"x"`, `{"contents":"a"}`, `{"title":"t","text":"b"}`, `{"query":null}`, `[`, ``, `{"text":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := TextFromJSONLine(b)
		if err != nil && s != "" {
			t.Fatalf("error %v with text %q", err, s)
		}
	})
}

func ExamplePrefixFor() {
	p, _ := PrefixFor("query")
	fmt.Printf("%q\n", p+"who wrote hamlet")
	_, err := PrefixFor("doc")
	fmt.Println(err)
	// Output:
	// "query: who wrote hamlet"
	// unknown prefix "doc" (want query, passage or none)
}

func ExampleBucketLen() {
	for _, n := range []int{3, 9, 100, 300} {
		fmt.Print(BucketLen(n, 256), " ")
	}
	fmt.Println()
	// Output: 8 16 128 256
}
