package train

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cas-engine/cas/agent"
)

// TestWarmStartLowersCrossEntropy: a few dozen supervised steps on fixed
// examples cut the masked cross-entropy of a tiny model by more than half,
// and tokens outside the mask do not count.
func TestWarmStartLowersCrossEntropy(t *testing.T) {
	m := tinyModel(t, "qwen3-tiny")
	examples := synthTrajectories(11, m.Config.VocabSize, 2, 2)
	cfg := WarmStartConfig{Optim: OptimConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, MaxGradNorm: 1, SkipNonFinite: true},
		Steps: 6, BatchSize: 4, MicroBatch: 2, Seed: 1}
	calls := 0
	cfg.OnStep = func(int, float64) { calls++ }
	res, err := WarmStart(m, examples, cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, last := res.Losses[0], res.Losses[len(res.Losses)-1]
	t.Logf("cross-entropy %.3f → %.3f over %d steps", first, last, len(res.Losses))
	if !(last < first/2) {
		t.Errorf("cross-entropy %.3f → %.3f: not halved", first, last)
	}
	if calls != cfg.Steps || len(res.Losses) != cfg.Steps {
		t.Errorf("%d callbacks, %d losses for %d steps", calls, len(res.Losses), cfg.Steps)
	}
	want := 0
	for _, e := range examples {
		want += e.PolicyTokens()
	}
	if res.Tokens != want*cfg.Steps {
		t.Errorf("tokens %d, want %d (every batch is all 4 examples)", res.Tokens, want*cfg.Steps)
	}
	// The optimiser state is gone: a second warm start starts afresh.
	if _, ok := LastGradNorm(m.Context()); ok {
		t.Error("optimiser state survived the warm start")
	}
}

func TestWarmStartRejectsBadInput(t *testing.T) {
	m := tinyModel(t, "qwen2-tiny")
	good := WarmStartConfig{Optim: OptimConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8}, Steps: 1, BatchSize: 1}
	noMask := synthTrajectories(1, m.Config.VocabSize, 1, 1)
	for i := range noMask[0].Mask {
		noMask[0].Mask[i] = 0
	}
	badID := synthTrajectories(1, m.Config.VocabSize, 1, 1)
	badID[0].IDs[3] = m.Config.VocabSize
	cases := map[string]struct {
		ex   []*agent.Trajectory
		cfg  WarmStartConfig
		want string
	}{
		"empty":     {nil, good, "no examples"},
		"steps":     {synthTrajectories(1, 384, 1, 1), WarmStartConfig{Optim: good.Optim, BatchSize: 1}, "steps"},
		"no mask":   {noMask, good, "no token in its loss mask"},
		"bad token": {badID, good, "outside the vocabulary"},
	}
	for name, c := range cases {
		_, err := WarmStart(m, c.ex, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
}

func TestInformationSpans(t *testing.T) {
	cases := []struct {
		text string
		want []string
	}{
		{"<think>a</think><answer>x</answer>", nil},
		{"<search>q</search><information>Doc 1 (Title: T)\nbody</information><think>b</think>",
			[]string{"<information>Doc 1 (Title: T)\nbody</information>"}},
		{"<search>q</search>\n\n<information>Doc 1(Title: T) body\n</information>\n\n<think>b</think>",
			[]string{"\n\n<information>Doc 1(Title: T) body\n</information>\n\n"}},
		{"<information>a</information>x<information>b</information>", []string{"<information>a</information>", "<information>b</information>"}},
		{"x<information>cut off", []string{"<information>cut off"}},
	}
	for _, c := range cases {
		var got []string
		for _, sp := range InformationSpans(c.text) {
			got = append(got, c.text[sp[0]:sp[1]])
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("InformationSpans(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// byteEncode is a stand-in tokenizer: one token per byte.
func byteEncode(s string) []int {
	ids := make([]int, len(s))
	for i := range s {
		ids[i] = int(s[i])
	}
	return ids
}

func TestSupervisedExample(t *testing.T) {
	resp := "<search>q</search><information>doc</information><answer>a</answer>"
	tr, err := SupervisedExample(byteEncode, []int{1, 2, 3}, resp, 383)
	if err != nil {
		t.Fatal(err)
	}
	if tr.PromptLen != 3 || tr.ResponseLen() != len(resp)+1 || tr.IDs[len(tr.IDs)-1] != 383 {
		t.Fatalf("prompt %d, response %d tokens", tr.PromptLen, tr.ResponseLen())
	}
	var masked strings.Builder
	for j, m := range tr.ResponseMask()[:len(resp)] {
		if m == 0 {
			masked.WriteByte(byte(tr.IDs[tr.PromptLen+j]))
		}
	}
	if masked.String() != "<information>doc</information>" {
		t.Errorf("masked-out text %q", masked.String())
	}
	if tr.Mask[len(tr.Mask)-1] != 1 {
		t.Error("EOS not in the loss")
	}
	if _, err := SupervisedExample(byteEncode, nil, resp, -1); err == nil {
		t.Error("empty prompt accepted")
	}
	if _, err := SupervisedExample(byteEncode, []int{1}, "", -1); err == nil {
		t.Error("empty response accepted")
	}
}

// FuzzInformationSpans: spans are ordered, disjoint, inside the text, and
// each holds an opening tag.
func FuzzInformationSpans(f *testing.F) {
	for _, s := range []string{"", "<information>", "a <information>b</information> c", "</information><information>",
		"<information>x</information>\n\n<information>y</information>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		prev := 0
		for _, sp := range InformationSpans(s) {
			if sp[0] < prev || sp[1] <= sp[0] || sp[1] > len(s) {
				t.Fatalf("bad span %v after %d in %q", sp, prev, s)
			}
			if !strings.Contains(s[sp[0]:sp[1]], "<information>") {
				t.Fatalf("span %q has no opening tag", s[sp[0]:sp[1]])
			}
			prev = sp[1]
		}
	})
}

func ExampleInformationSpans() {
	resp := "<search>q</search>\n\n<information>Doc 1(Title: T) text\n</information>\n\n<answer>x</answer>"
	for _, sp := range InformationSpans(resp) {
		fmt.Printf("%q\n", resp[sp[0]:sp[1]])
	}
	// Output: "\n\n<information>Doc 1(Title: T) text\n</information>\n\n"
}
