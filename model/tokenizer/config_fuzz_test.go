package tokenizer

import (
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/testfile"
)

// FuzzLoadConfig: any tokenizer_config.json (chat_template a string, a
// list of named templates, or garbage) and chat_template.jinja next to a
// valid tokenizer.json load a tokenizer that renders a chat, or give an
// error naming the file; never a panic.
func FuzzLoadConfig(f *testing.F) {
	qwen3 := `{"chat_template": "{%- if enable_thinking %}<|im_start|>{%- endif %}"}`
	for _, s := range [][2]string{
		{qwen3, ""},
		{`{"chat_template": [{"name": "default", "template": "<|im_start|>reasoning_content"}, {"name": "tool_use", "template": 7}]}`, ""},
		{`{"chat_template": [{"name": 1}]}`, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
		{`{"chat_template": null, "model_max_length": 1e400}`, ""},
		{`{"chat_template": {"a": 1}}`, "<|im_start|>enable_thinking"},
		{`[`, ""}, {``, "\xff\xfe"},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	tokJSON := smallBPE(f, true)
	f.Fuzz(func(t *testing.T, cfg, jinja []byte) {
		dir := t.TempDir()
		for name, b := range map[string][]byte{"tokenizer.json": tokJSON, "tokenizer_config.json": cfg, "chat_template.jinja": jinja} {
			testfile.Write(t, dir, name, b)
		}
		tok, err := Load(dir)
		if err != nil {
			if !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		tok.RenderChat([]Message{{Role: "system", Content: "s"}, {Role: "user", Content: "x"}}, ChatOptions{})
	})
}
