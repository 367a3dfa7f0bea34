package qa

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/cas-engine/cas/internal/sharedtest"
)

// TestLoadSharedQA reads the real FlashRAG/Search-R1 QA files.
func TestLoadSharedQA(t *testing.T) {
	cases := []struct {
		file  string
		n     int
		first string
	}{
		{"nq_test_1k.jsonl", 1000, "who told the story of the prodigal son"},
		{"bamboogle_test_125.jsonl", 125, ""},
		{"hotpotqa_dev.jsonl", 7405, ""},
		{"2wikimultihopqa_dev.jsonl", 12576, ""},
		{"musique_dev.jsonl", 2417, ""},
	}
	for _, c := range cases {
		ps, err := Load(sharedtest.Path(t, "data", "qa", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != c.n {
			t.Errorf("%s: %d prompts, want %d", c.file, len(ps), c.n)
		}
		if c.first != "" && (ps[0].Question != c.first || ps[0].ID != "test_3283" || ps[0].Answers[0] != "Jesus Christ") {
			t.Errorf("%s: first prompt %+v", c.file, ps[0])
		}
		for _, p := range ps {
			if p.Question == "" || len(p.Answers) == 0 || p.ID == "" {
				t.Fatalf("%s: incomplete prompt %+v", c.file, p)
			}
		}
	}
}

func TestReadJSONLErrors(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"", "no questions"},
		{`{"question": "q"}`, `"golden_answers": missing`},
		{`{"golden_answers": ["a"]}`, `missing "question"`},
		{`{"question": "  ", "golden_answers": ["a"]}`, "blank"},
		{`{"question": 3, "golden_answers": ["a"]}`, "want a string"},
		{`{"question": "q", "golden_answers": []}`, "empty list"},
		{`{"question": "q", "golden_answers": [1]}`, "element 0"},
		{`{"question": "q", "golden_answers": "a", "id": {}}`, `"id"`},
		{"{\"question\": \"q\", \"golden_answers\": \"a\"}\n{oops", "f.jsonl:2"},
	}
	for _, c := range cases {
		_, err := ReadJSONL(strings.NewReader(c.in), "f.jsonl")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.in, err, c.want)
		}
	}
	ps, err := ReadJSONL(strings.NewReader("\n{\"question\": \" q \", \"golden_answers\": \"a\", \"id\": 7}\n\n{\"question\": \"r\", \"golden_answers\": [\"b\", \"c\"]}"), "f")
	if err != nil || len(ps) != 2 || ps[0].ID != "7" || ps[0].Question != "q" || ps[1].ID != "4" || len(ps[1].Answers) != 2 {
		t.Errorf("prompts %+v, %v", ps, err)
	}
}

