package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/piecetok"
	"github.com/cas-engine/cas/internal/scriptpolicy"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/testfile"
	"github.com/cas-engine/cas/internal/wanterr"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/model/tokenizer/tokentest"
	"github.com/cas-engine/cas/search"
)

func TestDatasetName(t *testing.T) {
	for _, tc := range []struct {
		path  string
		name  string
		known bool
	}{
		{"/data/nq_test_1k.jsonl", "nq", true},
		{"triviaqa_test_1k.jsonl", "triviaqa", true},
		{"PopQA-test.jsonl", "popqa", true},
		{"x/hotpotqa_dev.jsonl", "hotpotqa", true},
		{"2wikimultihopqa_dev.jsonl", "2wikimultihopqa", true},
		{"2wiki.jsonl", "2wikimultihopqa", true},
		{"musique_dev.jsonl", "musique", true},
		{"bamboogle_test_125.jsonl", "bamboogle", true},
		{"tqa.jsonl", "triviaqa", true},
		{"webq_test.jsonl", "webq", false},
		{"questions", "questions", false},
	} {
		name, known := DatasetName(tc.path)
		if name != tc.name || known != tc.known {
			t.Errorf("DatasetName(%q) = %q, %v; want %q, %v", tc.path, name, known, tc.name, tc.known)
		}
	}
}

func FuzzDatasetName(f *testing.F) {
	for _, s := range []string{"nq_test_1k.jsonl", "/a/b/2wiki-dev.json", "", ".jsonl", "_", "ÄÖ_ü.jsonl"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		name, known := DatasetName(path)
		if known {
			found := false
			for _, d := range PaperDatasets() {
				found = found || d.Name == name
			}
			if !found {
				t.Fatalf("%q: known name %q not among the paper's datasets", path, name)
			}
		}
		if strings.ContainsAny(name, "/_-.") && known {
			t.Fatalf("%q: name %q", path, name)
		}
	})
}

func ExampleDatasetName() {
	for _, f := range []string{"nq_test_1k.jsonl", "2wikimultihopqa_dev.jsonl", "webq_test.jsonl"} {
		name, known := DatasetName(f)
		fmt.Println(name, known)
	}
	// Output:
	// nq true
	// 2wikimultihopqa true
	// webq false
}

func TestLoadDatasetErrors(t *testing.T) {
	dir := t.TempDir()
	good := `{"id": "1", "question": "q1?", "golden_answers": ["a"]}` + "\n" + `{"id": "2", "question": "q2?", "golden_answers": ["b", "c"]}` + "\n"
	for _, tc := range []struct {
		name, content string
		limit         int
		want          string
		n             int
	}{
		{"nq_ok.jsonl", good, 0, "", 2},
		{"nq_limit.jsonl", good, 1, "", 1},
		{"nq_empty.jsonl", "\n\n", 0, "no questions", 0},
		{"nq_noq.jsonl", `{"id": "1", "golden_answers": ["a"]}`, 0, `nq_noq.jsonl:1: missing "question"`, 0},
		{"nq_nogold.jsonl", good + `{"id": "3", "question": "q3?"}`, 0, `nq_nogold.jsonl:3: "golden_answers": missing`, 0},
		{"nq_emptygold.jsonl", `{"id": "1", "question": "q?", "golden_answers": []}`, 0, `nq_emptygold.jsonl:1: "golden_answers": empty list`, 0},
		{"nq_blank.jsonl", `{"id": "1", "question": "  ", "golden_answers": ["a"]}`, 0, `nq_blank.jsonl:1: blank "question"`, 0},
		{"nq_bad.jsonl", `{"id": "1", "question": `, 0, "nq_bad.jsonl:1: malformed JSON", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := LoadDataset(testfile.Write(t, dir, tc.name, []byte(tc.content)), tc.limit)
			if wanterr.Check(t, tc.name, err, tc.want) {
				return
			}
			if err != nil || len(d.Questions) != tc.n || d.Name != "nq" {
				t.Fatalf("%+v, %v", d, err)
			}
		})
	}
	if _, err := LoadDataset(filepath.Join(dir, "missing.jsonl"), 0); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Fatalf("missing file: %v", err)
	}
	a, b := testfile.Write(t, dir, "nq_a.jsonl", []byte(good)), testfile.Write(t, dir, "nq_b.jsonl", []byte(good))
	if _, err := LoadDatasets([]string{a, b}, 0); err == nil || !strings.Contains(err.Error(), `both dataset "nq"`) {
		t.Fatalf("duplicate datasets: %v", err)
	}
	if _, err := LoadDatasets(nil, 0); err == nil {
		t.Fatal("no files accepted")
	}
}

