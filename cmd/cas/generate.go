package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/tokenizer"
)

func newGenerateCmd() *cobra.Command {
	var (
		modelDir, tokPath, prompt, system string
		chat, think                       bool
		opts                              qwen.GenerateOptions
		seed                              uint64
	)
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Generate text with a Qwen model, streaming to stdout",
		Long: `Generate encodes --prompt (with --chat: as a user turn rendered by the model's
chat template with the generation prompt; Qwen3 thinking on as in Hugging Face's template; --think=false turns it off),
then samples up to --max-new-tokens tokens with the KV-cache generator and
streams the decoded text to stdout. Temperature 0 is greedy decoding. It stops
at the model's EOS ids or at any --stop string (e.g. --stop '</search>').
A summary (tokens, speed, finish reason) goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := loadModelTokenizer(modelDir, tokPath)
			if err != nil {
				return err
			}
			text := prompt
			if chat {
				var msgs []tokenizer.Message
				if system != "" {
					msgs = append(msgs, tokenizer.Message{Role: "system", Content: system})
				}
				msgs = append(msgs, tokenizer.Message{Role: "user", Content: prompt})
				if text, err = tok.RenderChat(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true, EnableThinking: &think}); err != nil {
					return err
				}
			}
			ids, err := tok.TryEncode(text)
			if err != nil {
				return fmt.Errorf("tokenize the prompt: %w", err)
			}
			if len(ids) == 0 {
				return fmt.Errorf("empty prompt")
			}
			m, err := loadQwen(modelDir, "", progressOut(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer m.Backend().Finalize()
			stream := &textStream{w: cmd.OutOrStdout(), decode: func(ids []int) string { return tok.Decode(ids, true) }}
			opts.Decode = func(ids []int) string { return tok.Decode(ids, false) }
			opts.OnToken = func(_, id int) { stream.add(id) }
			start := time.Now()
			res, err := m.Generate([][]int{ids}, opts, seed)
			if err != nil {
				return err
			}
			stream.flush()
			elapsed := time.Since(start).Seconds()
			r := res[0]
			_, err = fmt.Fprintf(cmd.ErrOrStderr(), "\n[%d prompt tokens, %d generated in %.2fs (%.1f tok/s), finish: %s%s]\n",
				len(ids), len(r.IDs), elapsed, float64(len(r.IDs))/elapsed, r.Finish, stopNote(r))
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "Hugging Face Qwen2/Qwen3 folder")
	fl.StringVar(&tokPath, "tokenizer", "", "tokenizer.json (default: <model>/tokenizer.json)")
	fl.StringVar(&prompt, "prompt", "", "prompt text")
	fl.BoolVar(&chat, "chat", false, "render the prompt as a user turn with the chat template")
	fl.StringVar(&system, "system", "", "system message (with --chat)")
	fl.BoolVar(&think, "think", true, "with --chat: Qwen3 thinking (--think=false: the empty think block); the same default as tokenize --chat")
	fl.IntVar(&opts.MaxNewTokens, "max-new-tokens", 256, "maximum tokens to generate")
	fl.Float64Var(&opts.Temperature, "temperature", 0, "sampling temperature; 0 is greedy")
	fl.Float64Var(&opts.TopP, "top-p", 1, "nucleus sampling mass (1 = off)")
	fl.IntVar(&opts.TopK, "top-k", 0, "keep the k most likely tokens (0 = off)")
	fl.Uint64Var(&seed, "seed", 0, "sampling seed")
	fl.StringArrayVar(&opts.Stop, "stop", nil, "stop string (repeatable), e.g. </search>")
	for _, name := range []string{"model", "prompt"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func stopNote(r qwen.Result) string {
	if r.StopString == "" {
		return ""
	}
	return fmt.Sprintf(" %q", r.StopString)
}

// textStream writes the decoded text of a growing token sequence
// incrementally: each new token prints what its decoding adds, holding back
// a trailing incomplete UTF-8 sequence (byte-level BPE splits characters
// across tokens).
type textStream struct {
	w       io.Writer
	decode  func([]int) string
	ids     []int
	printed int // bytes of the decoded text already written
	err     error
}

func (s *textStream) add(id int) {
	s.ids = append(s.ids, id)
	text := s.decode(s.ids)
	if strings.HasSuffix(text, string(utf8.RuneError)) {
		return // wait for the rest of the character
	}
	s.write(text)
}

func (s *textStream) flush() { s.write(s.decode(s.ids)) }

func (s *textStream) write(text string) {
	if s.err != nil || len(text) <= s.printed {
		return
	}
	_, s.err = io.WriteString(s.w, text[s.printed:])
	s.printed = len(text)
}
