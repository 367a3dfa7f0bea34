package tokenizer

import (
	"bytes"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/testfile"
)

// goldenCase is one line of the shared golden files: a text and the ids
// Hugging Face's tokenizers (Rust core) produced without special tokens.
type goldenCase struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

func readGolden(t testing.TB, rel ...string) []goldenCase {
	t.Helper()
	return testfile.ReadJSONL[goldenCase](t, sharedtest.Path(t, rel...))
}

// The real tokenizers are loaded once per test binary: parsing Qwen3's
// 11 MB tokenizer.json is the slow part.
var (
	loadOnce sync.Map // path → *loaded
)

type loaded struct {
	once sync.Once
	tok  *Tokenizer
	err  error
}

func loadShared(t testing.TB, rel ...string) *Tokenizer {
	t.Helper()
	path := sharedtest.Path(t, rel...)
	v, _ := loadOnce.LoadOrStore(path, &loaded{})
	l := v.(*loaded)
	l.once.Do(func() { l.tok, l.err = Load(path) })
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.tok
}

func qwen3(t testing.TB) *Tokenizer {
	return loadShared(t, "tokenizers", "qwen3", "tokenizer.json")
}

func bert(t testing.TB) *Tokenizer {
	return loadShared(t, "tokenizers", "bert-base-uncased", "tokenizer.json")
}

// qwen3Regexp2 loads Qwen3 with its Split regex rewritten into an
// equivalent form (\p{N} as [\p{N}]) that has no hand-written scanner, so
// the whole golden file also runs through regexp2.
func qwen3Regexp2(t testing.TB) *Tokenizer {
	data, err := os.ReadFile(sharedtest.Path(t, "tokenizers", "qwen3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	old := `\\p{L}+|\\p{N}|`
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("Qwen3 pattern not found")
	}
	data = bytes.Replace(data, []byte(old), []byte(`\\p{L}+|[\\p{N}]|`), 1)
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tok.preTok.(sequencePreTokenizer)[0].(splitPreTokenizer).m.(*regexMatcher); !ok {
		t.Fatal("rewritten pattern did not select regexp2")
	}
	return tok
}

func TestGoldenIDs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tok    func(testing.TB) *Tokenizer
		golden string
		want   int // lines in the golden file
	}{
		{"qwen3", qwen3, "qwen3.jsonl", 1125},
		{"bert-base-uncased", bert, "bert-base-uncased.jsonl", 300},
		{"qwen3 via regexp2", qwen3Regexp2, "qwen3.jsonl", 1125},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.tok(t)
			cases := readGolden(t, "golden", "tokenizer", tc.golden)
			if len(cases) != tc.want {
				t.Fatalf("%s has %d lines, want %d", tc.golden, len(cases), tc.want)
			}
			bad := 0
			for i, c := range cases {
				got := tok.Encode(c.Text)
				if !slices.Equal(got, c.IDs) {
					bad++
					if bad <= 10 {
						t.Errorf("line %d %q:\n got %v\nwant %v", i+1, c.Text, got, c.IDs)
					}
				}
			}
			t.Logf("%s: %d/%d lines match id for id", tc.golden, len(cases)-bad, len(cases))
		})
	}
}
