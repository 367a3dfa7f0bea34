package demo

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/world"
)

func TestConfigValidate(t *testing.T) {
	for _, name := range []string{"quick", "default"} {
		c, err := PresetConfig(name, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s preset: %v", name, err)
		}
		if c.Seed != 3 || c.World.Seed != 3 {
			t.Errorf("%s preset: seeds %d / %d, want 3", name, c.Seed, c.World.Seed)
		}
	}
	if _, err := PresetConfig("huge", 1); err == nil {
		t.Error("unknown preset accepted")
	}
	cases := map[string]struct {
		mod  func(*Config)
		want string
	}{
		"alpha":       {func(c *Config) { c.APS.Alpha = 1 }, "aps.alpha"},
		"temperature": {func(c *Config) { c.APS.Temperature = 0 }, "aps.temperature"},
		"clamp":       {func(c *Config) { c.APS.MaxDocs = 9 }, "max_docs"},
		"topk":        {func(c *Config) { c.APS.TopK = 0 }, "aps.topk"},
		"chunks":      {func(c *Config) { c.Warm.Chunks = c.Warm.Steps + 1 }, "chunks"},
		"lr":          {func(c *Config) { c.Warm.LR = 0 }, "lr"},
		"no search":   {func(c *Config) { c.Warm.NoSearch = 1 }, "no_search"},
		"one search":  {func(c *Config) { c.Warm.OneSearch = -0.1 }, "one_search"},
		"group":       {func(c *Config) { c.GRPO.Group = 1 }, "group"},
		"prompts":     {func(c *Config) { c.GRPO.PromptsPerStep = 100000 }, "prompts_per_step"},
		"eval":        {func(c *Config) { c.Eval.Batch = 0 }, "eval"},
		"variant":     {func(c *Config) { c.Variants = append(c.Variants, c.Variants[0]) }, "repeated"},
		"rho":         {func(c *Config) { c.Variants[0].Rho = 1.5 }, "rho"},
		"no variants": {func(c *Config) { c.Variants = nil }, "at least one"},
		"reserved":    {func(c *Config) { c.Variants[1].Name = VariantNoUpdate }, "reference run"},
		"model":       {func(c *Config) { c.Model.KVHeads = 3 }, "kv heads"},
		"world":       {func(c *Config) { c.World.Countries = 0 }, "countries"},
	}
	for name, tc := range cases {
		c := QuickConfig(1)
		c.Variants = DemoVariants()
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", name, err, tc.want)
		}
	}
}

func TestModelConfig(t *testing.T) {
	qc, err := tinyModel().QwenConfig(2003, 1999)
	if err != nil {
		t.Fatal(err)
	}
	if qc.VocabSize != 2003 || qc.HiddenSize != 64 || qc.NumHiddenLayers != 2 || !qc.TieWordEmbeddings ||
		len(qc.EOSTokenID) != 1 || qc.EOSTokenID[0] != 1999 || qc.Architectures[0] != "Qwen3ForCausalLM" {
		t.Errorf("config %+v", qc)
	}
	// Tied 2003×64 embedding + 2 layers of (q, k, v, o 64×64 — a key/value
	// head per query head —, q/k norms 16 each, MLP 3×192×64, two norms 64)
	// + final norm 64.
	layer := 4*64*64 + 2*16 + 3*192*64 + 2*64
	if want := int64(2003*64 + 2*layer + 64); qc.NumParameters() != want {
		t.Errorf("%d parameters, want %d", qc.NumParameters(), want)
	}
	if _, err := (ModelConfig{Hidden: 64, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 15, Intermediate: 8, MaxPositions: 64}).QwenConfig(300, 1); err == nil {
		t.Error("odd head dim accepted")
	}
}

// TestPromptPieces: the demo tokenizer encodes each fixed prompt text as
// one token, decodes it back, and leaves every other encoding unchanged.
func TestPromptPieces(t *testing.T) {
	w, err := world.Generate(world.SmallConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	bm, err := w.TrainTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := w.WriteDir(dir, bm); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, world.TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	aug, err := addPromptPieces(raw)
	if err != nil {
		t.Fatal(err)
	}
	base, err := tokenizer.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Parse(aug)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != base.VocabSize()+len(promptPieces) {
		t.Errorf("vocabulary %d, want %d + %d", tok.VocabSize(), base.VocabSize(), len(promptPieces))
	}
	for _, p := range promptPieces {
		ids := tok.Encode(p)
		if len(ids) != 1 || ids[0] < base.VocabSize() {
			t.Errorf("%.30q… encodes as %v", p, ids)
		}
		if got := tok.Decode(ids, true); got != p {
			t.Errorf("decodes as %.30q…", got)
		}
	}
	msgs, err := agent.PromptMessages("Where was Dalmor Keswin born?", agent.PlacementSystemUser)
	if err != nil {
		t.Fatal(err)
	}
	no := false
	text, err := tokenizer.RenderChat(msgs, tokenizer.ChatOptions{Family: tok.Family(), AddGenerationPrompt: true, EnableThinking: &no})
	if err != nil {
		t.Fatal(err)
	}
	short, long := tok.Encode(text), base.Encode(text)
	if len(short) > 40 || len(long) < 3*len(short) {
		t.Errorf("prompt: %d tokens with the pieces, %d without", len(short), len(long))
	}
	if tok.Decode(short, false) != text {
		t.Error("prompt does not round-trip")
	}
	passage := w.Passages[0].Contents()
	if !slices.Equal(tok.Encode(passage), base.Encode(passage)) {
		t.Error("a passage encodes differently")
	}
	if _, err := addPromptPieces([]byte(`{"added_tokens": 3}`)); err == nil {
		t.Error("malformed tokenizer accepted")
	}
}

func TestCoverageBound(t *testing.T) {
	cases := []struct {
		alpha float64
		n     int
		want  float64
	}{
		{0.2, 100, 1 - 0.2 - 2*0.04},
		{0.1, 900, 1 - 0.1 - 2*0.01},
		{0.2, 0, 0},
	}
	for _, c := range cases {
		if got := CoverageBound(c.alpha, c.n); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("CoverageBound(%g, %d) = %g, want %g", c.alpha, c.n, got, c.want)
		}
	}
}

