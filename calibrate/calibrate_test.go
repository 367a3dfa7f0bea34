package calibrate

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
)

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"  Jesus   Christ\n", "jesus christ"},
		{"The\tU.S.", "the u.s."},
		{"", ""},
		{"ÉCOLE", "école"},
	}
	for _, tc := range tests {
		if got := Normalize(tc.in); got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestContainsJudge(t *testing.T) {
	hits := []search.Hit{
		{Doc: search.Doc{Contents: "\"Tombstone\"\nKurt Russell stars."}},
		{Doc: search.Doc{Contents: "\"Mason\"\nMason  Alan\nDinehart played Bat Masterson."}},
		{Doc: search.Doc{Contents: "\"Other\"\nmason alan dinehart again"}},
	}
	tests := []struct {
		answers []string
		want    int
	}{
		{[]string{"Mason Alan Dinehart"}, 1},
		{[]string{"nobody", "KURT russell"}, 0},
		{[]string{"Wyatt Earp"}, -1},
		{[]string{"", "  "}, -1},
	}
	for _, tc := range tests {
		got, err := ContainsJudge{}.Gold(context.Background(), qa.Record{Answers: tc.answers}, hits)
		if err != nil || got != tc.want {
			t.Errorf("Gold(%q) = %d, %v; want %d", tc.answers, got, err, tc.want)
		}
	}
}

// rankRetriever answers question "r<R>" with three hits scored 2, 1, 0
// whose R-th (1-based; 0 = none) contains the answer "gold".
type rankRetriever struct{}

func (rankRetriever) Retrieve(_ context.Context, queries []string, k int) ([][]search.Hit, error) {
	out := make([][]search.Hit, len(queries))
	for i, q := range queries {
		var r int
		fmt.Sscanf(q, "r%d", &r)
		for j := 0; j < min(k, 3); j++ {
			c := "\"T\"\nfiller"
			if j+1 == r {
				c = "\"T\"\nthe GOLD answer"
			}
			out[i] = append(out[i], search.Hit{Doc: search.Doc{ID: fmt.Sprint(j), Contents: c}, Score: float32(2 - j)})
		}
	}
	return out, nil
}

// TestRunHandComputed: scores (2, 1, 0) at T = 1 give c = (0.6652, 0.9100, 1).
// Every question's gold at rank 2 makes every E = c_2, so q̂ = c_2, every
// held-out question keeps 2 passages and is covered; top-3 covers all.
func TestRunHandComputed(t *testing.T) {
	qs := make([]qa.Record, 12)
	for i := range qs {
		qs[i] = qa.Record{ID: fmt.Sprint(i), Question: "r2", Answers: []string{"gold"}}
	}
	cfg := DefaultConfig()
	cfg.APS.Temperature = 1
	cfg.N, cfg.Alpha, cfg.TopK = 5, 0.2, 3
	rep, err := Run(context.Background(), rankRetriever{}, qs, ContainsJudge{}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2 := (math.Exp(0) + math.Exp(-1)) / (math.Exp(0) + math.Exp(-1) + math.Exp(-2))
	if math.Abs(float64(rep.QHat)-c2) > 1e-12 {
		t.Errorf("qhat = %v, want c_2 = %v", rep.QHat, c2)
	}
	if rep.Test != 7 || rep.TestGold != 7 || rep.SetStats.Coverage != 1 || rep.CoverageKept != 1 || rep.SetStats.MeanKept != 2 || !slices.Equal(rep.Histogram, []int{0, 0, 7}) {
		t.Errorf("APS held-out stats %+v", rep.SetStats)
	}
	if rep.Fixed.K != 3 || rep.Fixed.MeanKept != 3 || rep.Fixed.CoverageKept != 1 || rep.Fixed.Coverage != 1 {
		t.Errorf("fixed stats %+v", rep.Fixed)
	}
	// Gold absent everywhere: E = 1, q̂ = 1, coverage 1 but nothing to keep.
	for i := range qs {
		qs[i].Question = "r0"
	}
	rep, err = Run(context.Background(), rankRetriever{}, qs, ContainsJudge{}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.QHat != 1 || rep.SetStats.Coverage != 1 || rep.TestGold != 0 || rep.CoverageKept != 0 || rep.GoldKept != 0 || rep.SetStats.MeanKept != 3 {
		t.Errorf("no-gold run: %+v", rep)
	}
	cfg.GoldOnly = true
	if _, err := Run(context.Background(), rankRetriever{}, qs, ContainsJudge{}, cfg, nil); err == nil {
		t.Error("gold-only without any gold: want an error")
	}
	// Too few calibration points for α: q̂ = +Inf keeps everything (clamped).
	cfg.GoldOnly, cfg.N, cfg.Alpha = false, 3, 0.05
	for i := range qs {
		qs[i].Question = "r1"
	}
	rep, err = Run(context.Background(), rankRetriever{}, qs, ContainsJudge{}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	if rep.QHat != 1 || !math.IsInf(float64(rep.QHatLog), 1) || rep.SetStats.MeanKept != 3 || !strings.Contains(string(b), `"qhat_log":"+Inf"`) {
		t.Errorf("n = 3, α = 0.05: qhat %v mean kept %v json %s", rep.QHat, rep.SetStats.MeanKept, b)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, mod := range []func(*Config){
		func(c *Config) { c.TopK = 0 }, func(c *Config) { c.Alpha = 1 }, func(c *Config) { c.N = 0 },
		func(c *Config) { c.Test = -1 }, func(c *Config) { c.FixedK = 0 }, func(c *Config) { c.APS.Temperature = 0 },
	} {
		c := DefaultConfig()
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%+v: want an error", c)
		}
	}
	qs := []qa.Record{{ID: "a", Question: "r1", Answers: []string{"gold"}}}
	if _, err := Run(context.Background(), rankRetriever{}, qs, ContainsJudge{}, DefaultConfig(), nil); err == nil {
		t.Error("n ≥ number of questions: want an error")
	}
}

// The 10k wiki-18 BM25 folder is built once per test binary.
var folder sharedtest.BuiltDir

func TestMain(m *testing.M) { sharedtest.Main(m, &folder) }

func bm25Retriever(t *testing.T) search.Retriever {
	corpus := sharedtest.Path(t, "data", "corpus", "wiki18_harvested_10k.jsonl")
	dir := folder.Get(t, "cas-calibrate-", func(dir string) error {
		_, err := search.BuildBM25Folder(context.Background(), corpus, dir, search.DefaultBM25BuildOptions())
		return err
	})
	r, _, err := search.OpenRetriever(dir, search.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestRunRealNQ calibrates on real BM25 retrieval over the 10k corpus with
// 150 NQ questions and checks the held-out figures: the histogram matches
// the test count and mean, coverage is near 1 − α, and a larger α keeps
// fewer passages.
func TestRunRealNQ(t *testing.T) {
	r := bm25Retriever(t)
	qs, err := qa.Load(sharedtest.Path(t, "data", "qa", "nq_test_1k.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var prevMean float64 = 99
	for _, alpha := range []float64{0.05, 0.2, 0.35} {
		cfg := DefaultConfig()
		cfg.TopK, cfg.Alpha, cfg.N, cfg.Seed, cfg.GoldOnly = 20, alpha, 150, 1, true
		cfg.APS.Temperature = 1
		rep, err := Run(context.Background(), r, qs, ContainsJudge{}, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("α=%.2f q̂=%.4f coverage %.3f coverage_kept %.3f mean kept %.2f (top-3 %.3f) test %d hist %v",
			alpha, float64(rep.QHat), rep.SetStats.Coverage, rep.CoverageKept, rep.SetStats.MeanKept, rep.Fixed.CoverageKept, rep.Test, rep.Histogram)
		sum, weighted := 0, 0
		for k, c := range rep.Histogram {
			sum += c
			weighted += k * c
		}
		if sum != rep.Test || math.Abs(float64(weighted)/float64(sum)-rep.SetStats.MeanKept) > 1e-12 {
			t.Errorf("histogram %v does not match test %d / mean %v", rep.Histogram, rep.Test, rep.SetStats.MeanKept)
		}
		if rep.Test < 500 || rep.TestGold != rep.Test || rep.SkippedNoGold < 200 {
			t.Errorf("gold-only split: test %d gold %d skipped %d", rep.Test, rep.TestGold, rep.SkippedNoGold)
		}
		if rep.SetStats.Coverage < 1-alpha-0.08 {
			t.Errorf("α=%v: held-out coverage %.3f far below %.2f", alpha, rep.SetStats.Coverage, 1-alpha)
		}
		if rep.SetStats.MeanKept > prevMean || rep.SetStats.MeanKept < 1 || rep.SetStats.MeanKept > 5 {
			t.Errorf("α=%v: mean kept %.2f (previous α: %.2f)", alpha, rep.SetStats.MeanKept, prevMean)
		}
		prevMean = rep.SetStats.MeanKept
		if rep.Fixed.MeanKept != 3 {
			t.Errorf("fixed top-3 mean kept %v", rep.Fixed.MeanKept)
		}
	}
	// The official setting (no-gold questions score 1): with about a third of
	// NQ's golds missing from this small corpus, q̂ = 1 for α = 0.2.
	cfg := DefaultConfig()
	cfg.TopK, cfg.N, cfg.Test = 20, 150, 300
	rep, err := Run(context.Background(), r, qs, ContainsJudge{}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.QHat != 1 || rep.SetStats.Coverage != 1 || rep.Test != 300 || rep.TestGold >= 300 || rep.CalGold >= 150 {
		t.Errorf("official setting: %+v", rep)
	}
	if _, ok := any(conformal.JSONFloat(0)).(json.Marshaler); !ok {
		t.Error("JSONFloat no longer marshals ±Inf")
	}
}

// TestRunRealNQPaperTemperature calibrates on real BM25 retrieval with the
// paper's T = 0.01, where c_r rounds to 1 in float64 for most questions: the
// log-scale threshold is finite, the held-out coverage is near 1 − α and
// APS keeps more than the top document; the same count of candidates at
// calibration and use by default, the official 20/5 by Candidates.
func TestRunRealNQPaperTemperature(t *testing.T) {
	r := bm25Retriever(t)
	qs, err := qa.Load(sharedtest.Path(t, "data", "qa", "nq_test_1k.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		topk, candidates int
		alpha            float64
	}{
		{"5 candidates α=0.2", 5, 0, 0.2},
		{"5 candidates α=0.1", 5, 0, 0.1},
		{"20 candidates α=0.2", 20, 0, 0.2},
		{"code's 20/5 α=0.2", 20, 5, 0.2},
	} {
		cfg := DefaultConfig()
		cfg.TopK, cfg.Candidates, cfg.Alpha, cfg.N, cfg.Seed, cfg.GoldOnly = tc.topk, tc.candidates, tc.alpha, 150, 1, true
		rep, err := Run(context.Background(), r, qs, ContainsJudge{}, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := rep.SetStats
		t.Logf("%s: q̂_S %.4g (q̂_E %v) coverage %.3f coverage_kept %.3f mean kept %.2f hist %v warnings %q",
			tc.name, float64(rep.QHatLog), float64(rep.QHat), a.Coverage, a.CoverageKept, a.MeanKept, a.Histogram, rep.Warnings)
		if math.IsInf(float64(rep.QHatLog), 0) || rep.Temperature != 0.01 {
			t.Errorf("%s: q̂_S = %v at T = %v, want finite at 0.01", tc.name, float64(rep.QHatLog), rep.Temperature)
		}
		// One calibration draw of n = 150: its coverage has a standard
		// deviation of ≈ 0.03 around E ≥ 1 − α.
		if a.Coverage < 1-tc.alpha-0.05 || a.Coverage > 1-tc.alpha+0.1 {
			t.Errorf("%s: held-out coverage %.3f, want ≈ %.2f", tc.name, a.Coverage, 1-tc.alpha)
		}
		if a.MeanKept < 1.5 || a.CoverageKept < a.Coverage-0.1 {
			t.Errorf("%s: mean kept %.2f, coverage_kept %.3f: the sets collapsed", tc.name, a.MeanKept, a.CoverageKept)
		}
		want := tc.candidates
		if want == 0 {
			want = tc.topk
		}
		if rep.Candidates != want || rep.CalibCandidates != tc.topk {
			t.Errorf("%s: file records %d of %d candidates, want %d of %d", tc.name, rep.Candidates, rep.CalibCandidates, want, tc.topk)
		}
	}
}

// fixedRetriever answers every query with the same hits a…f scored
// 10, 9, 5, 4, 3, 1.
type fixedRetriever struct{}

func (fixedRetriever) Retrieve(_ context.Context, queries []string, k int) ([][]search.Hit, error) {
	out := make([][]search.Hit, len(queries))
	for i := range queries {
		for j, s := range []float32{10, 9, 5, 4, 3, 1}[:min(k, 6)] {
			out[i] = append(out[i], search.Hit{Doc: search.Doc{ID: string(rune('a' + j))}, Score: s})
		}
	}
	return out, nil
}

// TestRunSplitGoldIDs: on a given split labelled by gold passage ids, with
// gold at rank 1 (14 of 20), rank 2 (4) or not retrieved (2), q̂ is the
// conformal quantile of E = c_r and the held-out statistics count what
// they claim.
func TestRunSplitGoldIDs(t *testing.T) {
	judge := GoldIDJudge{}
	var qs []qa.Record
	for i := range 20 {
		g := "a"
		switch {
		case i%5 == 3:
			g = "b"
		case i%10 == 9:
			g = "z" // not retrieved
		}
		id := fmt.Sprint("q", i)
		judge[id] = map[string]bool{g: true}
		qs = append(qs, qa.Record{ID: id, Question: "who?"})
	}
	cfg := DefaultConfig()
	cfg.APS.Temperature, cfg.Alpha, cfg.TopK, cfg.FixedK = 1, 0.2, 6, 3
	cfg.Candidates = 5
	rep, err := RunSplit(context.Background(), fixedRetriever{}, qs, qs, judge, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// p over (10, 9, 5, 4, 3, 1) at T = 1: c_1 ≈ 0.7275, c_2 ≈ 0.9951.
	// E: 14 × c_1, 4 × c_2, 2 × 1; the ⌈21·0.8⌉ = 17th smallest is c_2.
	z := math.Exp(0) + math.Exp(-1) + math.Exp(-5) + math.Exp(-6) + math.Exp(-7) + math.Exp(-9)
	c2 := (1 + math.Exp(-1)) / z
	if math.Abs(float64(rep.QHat)-c2) > 1e-9 || rep.N != 20 || rep.Judge != "gold-ids" {
		t.Errorf("q̂ = %.6f over %d (judge %s), want c_2 = %.6f over 20", float64(rep.QHat), rep.N, rep.Judge, c2)
	}
	if rep.Test != 20 || rep.TestGold != 18 || rep.SetCoverage != 0.9 || rep.SetStats.Coverage != 0.9 || rep.GoldKept != 0.9 || rep.Fixed.GoldKept != 0.9 {
		t.Errorf("held-out: %d questions, %d with gold, set coverage %.3f, E ≤ q̂ %.3f, kept %.3f, fixed %.3f; want 20, 18, 0.9 each",
			rep.Test, rep.TestGold, rep.SetCoverage, rep.SetStats.Coverage, rep.GoldKept, rep.Fixed.GoldKept)
	}
	if rep.SetStats.MeanKept != 2 || !slices.Equal(rep.Histogram, []int{0, 0, 20}) || rep.CalibCandidates != 6 || rep.Candidates != 5 {
		t.Errorf("kept %.2f, histogram %v, candidates %d of %d: want 2 each of 5 of 6", rep.SetStats.MeanKept, rep.Histogram, rep.Candidates, rep.CalibCandidates)
	}
	if _, err := RunSplit(context.Background(), fixedRetriever{}, qs, nil, judge, cfg, nil); err == nil {
		t.Error("a split without held-out questions accepted")
	}
	if _, err := RunSplit(context.Background(), fixedRetriever{}, append(qs, qa.Record{ID: "unknown", Question: "?"}), qs, judge, cfg, nil); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("a question the gold-id judge does not know: %v", err)
	}
}