func FuzzReadJSONL(f *testing.F) {
	for _, s := range []string{`{"question": "q", "golden_answers": ["a"]}`, `{"id": 1.5, "question": "q", "golden_answers": "a"}`, "{", "null", `[]`, `{"question": null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ReadJSONL(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		for _, p := range ps {
			if strings.TrimSpace(p.Question) == "" || len(p.Answers) == 0 || p.ID == "" {
				t.Fatalf("accepted an incomplete prompt %+v from %q", p, s)
			}
		}
	})
}

// Search-R1's parquet layouts (scripts/data_process/nq_search.py): the
// original columns kept next to verl's, and verl's columns only.
type searchR1Msg struct {
	Content string `parquet:"content"`
	Role    string `parquet:"role"`
}
type searchR1Truth struct {
	Target []string `parquet:"target,list"`
}
type searchR1Reward struct {
	GroundTruth searchR1Truth `parquet:"ground_truth"`
	Style       string        `parquet:"style"`
}
type searchR1Extra struct {
	Index int64  `parquet:"index"`
	Split string `parquet:"split"`
}
type searchR1Full struct {
	ID            string         `parquet:"id"`
	Question      string         `parquet:"question"`
	GoldenAnswers []string       `parquet:"golden_answers,list"`
	DataSource    string         `parquet:"data_source"`
	Prompt        []searchR1Msg  `parquet:"prompt,list"`
	Ability       string         `parquet:"ability"`
	RewardModel   searchR1Reward `parquet:"reward_model"`
	ExtraInfo     searchR1Extra  `parquet:"extra_info"`
}
type searchR1Verl struct {
	DataSource  string         `parquet:"data_source"`
	Prompt      []searchR1Msg  `parquet:"prompt,list"`
	RewardModel searchR1Reward `parquet:"reward_model"`
	ExtraInfo   searchR1Extra  `parquet:"extra_info"`
}

func searchR1Prompt(q string) string {
	return "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. ... For example, <answer> Beijing </answer>. Question: " + q + "\n"
}

func TestReadParquet(t *testing.T) {
	dir := t.TempDir()
	full := []searchR1Full{
		{ID: "train_0", Question: "total number of death row inmates in the us?", GoldenAnswers: []string{"2,718"}, DataSource: "nq",
			Prompt: []searchR1Msg{{searchR1Prompt("total number of death row inmates in the us?"), "user"}}, Ability: "fact-reasoning",
			RewardModel: searchR1Reward{searchR1Truth{[]string{"2,718"}}, "rule"}, ExtraInfo: searchR1Extra{0, "train"}},
		{ID: "train_1", Question: "big little lies season 2 how many episodes?", GoldenAnswers: []string{"seven", "7"}, DataSource: "hotpotqa",
			Prompt:      []searchR1Msg{{searchR1Prompt("big little lies season 2 how many episodes?"), "user"}},
			RewardModel: searchR1Reward{searchR1Truth{[]string{"seven", "7"}}, "rule"}, ExtraInfo: searchR1Extra{1, "train"}},
	}
	verl := []searchR1Verl{
		{DataSource: "nq", Prompt: full[0].Prompt, RewardModel: full[0].RewardModel, ExtraInfo: full[0].ExtraInfo},
		{DataSource: "hotpotqa", Prompt: full[1].Prompt, RewardModel: full[1].RewardModel, ExtraInfo: full[1].ExtraInfo},
	}
	pFull, pVerl := filepath.Join(dir, "full.parquet"), filepath.Join(dir, "verl.parquet")
	if err := parquet.WriteFile(pFull, full); err != nil {
		t.Fatal(err)
	}
	if err := parquet.WriteFile(pVerl, verl); err != nil {
		t.Fatal(err)
	}
	a, err := Load(pFull)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(pVerl)
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{ID: "train_0", Question: "total number of death row inmates in the us?", Answers: []string{"2,718"}, Source: "nq"},
		{ID: "train_1", Question: "big little lies season 2 how many episodes?", Answers: []string{"seven", "7"}, Source: "hotpotqa"},
	}
	for i := range want {
		if !samePrompt(a[i], want[i]) {
			t.Errorf("full layout row %d: %+v, want %+v", i, a[i], want[i])
		}
		w := want[i]
		w.ID = []string{"0", "1"}[i] // extra_info.index
		if !samePrompt(b[i], w) {
			t.Errorf("verl layout row %d: %+v, want %+v", i, b[i], w)
		}
	}
	// A parquet file without a question anywhere is an error naming the row.
	bad := []searchR1Verl{{DataSource: "nq", Prompt: []searchR1Msg{{"no marker here", "user"}}, RewardModel: full[0].RewardModel}}
	pBad := filepath.Join(dir, "bad.parquet")
	if err := parquet.WriteFile(pBad, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(pBad); err == nil || !strings.Contains(err.Error(), "row 0") {
		t.Errorf("bad parquet: %v", err)
	}
	if err := os.WriteFile(pBad, []byte("not parquet"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(pBad); err == nil {
		t.Error("a non-parquet file was accepted")
	}
}

func samePrompt(a, b Record) bool {
	return a.ID == b.ID && a.Question == b.Question && slices.Equal(a.Answers, b.Answers) && a.Source == b.Source
}