func TestParseSeeds(t *testing.T) {
	cases := []struct {
		in   string
		want []uint64
		err  bool
	}{
		{"1,2,3", []uint64{1, 2, 3}, false},
		{" 7 ", []uint64{7}, false},
		{"1-3,9", []uint64{1, 2, 3, 9}, false},
		{"5-5", []uint64{5}, false},
		{"", nil, true},
		{"1,,2", nil, true},
		{"3-1", nil, true},
		{"1,1", nil, true},
		{"1-2,2", nil, true},
		{"x", nil, true},
		{"-1", nil, true},
		{"0-5000", nil, true},
	}
	for _, c := range cases {
		got, err := ParseSeeds(c.in)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("ParseSeeds(%q) = %v, %v", c.in, got, err)
		}
	}
}

// FuzzParseSeeds: a parsed list is non-empty, repeat-free and bounded, and
// never panics.
func FuzzParseSeeds(f *testing.F) {
	for _, s := range []string{"1,2,3", "1-3", "0", "18446744073709551615", "18446744073709551614-18446744073709551615", "1,-", ",", "9-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seeds, err := ParseSeeds(s)
		if err != nil {
			return
		}
		if len(seeds) == 0 || len(seeds) > 1000 {
			t.Fatalf("%q: %d seeds", s, len(seeds))
		}
		seen := map[uint64]bool{}
		for _, v := range seeds {
			if seen[v] {
				t.Fatalf("%q: %d repeated", s, v)
			}
			seen[v] = true
		}
	})
}

func TestTabulate(t *testing.T) {
	cfg := QuickConfig(1)
	cfg.Variants = AblationVariants()
	mk := func(em float64) *Result {
		r := &Result{Config: cfg, APS: map[string]APSReport{}}
		for _, a := range cfg.apsAlphas() {
			r.APS[fmtAlpha(a)] = APSReport{Calibration: conformal.Calibration{Alpha: a}, MeanKept: 1 + a, TestCoverage: 1 - a}
		}
		for i, n := range append([]string{EvalNoRetrieval, EvalWarmStart}, variantNames(cfg)...) {
			r.Evals = append(r.Evals, EvalResult{Name: n, EM: em + 0.01*float64(i), EMSingle: em, EMTwoHop: em / 2, DocsPerSearch: 2 + em})
		}
		return r
	}
	ab := Tabulate([]*Result{mk(0.4), mk(0.6)})
	if len(ab.Table3) != 2+len(cfg.Variants) {
		t.Fatalf("%d rows", len(ab.Table3))
	}
	row := ab.Table3[2]
	if row.Name != VariantCAS || math.Abs(row.EMSingle.Mean-0.5) > 1e-12 || math.Abs(row.EMSingle.Std-math.Sqrt(0.02)) > 1e-12 {
		t.Errorf("row %+v", row)
	}
	if len(ab.Table4) != 3 {
		t.Fatalf("Table 4: %+v", ab.Table4)
	}
	for _, r := range ab.Table4 {
		if r.Variant == "" || len(r.AgentDocs.Runs) != 2 || math.Abs(r.MeanKept.Mean-(1+r.Alpha)) > 1e-12 {
			t.Errorf("Table 4 row %+v", r)
		}
	}
	md := ab.Markdown()
	for _, want := range []string{"Table 3", "Table 4", "CAS: GRPO + APS + ACI", "ρ = 0.1", "α_APS = 0.05", "0.500 ± 0.141"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func variantNames(c Config) []string {
	var out []string
	for _, v := range c.Variants {
		out = append(out, v.Name)
	}
	return out
}

// randomTrajectories makes n trajectories of random tokens below vocab:
// prompts of p0 + [0, pSpan) tokens, responses of r0 + [0, rSpan), each
// response token the policy's when policy() says so.
func randomTrajectories(rng *rand.Rand, n, p0, pSpan, r0, rSpan, vocab int, policy func() bool) []*agent.Trajectory {
	var ex []*agent.Trajectory
	for range n {
		p, r := p0+rng.IntN(pSpan), r0+rng.IntN(rSpan)
		e := &agent.Trajectory{PromptLen: p}
		for i := range p + r {
			e.IDs = append(e.IDs, rng.IntN(vocab))
			m := uint8(0)
			if i >= p && policy() {
				m = 1
			}
			e.Mask = append(e.Mask, m)
		}
		ex = append(ex, e)
	}
	return ex
}
