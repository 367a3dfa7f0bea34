package tokenizer

import (
	"bytes"
	"strings"
	"testing"
)

func TestTransformJSONL(t *testing.T) {
	tok := mustParse(t, smallBPE(t, false))
	for _, tc := range []struct {
		name  string
		opts  JSONLOptions
		in    string
		want  string
		lines int
	}{
		{"encode", JSONLOptions{Mode: JSONLEncode},
			"\"hello world\"\n{\"text\":\"hello\"}\r\n\"<search>\"",
			"{\"ids\":[259,261,114,108,100]}\n{\"ids\":[259]}\n{\"ids\":[262]}\n", 3},
		{"decode", JSONLOptions{Mode: JSONLDecode},
			"{\"ids\":[259,261,114,108,100]}\n[264,259,60]\n",
			"\"hello world\"\n\"<|endoftext|>hello<\"\n", 2},
		{"decode skipping special", JSONLOptions{Mode: JSONLDecode, SkipSpecial: true},
			"[264,259]\n", "\"hello\"\n", 1},
		{"chat", JSONLOptions{Mode: JSONLChat, Chat: ChatOptions{Family: FamilyQwen25}},
			"{\"messages\":[{\"role\":\"system\",\"content\":\"\"}],\"add_generation_prompt\":false}\n",
			"{\"ids\":[60,124,105,109,95,115,116,97,114,116,124,62,115,121,115,116,101,109,10,60,124,105,109,95,101,110,100,124,62,10]}\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			var progress int64
			tc.opts.Name = "in.jsonl"
			tc.opts.Progress = func(n int64) { progress = n }
			n, err := tok.TransformJSONL(strings.NewReader(tc.in), &out, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.lines || out.String() != tc.want {
				t.Errorf("got %d lines %q, want %d lines %q", n, out.String(), tc.lines, tc.want)
			}
			if progress != int64(len(tc.in)) {
				t.Errorf("progress reported %d bytes, want %d", progress, len(tc.in))
			}
		})
	}
}

func TestTransformJSONLChatQwen3(t *testing.T) {
	tok := qwen3(t)
	var out bytes.Buffer
	in := `[{"role":"user","content":"Hi"}]` + "\n"
	off := false
	_, err := tok.TransformJSONL(strings.NewReader(in), &out, JSONLOptions{
		Mode: JSONLChat, Name: "stdin",
		Chat: ChatOptions{AddGenerationPrompt: true, EnableThinking: &off},
	})
	if err != nil {
		t.Fatal(err)
	}
	// <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n
	want := `{"ids":[151644,872,198,13048,151645,198,151644,77091,198,151667,271,151668,271]}` + "\n"
	if out.String() != want {
		t.Errorf("got  %s\nwant %s", out.String(), want)
	}
}

func TestTransformJSONLErrors(t *testing.T) {
	tok := mustParse(t, smallBPE(t, false))
	for _, tc := range []struct {
		name string
		mode JSONLMode
		in   string
		want string
	}{
		{"invalid utf8", JSONLEncode, "\"ok\"\n\"a\xffb\"\n", "in.jsonl:2: invalid UTF-8 at byte 2"},
		{"not json", JSONLEncode, "hello\n", "in.jsonl:1: want a JSON string"},
		{"empty line", JSONLEncode, "\"a\"\n\n\"b\"\n", "in.jsonl:2: empty line"},
		{"no text", JSONLEncode, "{\"txt\":\"a\"}\n", `in.jsonl:1: object without a "text" field`},
		{"no ids", JSONLDecode, "{\"id\":[1]}\n", `in.jsonl:1: object without an "ids" field`},
		{"bad ids", JSONLDecode, "[1,\"a\"]\n", "in.jsonl:1: want a JSON list of ids"},
		{"bad role", JSONLChat, "[{\"role\":\"bot\",\"content\":\"x\"}]\n", `in.jsonl:1: chat: message 0 has unsupported role "bot"`},
		{"no family", JSONLChat, "[{\"role\":\"user\",\"content\":\"x\"}]\n", "in.jsonl:1: chat: unknown template family"},
	} {
		_, err := tok.TransformJSONL(strings.NewReader(tc.in), &bytes.Buffer{}, JSONLOptions{Mode: tc.mode, Name: "in.jsonl"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
