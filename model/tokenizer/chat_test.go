package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/testfile"
)

// TestChatTemplateGolden renders every case of the shared golden file (the
// real Qwen3 template rendered by Jinja2) through the tokenizer loaded from
// the Qwen3 folder, whose family comes from tokenizer_config.json.
func TestChatTemplateGolden(t *testing.T) {
	tok, err := Load(filepath.Dir(sharedtest.Path(t, "tokenizers", "qwen3", "tokenizer_config.json")))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Family() != FamilyQwen3 {
		t.Fatalf("Family = %q, want %q", tok.Family(), FamilyQwen3)
	}
	type chatCase struct {
		Input struct {
			Messages            []Message `json:"messages"`
			AddGenerationPrompt bool      `json:"add_generation_prompt"`
			EnableThinking      *bool     `json:"enable_thinking"`
		} `json:"input"`
		Rendered string `json:"rendered"`
	}
	cases := testfile.ReadJSONL[chatCase](t, sharedtest.Path(t, "golden", "tokenizer", "qwen3_chat_template.jsonl"))
	for i, c := range cases {
		line := i + 1
		got, err := tok.RenderChat(c.Input.Messages, ChatOptions{
			AddGenerationPrompt: c.Input.AddGenerationPrompt,
			EnableThinking:      c.Input.EnableThinking,
		})
		if err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		if got != c.Rendered {
			t.Errorf("line %d:\n got %q\nwant %q", line, got, c.Rendered)
		}
	}
	n := len(cases)
	if n != 4 {
		t.Errorf("rendered %d golden cases, want 4", n)
	}
}

func ptr[T any](v T) *T { return &v }

// TestRenderChat checks the template branches the golden file does not
// reach, against renderings worked out from the Jinja sources.
func TestRenderChat(t *testing.T) {
	user := Message{Role: "user", Content: "Q?"}
	for _, tc := range []struct {
		name string
		msgs []Message
		opts ChatOptions
		want string
	}{
		{
			"qwen2.5 default system", []Message{user},
			ChatOptions{Family: FamilyQwen25, AddGenerationPrompt: true},
			"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
				"<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			"qwen2.5 own system, assistant turn, no prompt",
			[]Message{{Role: "system", Content: "S"}, user, {Role: "assistant", Content: "A"}},
			ChatOptions{Family: FamilyQwen25},
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n",
		},
		{
			"qwen2.5 ignores enable_thinking", []Message{{Role: "system", Content: "S"}, user},
			ChatOptions{Family: FamilyQwen25, AddGenerationPrompt: true, EnableThinking: ptr(false)},
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			"qwen3 last assistant turn gets a think block",
			[]Message{user, {Role: "assistant", Content: "<think>\nr1\n</think>\n\nA1"}},
			ChatOptions{Family: FamilyQwen3},
			"<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n<think>\nr1\n</think>\n\nA1<|im_end|>\n",
		},
		{
			"qwen3 earlier assistant turns lose their reasoning",
			[]Message{user, {Role: "assistant", Content: "<think>r1</think>A1"}, {Role: "user", Content: "Q2"}},
			ChatOptions{Family: FamilyQwen3, AddGenerationPrompt: true},
			"<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			"qwen3 reasoning_content and tool turns",
			[]Message{
				user,
				{Role: "assistant", Content: "call", ReasoningContent: ptr("think")},
				{Role: "tool", Content: "r1"}, {Role: "tool", Content: "r2"},
				{Role: "assistant", Content: "A"},
			},
			ChatOptions{Family: FamilyQwen3},
			"<|im_start|>user\nQ?<|im_end|>\n" +
				"<|im_start|>assistant\n<think>\nthink\n</think>\n\ncall<|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n",
		},
		{
			"qwen3 later system message",
			[]Message{{Role: "system", Content: "S"}, user, {Role: "system", Content: "S2"}},
			ChatOptions{Family: FamilyQwen3},
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ?<|im_end|>\n<|im_start|>system\nS2<|im_end|>\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderChat(tc.msgs, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestRenderChatErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []Message
		opts ChatOptions
		want string
	}{
		{"no messages", nil, ChatOptions{Family: FamilyQwen3}, "no messages"},
		{"bad role", []Message{{Role: "robot"}}, ChatOptions{Family: FamilyQwen3}, `unsupported role "robot"`},
		{"no family", []Message{{Role: "user"}}, ChatOptions{}, "unknown template family"},
		{"bad family", []Message{{Role: "user"}}, ChatOptions{Family: "llama"}, `unsupported template family "llama"`},
	} {
		_, err := RenderChat(tc.msgs, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