// scriptPolicy writes fixed text per question and generation through the
// rollout code path (internal/scriptpolicy; the real-model path is
// TestEvalTinyModel's): each generation ends as a stop would.
type scriptPolicy struct{ scriptpolicy.Policy }

func newScriptPolicy(tok agent.Tokenizer, next func(question string, gen int) string) *scriptPolicy {
	return &scriptPolicy{scriptpolicy.Policy{Tok: tok, Vocab: 151936, MaxCtx: 40960,
		Next: func(q string, gen int) (string, qwen.FinishReason) { return next(q, gen), qwen.FinishStop }}}
}

func (p *scriptPolicy) NewSession(batch, capacity int, seed uint64) (agent.Session, error) {
	return p.Start(batch), nil
}

type fixedRetriever struct{ docs []search.Doc }

func (f fixedRetriever) Retrieve(_ context.Context, qs []string, k int) ([][]search.Hit, error) {
	out := make([][]search.Hit, len(qs))
	for i := range qs {
		for j := range min(k, len(f.docs)) {
			out[i] = append(out[i], search.Hit{Doc: f.docs[j], Score: float32(10 - j)})
		}
	}
	return out, nil
}

func testDocs() []search.Doc {
	var docs []search.Doc
	for _, c := range []string{"\"Alpha\"\nfirst passage", "\"Beta\"\nsecond passage", "\"Gamma\"\nthird passage",
		"\"Delta\"\nfourth passage", "\"Epsilon\"\nfifth passage"} {
		title, text := search.SplitContents(c)
		docs = append(docs, search.Doc{ID: title, Contents: c, Title: title, Text: text})
	}
	return docs
}

