package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// JSONLMode selects what TransformJSONL does with each line.
type JSONLMode int

const (
	// JSONLEncode reads a JSON string (or {"text": ...}) per line and writes
	// {"ids": [...]}.
	JSONLEncode JSONLMode = iota
	// JSONLChat reads a JSON list of messages (or {"messages": [...],
	// "add_generation_prompt": b, "enable_thinking": b}) per line, renders
	// it with the chat template and writes {"ids": [...]}.
	JSONLChat
	// JSONLDecode reads {"ids": [...]} (or a bare list) per line and writes
	// the decoded text as a JSON string.
	JSONLDecode
)

// JSONLOptions configure TransformJSONL.
type JSONLOptions struct {
	Mode JSONLMode
	// Name labels the input in errors ("stdin", a file name).
	Name string
	// Special adds the post-processor's special tokens when encoding.
	Special bool
	// SkipSpecial drops special tokens when decoding.
	SkipSpecial bool
	// Chat holds the template options for JSONLChat; a line given as an
	// object overrides AddGenerationPrompt and EnableThinking.
	Chat ChatOptions
	// Progress, when set, is called with the number of input bytes read.
	Progress func(read int64)
}

// TransformJSONL encodes, chat-encodes or decodes every line of r and writes
// one JSON line per input line to w. It returns the number of lines done;
// an error names the input and the line (invalid UTF-8, bad JSON, unknown
// role), and stops the transform.
func (t *Tokenizer) TransformJSONL(r io.Reader, w io.Writer, opts JSONLOptions) (int, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	bw := bufio.NewWriterSize(w, 1<<16)
	var read int64
	var out []byte
	var ids []int
	n := 0
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return n, fmt.Errorf("%s: %w", opts.Name, err)
		}
		read += int64(len(line))
		line = bytes.TrimRight(line, "\r\n")
		if !utf8.Valid(line) {
			return n, fmt.Errorf("%s:%d: invalid UTF-8 at byte %d", opts.Name, lineNo, invalidUTF8At(line))
		}
		if len(bytes.TrimSpace(line)) == 0 {
			return n, fmt.Errorf("%s:%d: empty line", opts.Name, lineNo)
		}
		out = out[:0]
		switch opts.Mode {
		case JSONLDecode:
			if ids, err = parseIDsLine(line, ids[:0]); err != nil {
				return n, fmt.Errorf("%s:%d: %w", opts.Name, lineNo, err)
			}
			text := t.Decode(ids, opts.SkipSpecial)
			out = appendJSONString(out, text)
		default:
			text, err := t.lineText(line, opts)
			if err != nil {
				return n, fmt.Errorf("%s:%d: %w", opts.Name, lineNo, err)
			}
			if ids, err = t.appendEncodeGuarded(ids[:0], text); err != nil {
				return n, fmt.Errorf("%s:%d: %w", opts.Name, lineNo, err)
			}
			if opts.Special {
				ids = t.PostProcess(ids)
			}
			out = append(out, `{"ids":[`...)
			for i, id := range ids {
				if i > 0 {
					out = append(out, ',')
				}
				out = strconv.AppendInt(out, int64(id), 10)
			}
			out = append(out, "]}"...)
		}
		out = append(out, '\n')
		if _, err := bw.Write(out); err != nil {
			return n, err
		}
		n++
		if opts.Progress != nil {
			opts.Progress(read)
		}
	}
	return n, bw.Flush()
}

// lineText returns the text to encode for one input line.
func (t *Tokenizer) lineText(line []byte, opts JSONLOptions) (string, error) {
	if opts.Mode != JSONLChat {
		var s string
		if line[0] == '{' {
			var obj struct {
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(line, &obj); err != nil {
				return "", err
			}
			if obj.Text == nil {
				return "", fmt.Errorf(`object without a "text" field`)
			}
			return *obj.Text, nil
		}
		if err := json.Unmarshal(line, &s); err != nil {
			return "", fmt.Errorf("want a JSON string: %w", err)
		}
		return s, nil
	}
	chat := opts.Chat
	var msgs []Message
	if line[0] == '{' {
		var obj struct {
			Messages            []Message `json:"messages"`
			AddGenerationPrompt *bool     `json:"add_generation_prompt"`
			EnableThinking      *bool     `json:"enable_thinking"`
		}
		if err := json.Unmarshal(line, &obj); err != nil {
			return "", err
		}
		msgs = obj.Messages
		if obj.AddGenerationPrompt != nil {
			chat.AddGenerationPrompt = *obj.AddGenerationPrompt
		}
		if obj.EnableThinking != nil {
			chat.EnableThinking = obj.EnableThinking
		}
	} else if err := json.Unmarshal(line, &msgs); err != nil {
		return "", fmt.Errorf("want a JSON list of messages: %w", err)
	}
	return t.RenderChat(msgs, chat)
}

// parseIDsLine reads {"ids": [...]} or [...].
func parseIDsLine(line []byte, dst []int) ([]int, error) {
	if line[0] == '{' {
		var obj struct {
			IDs *[]int `json:"ids"`
		}
		if err := json.Unmarshal(line, &obj); err != nil {
			return nil, err
		}
		if obj.IDs == nil {
			return nil, fmt.Errorf(`object without an "ids" field`)
		}
		return append(dst, *obj.IDs...), nil
	}
	var ids []int
	if err := json.Unmarshal(line, &ids); err != nil {
		return nil, fmt.Errorf("want a JSON list of ids: %w", err)
	}
	return append(dst, ids...), nil
}

// appendJSONString appends s as a JSON string without HTML escaping.
func appendJSONString(dst []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimRight(buf.Bytes(), "\n")...)
}
