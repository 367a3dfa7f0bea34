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
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/search"
	"github.com/cas-engine/cas/train"
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
		"group":       {func(c *Config) { c.GRPO.Group = 1 }, "group"},
		"prompts":     {func(c *Config) { c.GRPO.PromptsPerStep = 100000 }, "prompts_per_step"},
		"eval":        {func(c *Config) { c.Eval.Batch = 0 }, "eval"},
		"variant":     {func(c *Config) { c.Variants = append(c.Variants, c.Variants[0]) }, "repeated"},
		"rho":         {func(c *Config) { c.Variants[0].Rho = 1.5 }, "rho"},
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

// TestCalibrateLevel: on synthetic queries whose gold sits at rank 1, 2 or
// is missing, q̂ is the conformal quantile of E = c_r and the test
// statistics count what they claim.
func TestCalibrateLevel(t *testing.T) {
	cfg := QuickConfig(1)
	cfg.APS.Temperature = 1
	hit := func(id string, s float32) search.Hit { return search.Hit{Doc: search.Doc{ID: id}, Score: s} }
	mk := func(gold string) ([]search.Hit, hopQuery) {
		hits := []search.Hit{hit("a", 10), hit("b", 9), hit("c", 5), hit("d", 4), hit("e", 3), hit("f", 1)}
		return hits, hopQuery{query: gold, gold: map[string]bool{gold: true}}
	}
	var cal, test []hopQuery
	var calHits, testHits [][]search.Hit
	for i := range 20 {
		g := "a"
		switch {
		case i%5 == 3:
			g = "b"
		case i%10 == 9:
			g = "z" // not retrieved
		}
		h, q := mk(g)
		cal, calHits = append(cal, q), append(calHits, h)
		test, testHits = append(test, q), append(testHits, h)
	}
	rep, err := calibrateLevel(cfg, 0.2, cal, calHits, test, testHits)
	if err != nil {
		t.Fatal(err)
	}
	// p over scores (10, 9, 5, 4, 3, 1) at T = 1: c_1 ≈ 0.7275, c_2 ≈ 0.9951.
	// E: 14 × c_1, 4 × c_2, 2 × 1; the ⌈21·0.8⌉ = 17th smallest is c_2.
	z := math.Exp(0) + math.Exp(-1) + math.Exp(-5) + math.Exp(-6) + math.Exp(-7) + math.Exp(-9)
	c2 := (1 + math.Exp(-1)) / z
	if math.Abs(float64(rep.QHat)-c2) > 1e-9 {
		t.Errorf("q̂ = %.6f, want c_2 = %.6f", float64(rep.QHat), c2)
	}
	if rep.TestCoverage != 0.9 || rep.ScoreCoverage != 0.9 || rep.Retrieved != 0.9 || rep.FixedCoverage != 0.9 || rep.KeptCoverage != 0.9 {
		t.Errorf("coverage %.3f, retrieved %.3f, fixed %.3f, kept %.3f; want 0.9 each", rep.TestCoverage, rep.Retrieved, rep.FixedCoverage, rep.KeptCoverage)
	}
	if rep.MeanKept != 2 || rep.Histogram[2] != 20 {
		t.Errorf("mean kept %.2f, histogram %v: want every query to keep 2", rep.MeanKept, rep.Histogram)
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

// TestSFTMatchesWarmStart: the demo's supervised step computes the same
// masked cross-entropy as train.WarmStart on the same batch, and lowers it.
func TestSFTMatchesWarmStart(t *testing.T) {
	be, err := NewBackend()
	if err != nil {
		t.Fatal(err)
	}
	mc := ModelConfig{Hidden: 32, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16, Intermediate: 64, MaxPositions: 256}
	qc, err := mc.QwenConfig(300, 299)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	ex := randomTrajectories(rng, 6, 5, 20, 10, 60, 299, func() bool { return rng.IntN(3) > 0 })
	oc := train.OptimConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.98, Epsilon: 1e-8, MaxGradNorm: 1, SkipNonFinite: true}
	m1, _ := qwen.NewRandom(qc, be, 5)
	ws, err := train.WarmStart(m1, ex, train.WarmStartConfig{Optim: oc, Steps: 1, BatchSize: len(ex), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := qwen.NewRandom(qc, be, 5)
	s, err := newSFT(m2, oc, len(ex), 1)
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	want := 0
	for _, e := range ex {
		want += e.PolicyTokens()
	}
	for i := range 30 {
		loss, _, policy, err := s.step(ex, oc.LR)
		if err != nil {
			t.Fatal(err)
		}
		if policy != want {
			t.Fatalf("step %d: %d loss tokens, want %d", i, policy, want)
		}
		if i == 0 {
			first = loss
		}
		last = loss
	}
	if math.Abs(first-ws.Losses[0]) > 1e-4*math.Abs(first) {
		t.Errorf("cross-entropy %.6f, train.WarmStart %.6f", first, ws.Losses[0])
	}
	if !(last < first-1) {
		t.Errorf("cross-entropy %.3f → %.3f after 30 steps on one batch", first, last)
	}
	if err := s.clear(); err != nil {
		t.Fatal(err)
	}
	if _, ok := train.LastGradNorm(m2.Context()); ok {
		t.Error("optimiser state survived clear")
	}

	// With the passages in the loss (λ > 0) the reported cross-entropy is
	// still the policy tokens' (equal before the first update), and the
	// update differs: the second step's cross-entropy changes.
	second := map[float64]float64{}
	for _, lambda := range []float64{0, 0.5} {
		m, _ := qwen.NewRandom(qc, be, 5)
		s, err := newSFT(m, oc, len(ex), 1)
		if err != nil {
			t.Fatal(err)
		}
		s.envWeight = lambda
		l0, _, _, err := s.step(ex, oc.LR)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(l0-ws.Losses[0]) > 1e-4*math.Abs(l0) {
			t.Errorf("λ=%g: cross-entropy %.6f, train.WarmStart %.6f", lambda, l0, ws.Losses[0])
		}
		if second[lambda], _, _, err = s.step(ex, oc.LR); err != nil {
			t.Fatal(err)
		}
	}
	if math.Abs(second[0]-second[0.5]) < 1e-4 {
		t.Errorf("the passages' loss did not change the update: second-step cross-entropy %.6f with λ=0 and %.6f with λ=0.5", second[0], second[0.5])
	}
}

// TestAssembleWeights checks the warm start's batches: every policy token
// is in the loss once at weight 1 with pm = 1; with λ > 0 every other token
// is too, at weight λ; every entry predicts the token after its position.
func TestAssembleWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	ex := randomTrajectories(rng, 5, 3, 10, 5, 40, 50, func() bool { return rng.IntN(3) == 0 })
	rows := []int{0, 1, 2, 3, 4}
	policy, env := 0, 0
	for _, e := range ex {
		policy += e.PolicyTokens()
		env += len(e.IDs) - 1 - e.PolicyTokens()
	}
	for _, lambda := range []float64{0, 0.25} {
		bs := assemble(ex, rows, lambda)
		wantEnv := env
		if lambda == 0 {
			wantEnv = 0
		}
		if bs.policy != policy || bs.env != wantEnv {
			t.Fatalf("λ=%g: %d policy and %d environment tokens, want %d and %d", lambda, bs.policy, bs.env, policy, wantEnv)
		}
		var sumW, sumPM float64
		entries := 0
		seen := map[int32]bool{}
		for i := range bs.n {
			sumW += float64(bs.w[i])
			sumPM += float64(bs.pm[i])
			if bs.w[i] == 0 {
				continue
			}
			entries++
			p := bs.pos[i]
			r, at := int(p)/bs.t, int(p)%bs.t+1
			if seen[p] || bs.tgt[i] != int32(ex[r].IDs[at]) {
				t.Fatalf("λ=%g: entry %d (row %d, target position %d) repeated or with the wrong target", lambda, i, r, at)
			}
			seen[p] = true
			isPolicy := ex[r].Mask[at] == 1
			want := float32(lambda)
			if isPolicy {
				want = 1
			}
			if isPolicy != (bs.pm[i] == 1) || bs.w[i] != want {
				t.Fatalf("λ=%g: entry %d: w %g, pm %g for a policy token %v", lambda, i, bs.w[i], bs.pm[i], isPolicy)
			}
		}
		if entries != policy+wantEnv || math.Abs(sumW-(float64(policy)+lambda*float64(env))) > 1e-3 || sumPM != float64(policy) {
			t.Fatalf("λ=%g: %d entries, Σw %g, Σpm %g; want %d, %g and %d", lambda, entries, sumW, sumPM, policy+wantEnv, float64(policy)+lambda*float64(env), policy)
		}
	}
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
