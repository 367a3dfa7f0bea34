package agent

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cas-engine/cas/model/tokenizer"
)

// table5 is the paper's prompt (Table 5) with the question "Who wrote Hamlet?", typed out in full.
const table5 = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant. Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. After reasoning, if you find you lack some knowledge, you can call a search engine by <search>query</search> and it will return the top searched results between <information> and </information>. You can search as many times as you want. If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>.\nQuestion: Who wrote Hamlet?"

func TestPromptText(t *testing.T) {
	if got := PromptText("Who wrote Hamlet?"); got != table5 {
		t.Errorf("PromptText =\n%q\nwant\n%q", got, table5)
	}
}

func TestPromptMessages(t *testing.T) {
	const q = "Who wrote Hamlet?"
	userText := strings.TrimPrefix(table5, QwenSystemPrompt+" ")
	cases := []struct {
		p    Placement
		want []tokenizer.Message
	}{
		{PlacementSystemUser, []tokenizer.Message{{Role: "system", Content: QwenSystemPrompt}, {Role: "user", Content: userText}}},
		{PlacementUserOnly, []tokenizer.Message{{Role: "user", Content: userText}}},
	}
	for _, c := range cases {
		got, err := PromptMessages(q, c.p)
		if err != nil {
			t.Fatalf("%v: %v", c.p, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: got %+v, want %+v", c.p, got, c.want)
		}
	}
	// Joined with a space, the code's split is exactly Table 5.
	m, _ := PromptMessages(q, PlacementSystemUser)
	if m[0].Content+" "+m[1].Content != table5 {
		t.Error("system + user turns do not reassemble Table 5")
	}
	for _, bad := range []string{"", "  \n\t"} {
		if _, err := PromptMessages(bad, PlacementSystemUser); err == nil {
			t.Errorf("PromptMessages(%q) accepted a blank question", bad)
		}
	}
	if _, err := PromptMessages(q, Placement(7)); err == nil {
		t.Error("unknown placement accepted")
	}
}

func TestParseFlags(t *testing.T) {
	for s, want := range map[string]Placement{"system-user": PlacementSystemUser, "code": PlacementSystemUser, "user": PlacementUserOnly, "Search-R1": PlacementUserOnly} {
		if p, err := ParsePlacement(s); err != nil || p != want {
			t.Errorf("ParsePlacement(%q) = %v, %v", s, p, err)
		}
	}
	for s, want := range map[string]InfoFormat{"code": InfoCode, "search-r1": InfoSearchR1, "SearchR1": InfoSearchR1} {
		if f, err := ParseInfoFormat(s); err != nil || f != want {
			t.Errorf("ParseInfoFormat(%q) = %v, %v", s, f, err)
		}
	}
	if _, err := ParsePlacement("assistant"); err == nil {
		t.Error("ParsePlacement accepted assistant")
	}
	if _, err := ParseInfoFormat("xml"); err == nil {
		t.Error("ParseInfoFormat accepted xml")
	}
	for _, p := range []Placement{PlacementSystemUser, PlacementUserOnly} {
		if q, _ := ParsePlacement(p.String()); q != p {
			t.Errorf("placement %v does not round-trip", p)
		}
	}
	for _, f := range []InfoFormat{InfoCode, InfoSearchR1} {
		if g, _ := ParseInfoFormat(f.String()); g != f {
			t.Errorf("format %v does not round-trip", f)
		}
	}
}

// TestPromptRendering: with Qwen2.5's template both placements render the
// same text (its default system prompt is the paper's first two sentences);
// with Qwen3's, only the code's split keeps them.
func TestPromptRendering(t *testing.T) {
	const q = "Who wrote Hamlet?"
	off := false
	render := func(p Placement, family string) string {
		t.Helper()
		m, err := PromptMessages(q, p)
		if err != nil {
			t.Fatal(err)
		}
		s, err := tokenizer.RenderChat(m, tokenizer.ChatOptions{Family: family, AddGenerationPrompt: true, EnableThinking: &off})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	split25, user25 := render(PlacementSystemUser, tokenizer.FamilyQwen25), render(PlacementUserOnly, tokenizer.FamilyQwen25)
	if split25 != user25 {
		t.Errorf("Qwen2.5 placements differ:\n%q\n%q", split25, user25)
	}
	want25 := "<|im_start|>system\n" + QwenSystemPrompt + "<|im_end|>\n<|im_start|>user\n" +
		strings.TrimPrefix(table5, QwenSystemPrompt+" ") + "<|im_end|>\n<|im_start|>assistant\n"
	if split25 != want25 {
		t.Errorf("Qwen2.5 rendering:\n%q\nwant\n%q", split25, want25)
	}
	split3, user3 := render(PlacementSystemUser, tokenizer.FamilyQwen3), render(PlacementUserOnly, tokenizer.FamilyQwen3)
	if !strings.Contains(split3, QwenSystemPrompt) || strings.Contains(user3, QwenSystemPrompt) {
		t.Errorf("Qwen3: system prompt in split %v, in user-only %v",
			strings.Contains(split3, QwenSystemPrompt), strings.Contains(user3, QwenSystemPrompt))
	}
	if !strings.HasSuffix(split3, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Errorf("Qwen3 generation prompt with thinking off: %q", split3[len(split3)-60:])
	}
}