// TestEvalScripted checks the aggregation exactly: a scripted agent answers
// the even-numbered questions of each file correctly, searching once with
// top-3 passages; EM per dataset, the group and overall averages, searches,
// documents per search, the format-valid rate, the JSONL records and the
// Markdown table all follow.
func TestEvalScripted(t *testing.T) {
	tok := tokentest.Qwen3(t)
	dir := t.TempDir()
	custom := testfile.Write(t, dir, "mine.jsonl", []byte(`{"id": "m1", "question": "Custom one?", "golden_answers": ["yes"]}`+"\n"))
	paths := []string{
		sharedtest.Path(t, "data", "qa", "nq_test_1k.jsonl"),
		sharedtest.Path(t, "data", "qa", "hotpotqa_dev.jsonl"),
		sharedtest.Path(t, "data", "qa", "bamboogle_test_125.jsonl"),
		custom,
	}
	datasets, err := LoadDatasets(paths, 5)
	if err != nil {
		t.Fatal(err)
	}
	gold := map[string]string{}
	right := map[string]bool{}
	wantEM := map[string]float64{}
	for _, d := range datasets {
		for i, q := range d.Questions {
			gold[q.Question] = q.Answers[0]
			right[q.Question] = i%2 == 0
			if i%2 == 0 {
				wantEM[d.Name] += 1 / float64(len(d.Questions))
			}
		}
	}
	next := func(q string, gen int) string {
		if gen == 1 {
			return "<think>Let me search.</think>\n<search>" + q + "</search>"
		}
		ans := "wrong guess"
		if right[q] {
			ans = gold[q]
		}
		return "<think>Found it.</think>\n<answer> " + ans + " </answer>"
	}
	cfg := agent.DefaultRolloutConfig()
	cfg.Temperature = 0
	r, err := agent.NewRunner(newScriptPolicy(tok, next), tok, fixedRetriever{testDocs()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	out := filepath.Join(dir, "out")
	rep, err := EvalToDir(context.Background(), r, datasets, EvalOptions{Batch: 2, Model: "scripted", Retrieval: "fixed", Progress: &progress}, out)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	if len(rep.Datasets) != 4 || rep.N != 16 {
		t.Fatalf("%d datasets, %d questions", len(rep.Datasets), rep.N)
	}
	for _, d := range rep.Datasets {
		if !near(d.EM, wantEM[d.Name]) || d.MeanSearches != 1 || d.DocsPerSearch != 3 || d.FormatValid != 1 ||
			d.AnswerRate != 1 || d.MeanTurns != 2 || d.Finish[agent.FinishAnswer] != d.N {
			t.Fatalf("%s: %+v, want EM %v", d.Name, d, wantEM[d.Name])
		}
		if !near(d.MeanReward, 0.2+0.8*wantEM[d.Name]) {
			t.Fatalf("%s: mean reward %v", d.Name, d.MeanReward)
		}
	}
	if rep.GeneralQA == nil || !near(*rep.GeneralQA, wantEM["nq"]) ||
		rep.MultiHopQA == nil || !near(*rep.MultiHopQA, (wantEM["hotpotqa"]+wantEM["bamboogle"])/2) ||
		rep.Overall == nil || !near(*rep.Overall, (wantEM["nq"]+wantEM["hotpotqa"]+wantEM["bamboogle"])/3) {
		t.Fatalf("averages %v %v %v", *rep.GeneralQA, *rep.MultiHopQA, *rep.Overall)
	}
	if strings.Join(rep.Missing, ",") != "triviaqa,popqa,2wikimultihopqa,musique" {
		t.Fatalf("missing %v", rep.Missing)
	}
	if rep.MeanSearches != 1 || rep.DocsPerSearch != 3 || rep.FormatValid != 1 {
		t.Fatalf("totals %+v", rep)
	}
	if !strings.Contains(progress.String(), "(15/16") {
		t.Fatalf("progress bar did not count the questions: %q", progress.String())
	}
	// trajectories.jsonl: one record per question, in order
	recs := testfile.ReadJSONL[Record](t, filepath.Join(out, TrajectoriesFile))
	if len(recs) != 16 || recs[0].Dataset != "nq" || recs[15].Dataset != "mine" || recs[15].ID != "m1" {
		t.Fatalf("%d records", len(recs))
	}
	for _, rec := range recs {
		if rec.EM != right[rec.Question] || len(rec.Searches) != 1 || len(rec.Searches[0].Kept) != 3 ||
			rec.Searches[0].Query != rec.Question || rec.AnswerSpan[1] <= rec.AnswerSpan[0] {
			t.Fatalf("record %+v", rec)
		}
		if rec.EM && rec.Prediction != gold[rec.Question] {
			t.Fatalf("prediction %q, gold %q", rec.Prediction, gold[rec.Question])
		}
	}
	// report.json round-trips; report.md holds the table row
	var back Report
	js, err := os.ReadFile(filepath.Join(out, ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &back); err != nil || back.N != 16 || !near(*back.Overall, *rep.Overall) {
		t.Fatalf("report.json: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(out, ReportMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	wantRow := "| scripted (agent) | 0.600 | – | – | 0.600* | 0.600 | – | – | 0.600 | 0.600* | 0.600* |"
	if !strings.Contains(string(md), "| Method | NQ | TriviaQA | PopQA | General QA Avg. | HotpotQA | 2Wiki | MuSiQue | Bamboogle | Multi-Hop QA Avg. | Overall |") ||
		!strings.Contains(string(md), wantRow) || !strings.Contains(string(md), "mine (not in the paper's averages)") {
		t.Fatalf("report.md:\n%s", md)
	}
	entries, _ := os.ReadDir(out)
	if len(entries) != 3 {
		t.Fatalf("output folder holds %d entries, want the 3 outputs (no temporary files)", len(entries))
	}
}

// TestEvalBaselines: direct answers without retrieval; RAG retrieves once
// with the question (one search per question, in the prompt).
func TestEvalBaselines(t *testing.T) {
	tok := tokentest.Qwen3(t)
	dir := t.TempDir()
	d, err := LoadDatasets([]string{testfile.Write(t, dir, "popqa_x.jsonl", []byte(
		`{"id": "1", "question": "Who composed Easy Living?", "golden_answers": ["Ralph Rainger"]}`+"\n"+
			`{"id": "2", "question": "Capital of France?", "golden_answers": ["Paris"]}`+"\n"))}, 0)
	if err != nil {
		t.Fatal(err)
	}
	next := func(q string, gen int) string {
		if strings.Contains(q, "France") {
			return "Paris" // no tags: the stripped response is the prediction
		}
		return "<answer>Ralph Rainger</answer>"
	}
	for _, mode := range []agent.Mode{agent.ModeDirect, agent.ModeRAG} {
		cfg := agent.DefaultRolloutConfig()
		cfg.Mode, cfg.Temperature = mode, 0
		var ret search.Retriever
		if mode == agent.ModeRAG {
			ret = fixedRetriever{testDocs()}
			cfg.SetAPS(conformal.APS{Temperature: 1, MinDocs: 1, MaxDocs: 5}, 0.9)
		}
		r, err := agent.NewRunner(newScriptPolicy(tok, next), tok, ret, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Eval(context.Background(), r, d, EvalOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := rep.Datasets[0]
		// APS with T = 1 on scores 10, 9, 8, 7, 6: c = 0.64, 0.87, 0.95 → k = 3 for q̂ = 0.9
		wantSearches, wantDocs := 0.0, 0.0
		if mode == agent.ModeRAG {
			wantSearches, wantDocs = 1, 3
		}
		if res.EM != 1 || res.MeanSearches != wantSearches || res.DocsPerSearch != wantDocs || res.AnswerRate != 0.5 || res.MeanTurns != 1 {
			t.Fatalf("%s: %+v", mode, res)
		}
		if *rep.GeneralQA != 1 || rep.MultiHopQA != nil || (rep.Settings.APS != nil) != (mode == agent.ModeRAG) {
			t.Fatalf("%s: report %+v", mode, rep)
		}
	}
}

// TestReportMarkdown pins the rendering of a complete report.
func TestReportMarkdown(t *testing.T) {
	rep := &Report{Model: "m", Mode: "agent", Retrieval: "idx", N: 70,
		Settings: agent.RolloutConfig{TurnRule: agent.TurnsPaper, MaxTurns: 4, TopK: 3}}
	for i, d := range PaperDatasets() {
		rep.Datasets = append(rep.Datasets, DatasetResult{Name: d.Name, Label: d.Label, Group: d.Group, N: 10,
			EM: float64(i+1) / 10, MeanSearches: 1.5, DocsPerSearch: 3, FormatValid: 0.9, AnswerRate: 1, MeanTurns: 2.5, MeanReward: 0.5, MeanResponseTokens: 321})
	}
	rep.average()
	if rep.Missing != nil || math.Abs(*rep.GeneralQA-0.2) > 1e-12 || math.Abs(*rep.MultiHopQA-0.55) > 1e-12 || math.Abs(*rep.Overall-0.4) > 1e-12 {
		t.Fatalf("averages %v %v %v missing %v", *rep.GeneralQA, *rep.MultiHopQA, *rep.Overall, rep.Missing)
	}
	md := rep.Markdown()
	for _, want := range []string{
		"| m (agent) | 0.100 | 0.200 | 0.300 | 0.200 | 0.400 | 0.500 | 0.600 | 0.700 | 0.550 | 0.400 |",
		"| Bamboogle | 10 | 0.700 | 1.50 | 3.00 | 0.900 | 1.000 | 2.50 | 0.500 | 321 |",
		"Retrieval: idx; passages: top-3; turns: 4 (paper counting).",
	} {
		if !strings.Contains(md, want) {
			t.Fatalf("markdown lacks %q:\n%s", want, md)
		}
	}
	if regexp.MustCompile(`[0-9]\*`).MatchString(md) || strings.Contains(md, "average over the datasets present") {
		t.Fatalf("complete report marked partial:\n%s", md)
	}
}

// evalPieces are the pieces of the tiny golden model's tokenizer
// (internal/piecetok): the prompts' fixed parts, then the tags, cycled.
var evalPieces = []string{agent.QwenSystemPrompt, agent.Instruction, agent.InvalidActionMessage,
	"<|im_start|>system\n", "<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n",
	"\nQuestion: ", "<information>", "</information>", "Doc ", " (Title: ",
	"<search>", "</search>", "<answer>", "</answer>", "<think>", "</think>"}

func newPieceTok(vocab int) piecetok.Tokenizer {
	return piecetok.Tokenizer{Vocab: vocab, Fam: tokenizer.FamilyQwen25, Fixed: evalPieces[:11], Cycled: evalPieces[11:]}
}

// TestEvalTinyModel runs the real model path: the golden tiny Qwen2 model
// evaluated greedily on two datasets with APS; the report agrees with the
// records it wrote.
func TestEvalTinyModel(t *testing.T) {
	dir := filepath.Dir(sharedtest.Path(t, "golden", "qwen2-tiny", "config.json"))
	be, err := backend.New()
	if err != nil {
		t.Fatal(err)
	}
	m, err := qwen.Load(dir, be, qwen.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	datasets, err := LoadDatasets([]string{
		sharedtest.Path(t, "data", "qa", "musique_dev.jsonl"),
		sharedtest.Path(t, "data", "qa", "triviaqa_test_1k.jsonl"),
	}, 3)
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.DefaultRolloutConfig()
	cfg.Temperature = 0
	cfg.MaxTurnTokens, cfg.MaxObsTokens, cfg.MaxResponseTokens = 16, 48, 200
	cfg.SetAPS(conformal.APS{Temperature: 1, MinDocs: 1, MaxDocs: 5}, 0.9)
	r, err := agent.NewRunner(agent.QwenPolicy{Model: m}, newPieceTok(m.Config.VocabSize), fixedRetriever{testDocs()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep, err := Eval(context.Background(), r, datasets, EvalOptions{Batch: 4}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if rep.N != 6 || len(lines) != 6 {
		t.Fatalf("%d questions, %d records", rep.N, len(lines))
	}
	searches, docs := 0, 0
	for _, l := range lines {
		var rec Record
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Finish == "" || rec.Turns < 1 || rec.ResponseTokens > 200 {
			t.Fatalf("record %+v", rec)
		}
		for _, s := range rec.Searches {
			searches++
			docs += len(s.Kept)
			if len(s.Kept) != 3 { // APS, T = 1, q̂ = 0.9 on scores 10…6
				t.Fatalf("search kept %d passages, want 3", len(s.Kept))
			}
		}
	}
	if math.Abs(rep.MeanSearches-float64(searches)/6) > 1e-12 || (searches > 0 && rep.DocsPerSearch != 3) {
		t.Fatalf("report %v searches, %v docs/search; records %d, %d", rep.MeanSearches, rep.DocsPerSearch, searches, docs)
	}
	for _, d := range rep.Datasets {
		total := 0
		for _, n := range d.Finish {
			total += n
		}
		if total != d.N || d.EM < 0 || d.EM > 1 {
			t.Fatalf("%s: %+v", d.Name, d)
		}
	}
	if searches == 0 {
		t.Fatal("the greedy tiny model never searched: the retrieval path is not exercised")
	}
	if rep.GeneralQA == nil || rep.MultiHopQA == nil || len(rep.Missing) != 5 {
		t.Fatalf("groups %v %v missing %v", rep.GeneralQA, rep.MultiHopQA, rep.Missing)
	}
}

func BenchmarkEvalScripted(b *testing.B) {
	tok := tokentest.Qwen3(b)
	qs := make([]string, 64)
	for i := range qs {
		qs[i] = `{"id": "` + string(rune('a'+i%26)) + `", "question": "Which passage is number ` + string(rune('a'+i%26)) + `?", "golden_answers": ["x"]}`
	}
	dir := b.TempDir()
	p := filepath.Join(dir, "nq_b.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(qs, "\n")), 0o644); err != nil {
		b.Fatal(err)
	}
	d, err := LoadDatasets([]string{p}, 0)
	if err != nil {
		b.Fatal(err)
	}
	next := func(q string, gen int) string {
		if gen == 1 {
			return "<think>s</think><search>" + q + "</search>"
		}
		return "<think>a</think><answer>x</answer>"
	}
	cfg := agent.DefaultRolloutConfig()
	r, err := agent.NewRunner(newScriptPolicy(tok, next), tok, fixedRetriever{testDocs()}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Eval(context.Background(), r, d, EvalOptions{}, &bytes.Buffer{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(64, "questions/op")
}
