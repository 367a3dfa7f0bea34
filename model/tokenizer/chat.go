package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Chat template families.
const (
	FamilyQwen3  = "qwen3"
	FamilyQwen25 = "qwen2.5"
)

// qwen25DefaultSystem is the system prompt Qwen2.5's template inserts when
// the conversation has none.
const qwen25DefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// Message is one chat turn, as in Hugging Face's apply_chat_template.
type Message struct {
	Role    string `json:"role"` // system, user, assistant or tool
	Content string `json:"content"`
	// ReasoningContent, when set, is an assistant turn's thinking (Qwen3);
	// when nil, Qwen3 takes it from a <think>…</think> block in Content.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// ChatOptions are the template variables of apply_chat_template.
type ChatOptions struct {
	// Family is "qwen3" or "qwen2.5"; empty means the tokenizer's own
	// (detected from tokenizer_config.json or its added tokens).
	Family string
	// AddGenerationPrompt appends the header of an assistant turn.
	AddGenerationPrompt bool
	// EnableThinking, when set to false, makes Qwen3's generation prompt an
	// empty think block; nil leaves the variable undefined (thinking on).
	EnableThinking *bool
}

// RenderChat renders msgs with the tokenizer's chat template family (or
// opts.Family when set).
func (t *Tokenizer) RenderChat(msgs []Message, opts ChatOptions) (string, error) {
	if opts.Family == "" {
		opts.Family = t.family
	}
	return RenderChat(msgs, opts)
}

// RenderChat renders msgs exactly as Hugging Face's apply_chat_template does
// with the official Qwen3 or Qwen2.5 Jinja template (without tools), so the
// text tokenizes to the ids the model was trained on.
func RenderChat(msgs []Message, opts ChatOptions) (string, error) {
	if len(msgs) == 0 {
		return "", fmt.Errorf("chat: no messages")
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return "", fmt.Errorf("chat: message %d has unsupported role %q", i, m.Role)
		}
	}
	switch opts.Family {
	case FamilyQwen3:
		return renderQwen3(msgs, opts), nil
	case FamilyQwen25:
		return renderQwen25(msgs, opts), nil
	case "":
		return "", fmt.Errorf("chat: unknown template family (set ChatOptions.Family to %q or %q)", FamilyQwen3, FamilyQwen25)
	}
	return "", fmt.Errorf("chat: unsupported template family %q", opts.Family)
}

// renderTool writes a tool turn: consecutive tool results share one user
// turn, each wrapped in <tool_response> tags.
func renderTool(sb *strings.Builder, msgs []Message, i int) {
	if i == 0 || msgs[i-1].Role != "tool" {
		sb.WriteString("<|im_start|>user")
	}
	sb.WriteString("\n<tool_response>\n")
	sb.WriteString(msgs[i].Content)
	sb.WriteString("\n</tool_response>")
	if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
		sb.WriteString("<|im_end|>\n")
	}
}

func writeTurn(sb *strings.Builder, role, content string) {
	sb.WriteString("<|im_start|>")
	sb.WriteString(role)
	sb.WriteString("\n")
	sb.WriteString(content)
	sb.WriteString("<|im_end|>\n")
}

// renderQwen3 follows Qwen3's template: assistant turns after the last user
// query carry their reasoning in a <think> block; earlier ones lose it.
func renderQwen3(msgs []Message, opts ChatOptions) string {
	var sb strings.Builder
	if msgs[0].Role == "system" {
		writeTurn(&sb, "system", msgs[0].Content)
	}
	// The last user message that is not a wrapped tool response.
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == "user" && !(strings.HasPrefix(m.Content, "<tool_response>") && strings.HasSuffix(m.Content, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	for i, m := range msgs {
		switch {
		case m.Role == "user" || (m.Role == "system" && i > 0):
			writeTurn(&sb, m.Role, m.Content)
		case m.Role == "assistant":
			content, reasoning := m.Content, ""
			if m.ReasoningContent != nil {
				reasoning = *m.ReasoningContent
			} else if strings.Contains(m.Content, "</think>") {
				parts := strings.Split(m.Content, "</think>")
				content = strings.TrimLeft(parts[len(parts)-1], "\n")
				before := strings.TrimRight(parts[0], "\n")
				thinkParts := strings.Split(before, "<think>")
				reasoning = strings.TrimLeft(thinkParts[len(thinkParts)-1], "\n")
			}
			sb.WriteString("<|im_start|>assistant\n")
			if i > lastQuery && (i == len(msgs)-1 || reasoning != "") {
				sb.WriteString("<think>\n")
				sb.WriteString(strings.Trim(reasoning, "\n"))
				sb.WriteString("\n</think>\n\n")
				sb.WriteString(strings.TrimLeft(content, "\n"))
			} else {
				sb.WriteString(content)
			}
			sb.WriteString("<|im_end|>\n")
		case m.Role == "tool":
			renderTool(&sb, msgs, i)
		}
	}
	if opts.AddGenerationPrompt {
		sb.WriteString("<|im_start|>assistant\n")
		if opts.EnableThinking != nil && !*opts.EnableThinking {
			sb.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return sb.String()
}

// renderQwen25 follows Qwen2.5-Instruct's template, which inserts a default
// system prompt when the first message is not a system one.
func renderQwen25(msgs []Message, opts ChatOptions) string {
	var sb strings.Builder
	if msgs[0].Role == "system" {
		writeTurn(&sb, "system", msgs[0].Content)
	} else {
		writeTurn(&sb, "system", qwen25DefaultSystem)
	}
	for i, m := range msgs {
		switch {
		case m.Role == "user" || m.Role == "assistant" || (m.Role == "system" && i > 0):
			writeTurn(&sb, m.Role, m.Content)
		case m.Role == "tool":
			renderTool(&sb, msgs, i)
		}
	}
	if opts.AddGenerationPrompt {
		sb.WriteString("<|im_start|>assistant\n")
	}
	return sb.String()
}

// familyFromConfig recognises the chat template of a tokenizer_config.json.
func familyFromConfig(data []byte) (string, error) {
	var c configJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return "", fmt.Errorf("parse JSON: %w", err)
	}
	if isNull(c.ChatTemplate) {
		return "", nil
	}
	// chat_template is a string, or a list of {name, template}.
	var text string
	if err := json.Unmarshal(c.ChatTemplate, &text); err != nil {
		var named []struct {
			Name     string `json:"name"`
			Template string `json:"template"`
		}
		if err := json.Unmarshal(c.ChatTemplate, &named); err != nil {
			return "", fmt.Errorf("chat_template: %w", err)
		}
		for _, n := range named {
			if n.Name == "default" || text == "" {
				text = n.Template
			}
		}
	}
	return familyFromTemplate(text), nil
}

// familyFromTemplate recognises a Jinja chat template: Qwen3's handles
// thinking, Qwen2.5's carries its default system prompt.
func familyFromTemplate(text string) string {
	switch {
	case strings.Contains(text, "<|im_start|>") && (strings.Contains(text, "enable_thinking") || strings.Contains(text, "reasoning_content")):
		return FamilyQwen3
	case strings.Contains(text, qwen25DefaultSystem):
		return FamilyQwen25
	}
	return ""
}

// familyFromTokens guesses the family from added tokens: ChatML markers
// with <think> mean Qwen3, without it Qwen2.5.
func familyFromTokens(t *Tokenizer) string {
	_, chatML := t.addedByText["<|im_start|>"]
	_, think := t.addedByText["<think>"]
	switch {
	case chatML && think:
		return FamilyQwen3
	case chatML:
		return FamilyQwen25
	}
	return ""
}
