package main

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/conformal"
)

// conformalWrite writes a file in the test's temp dir and returns its path.
func conformalWrite(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Five calibration queries; their APS scores (T = 0.01), by hand:
//
//	1: [.80 .82 .79] gold .82, rank 1: 1/(1+e⁻²+e⁻³)                 = 0.84379
//	2: same, gold .80, rank 2: (1+e⁻²)/(1+e⁻²+e⁻³)                   = 0.95799
//	3: [.85 .81 .83 .80] gold .83, rank 2: (1+e⁻²)/(1+e⁻²+e⁻⁴+e⁻⁵)   = 0.97841
//	4: no gold                                                       = 1
//	5: [.81 .80 .86 .79 .83] gold .86, rank 1: 1/(1+e⁻³+e⁻⁵+e⁻⁶+e⁻⁷) = 0.94347
const conformalCal = `{"scores":[0.80,0.82,0.79],"gold":1}
{"scores":[0.80,0.82,0.79],"gold":0}
{"scores":[0.85,0.81,0.83,0.80],"gold":2}

{"scores":[0.78,0.84,0.80],"gold":-1,"qid":"no gold"}
{"scores":[0.81,0.80,0.86,0.79,0.83],"gold":2}
`

func TestConformalCalibrateAPS(t *testing.T) {
	e := math.Exp
	q3 := (1 + e(-2)) / (1 + e(-2) + e(-4) + e(-5))
	in := conformalWrite(t, "cal.jsonl", conformalCal)
	cases := []struct {
		args     []string
		qhat     float64
		coverage float64
		quantile string
		minDocs  int
	}{
		// n = 5, α = 0.2: ⌈6·0.8⌉ = 5 → the largest, 1.
		{[]string{"--alpha", "0.2"}, 1, 1, "conformal", 1},
		// α = 0.4: ⌈6·0.6⌉ = 4 → 4th smallest of [.8438 .9435 .9580 .9784 1].
		{[]string{"--alpha", "0.4"}, q3, 0.8, "conformal", 1},
		// higher, α = 0.4: sorted[⌈4·0.6⌉ = 3] = .9784.
		{[]string{"--alpha", "0.4", "--quantile", "higher"}, q3, 0.8, "higher", 1},
		// linear, α = 0.5: h = 2 → sorted[2] = .9580.
		{[]string{"--alpha", "0.5", "--quantile", "linear"}, (1 + e(-2)) / (1 + e(-2) + e(-3)), 0.6, "linear", 1},
		// code preset: α = 0.1, higher: sorted[⌈3.6⌉ = 4] = 1; min-docs 2.
		{[]string{"--preset", "code"}, 1, 1, "higher", 2},
	}
	for _, c := range cases {
		out, _, err := runCasIn(t, "", append([]string{"conformal", "calibrate-aps", "--in", in}, c.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		var res struct {
			QHat     float64 `json:"qhat"`
			N        int     `json:"n"`
			Alpha    float64 `json:"alpha"`
			Coverage float64 `json:"calibration_coverage"`
			NoGold   int     `json:"no_gold"`
			Quantile string  `json:"quantile"`
			MinDocs  int     `json:"min_docs"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: output %q: %v", c.args, out, err)
		}
		if math.Abs(res.QHat-c.qhat) > 1e-12 || res.N != 5 || res.NoGold != 1 || res.Coverage != c.coverage ||
			res.Quantile != c.quantile || res.MinDocs != c.minDocs {
			t.Errorf("%v: got %+v, want qhat %v coverage %v", c.args, res, c.qhat, c.coverage)
		}
	}
	// +Inf q̂ is printed as a string; stdin works; --out writes atomically.
	small := `{"scores":[1,2],"gold":0}` + "\n"
	outPath := filepath.Join(t.TempDir(), "res.json")
	if _, _, err := runCasIn(t, small, "conformal", "calibrate-aps", "--in", "-", "--alpha", "0.1", "--out", outPath); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(outPath)
	if err != nil || !strings.Contains(string(b), `"qhat_log": "+Inf"`) || !strings.Contains(string(b), "too small for α") {
		t.Errorf("--out file %q, %v", b, err)
	}
	if c, err := conformal.LoadCalibration(outPath); err != nil || !math.IsInf(float64(c.QHatLog), 1) || c.Alpha != 0.1 || c.Candidates != 2 {
		t.Errorf("--out file reads back as %+v, %v", c, err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(outPath)); len(ents) != 1 {
		t.Errorf("temp files left behind: %v", ents)
	}
	// Randomized: reproducible for a seed, different across seeds.
	r1, _, _ := runCasIn(t, "", "conformal", "calibrate-aps", "--in", in, "--alpha", "0.4", "--randomized", "--seed", "1")
	r2, _, _ := runCasIn(t, "", "conformal", "calibrate-aps", "--in", in, "--alpha", "0.4", "--randomized", "--seed", "1")
	r3, _, _ := runCasIn(t, "", "conformal", "calibrate-aps", "--in", in, "--alpha", "0.4", "--randomized", "--seed", "2")
	if r1 != r2 || r1 == r3 || !strings.Contains(r1, `"randomized": true`) || !strings.Contains(r1, `"seed": 1`) {
		t.Errorf("randomized runs: %q %q %q", r1, r2, r3)
	}
}

func TestConformalAPS(t *testing.T) {
	in := conformalWrite(t, "q.jsonl", conformalCal)
	out, _, err := runCasIn(t, "", "conformal", "aps", "--in", in, "--qhat", "0.9")
	if err != nil {
		t.Fatal(err)
	}
	// q̂ = 0.9: query 1/2 c = [.844 .958 1] → 2 docs, [1 0]; query 3
	// c = [.862 .979 …] → 2, [0 2]; query 4 [.78 .84 .80]: c_1 = 1/(1+e⁻⁴+e⁻⁶)
	// = .980 → 1, [1]; query 5 c_1 = .943 → 1, [2].
	want := "{\"k\":2,\"kept\":[1,0]}\n{\"k\":2,\"kept\":[1,0]}\n{\"k\":2,\"kept\":[0,2]}\n{\"k\":1,\"kept\":[1]}\n{\"k\":1,\"kept\":[2]}\n"
	if out != want {
		t.Errorf("got\n%swant\n%s", out, want)
	}
	// Code clamps [2, 5] and q̂ = +Inf: everything up to 5 documents.
	out, _, err = runCasIn(t, "", "conformal", "aps", "--in", in, "--qhat", "+Inf", "--preset", "code", "--max-docs", "4")
	if err != nil {
		t.Fatal(err)
	}
	ks := []int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct{ K int }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, r.K)
	}
	if want := []int{3, 3, 4, 3, 4}; !slices.Equal(ks, want) {
		t.Errorf("k = %v, want %v", ks, want)
	}
	out, _, _ = runCasIn(t, "", "conformal", "aps", "--in", in, "--qhat", "0.5", "--preset", "code")
	if !strings.HasPrefix(out, `{"k":2,"kept":[1,0]}`) {
		t.Errorf("min-docs 2 not applied: %s", out)
	}
}

func TestConformalACI(t *testing.T) {
	steps := `{"scores":[1.2,0.8,3.1,0.9]}
{"scores":[2.5,0.7,1.1,4.0]}
{"scores":[0.6,0.9,1.0,1.3]}
{"scores":[5,6,0.1]}
`
	dir := t.TempDir()
	in := filepath.Join(dir, "steps.jsonl")
	boot := filepath.Join(dir, "boot.jsonl")
	os.WriteFile(in, []byte(steps), 0o644)
	os.WriteFile(boot, []byte(`{"scores":[0.5,1.0,1.5]}`+"\n"+`{"scores":[2.0,2.5,3.0]}`+"\n"), 0o644)
	out, _, err := runCasIn(t, "", "conformal", "aci", "--in", in, "--bootstrap", boot, "--rule", "plain", "--gamma", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines: %s", len(lines), out)
	}
	// Step 1 by hand: window [.5 1 1.5 2 2.5 3], α = .25, k = ⌈7·.75⌉ = 6 → q = 3;
	// 3.1 > 3 → err = .25, weights [1 1 .5 1], α₂ = .25 + .1(.25 − .25) = .25.
	var st struct {
		T         int
		Alpha     float64
		QHat      float64 `json:"qhat"`
		Err       float64
		Weights   []float64
		AlphaNext float64 `json:"alpha_next"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &st); err != nil {
		t.Fatal(err)
	}
	if st.T != 1 || st.Alpha != 0.25 || st.QHat != 3 || st.Err != 0.25 || st.AlphaNext != 0.25 ||
		len(st.Weights) != 4 || st.Weights[2] != 0.5 || st.Weights[0] != 1 {
		t.Errorf("step 1: %+v", st)
	}
	// The CLI agrees with the library on every step.
	cfg := conformal.DefaultACIConfig()
	cfg.Rule, cfg.Gamma = conformal.RulePlain, 0.1
	ctl, _ := conformal.NewACI(cfg, []float64{0.5, 1, 1.5, 2, 2.5, 3})
	batches, _ := conformal.ReadScoreLines(strings.NewReader(steps))
	for i, b := range batches {
		want, _ := ctl.Step(b)
		wb, _ := json.Marshal(want)
		if string(wb) != lines[i] {
			t.Errorf("step %d: CLI %s, library %s", i+1, lines[i], wb)
		}
	}

	// Resume: two steps, save, load, two more == four steps at once, for every rule.
	for _, rule := range []string{"plain", "smoothed", "ema"} {
		all, _, err := runCasIn(t, "", "conformal", "aci", "--in", in, "--rule", rule, "--bootstrap", boot, "--window", "5")
		if err != nil {
			t.Fatal(err)
		}
		first := filepath.Join(dir, "first.jsonl")
		second := filepath.Join(dir, "second.jsonl")
		ls := strings.SplitAfter(steps, "\n")
		os.WriteFile(first, []byte(ls[0]+ls[1]), 0o644)
		os.WriteFile(second, []byte(ls[2]+ls[3]), 0o644)
		state := filepath.Join(dir, "state.json")
		a, _, err := runCasIn(t, "", "conformal", "aci", "--in", first, "--rule", rule, "--bootstrap", boot, "--window", "5", "--save-state", state)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := runCasIn(t, "", "conformal", "aci", "--in", second, "--load-state", state)
		if err != nil {
			t.Fatal(err)
		}
		if a+b != all {
			t.Errorf("%s: resumed run differs:\n%s\nvs\n%s", rule, a+b, all)
		}
	}
	// Infinite q is printed as a string.
	out, _, _ = runCasIn(t, `{"scores":[1,2]}`, "conformal", "aci", "--in", "-")
	if !strings.Contains(out, `"qhat":"+Inf"`) {
		t.Errorf("empty window: %s", out)
	}
}

func TestConformalCLIErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	good := file("good.jsonl", `{"scores":[1,2],"gold":0}`+"\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"calibrate-aps", "--in", file("b1", `{"scores":[1,2],"gold":0}`+"\n"+`{"scores":[1,2],"gold":5}`)}, "b1: line 2: gold index 5 out of range"},
		{[]string{"calibrate-aps", "--in", file("b2", `{"scores":[1,2],"gold":0}`+"\n\n"+`{"scores":[1,`)}, "b2: line 3: malformed JSON"},
		{[]string{"calibrate-aps", "--in", file("b3", `{"scores":[],"gold":0}`)}, "b3: line 1: empty score list"},
		{[]string{"calibrate-aps", "--in", file("b4", `{"scores":[1,NaN],"gold":0}`)}, "b4: line 1: malformed JSON"},
		{[]string{"calibrate-aps", "--in", file("b5", `{"scores":[1,1e400],"gold":0}`)}, "b5: line 1: malformed JSON"},
		{[]string{"calibrate-aps", "--in", file("b6", `{"scores":[1,2]}`)}, `b6: line 1: missing "gold"`},
		{[]string{"calibrate-aps", "--in", file("b7", "")}, "b7: no queries"},
		{[]string{"calibrate-aps", "--in", good, "--alpha", "1.5"}, "--alpha 1.5 outside (0, 1)"},
		{[]string{"calibrate-aps", "--in", good, "--alpha", "0"}, "--alpha 0 outside (0, 1)"},
		{[]string{"calibrate-aps", "--in", good, "--alpha", "NaN"}, "outside (0, 1)"},
		{[]string{"calibrate-aps", "--in", good, "--quantile", "type7"}, "unknown quantile rule"},
		{[]string{"calibrate-aps", "--in", good, "--seed", "3"}, "--seed is only used with --randomized"},
		{[]string{"calibrate-aps", "--in", good, "--temperature", "-1"}, "temperature"},
		{[]string{"calibrate-aps", "--in", good, "--preset", "mine"}, "--preset"},
		{[]string{"calibrate-aps", "--in", filepath.Join(dir, "missing.jsonl")}, "missing.jsonl"},
		{[]string{"calibrate-aps", "--alpha", "0.1"}, `required flag(s) "in"`},
		{[]string{"aps", "--in", good}, "give exactly one of --calibration FILE and --qhat Q"},
		{[]string{"aps", "--in", good, "--qhat", "0.9", "--calibration", good}, "give exactly one of --calibration FILE and --qhat Q"},
		{[]string{"aps", "--in", good, "--calibration", file("c1", `{"n": 3}`)}, `c1: APS calibration has no "qhat_log" or "qhat"`},
		{[]string{"aps", "--in", good, "--calibration", filepath.Join(dir, "nocal.json")}, "nocal.json"},
		{[]string{"aps", "--in", good, "--qhat", "NaN"}, "--qhat is NaN"},
		{[]string{"aps", "--in", good, "--qhat", "0.9", "--min-docs", "3", "--max-docs", "2"}, "min docs 3 exceeds max docs 2"},
		{[]string{"aps", "--in", file("b8", `{"scores":[1,2]}`+"\n"+`{"scores":"x"}`), "--qhat", "0.9"}, "b8: line 2: malformed JSON"},
		{[]string{"aci", "--in", file("b9", `{"scores":[1]}`+"\n"+`{"scores":[]}`)}, "b9: line 2: empty score list"},
		{[]string{"aci", "--in", good, "--rule", "eq7"}, "unknown ACI rule"},
		{[]string{"aci", "--in", good, "--rho", "1"}, "rho 1 outside (0, 1)"},
		{[]string{"aci", "--in", good, "--gamma", "0"}, "gamma 0"},
		{[]string{"aci", "--in", good, "--window", "0"}, "window 0"},
		{[]string{"aci", "--in", good, "--alpha1", "2"}, "--alpha1 2 outside (0, 1)"},
		{[]string{"aci", "--in", good, "--bootstrap", file("b10", `{"scores":[1,}`)}, "b10: line 1: malformed JSON"},
		{[]string{"aci", "--in", good, "--load-state", file("s1", `{"config":{"rho":7}}`)}, "load state"},
		{[]string{"aci", "--in", good, "--load-state", file("s2", `{}`), "--rho", "0.3"}, "--rho conflicts with --load-state"},
	}
	for _, c := range cases {
		out, _, err := runCasIn(t, "", append([]string{"conformal"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
		if out != "" {
			t.Errorf("%v: wrote output despite the error: %q", c.args, out)
		}
	}
	// A failing run never leaves a half-written --out file.
	outPath := filepath.Join(dir, "never.json")
	if _, _, err := runCasIn(t, "", "conformal", "aps", "--in", file("b11", `{"scores":[1]}`+"\n"+`oops`), "--qhat", "0.9", "--out", outPath); err == nil {
		t.Fatal("bad input accepted")
	}
	if _, err := os.Stat(outPath); !os.IsNotExist(err) {
		t.Errorf("--out written despite the error: %v", err)
	}
}

func TestDemoCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("the walkthrough takes a few seconds; conformal's own tests cover its numbers")
	}
	out, _, err := runCasIn(t, "", "demo", "--conformal-only", "--seed", "3")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	var sawAPS, sawACI bool
	for sc.Scan() {
		l := sc.Text()
		sawAPS = sawAPS || strings.Contains(l, "setting") && strings.Contains(l, "coverage")
		sawACI = sawACI || strings.Contains(l, "smoothed α") && strings.Contains(l, "ema err")
	}
	if !sawAPS || !sawACI {
		t.Errorf("demo output lacks its tables:\n%s", out)
	}
}
