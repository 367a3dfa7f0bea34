package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func newTokenizeCmd() *cobra.Command {
	var (
		tokPath, in, out, family string
		decode, chat, special    bool
		skipSpecial, noGenPrompt bool
		noThinking, think        bool
	)
	cmd := &cobra.Command{
		Use:   "tokenize",
		Short: "Encode or decode JSON Lines with a Hugging Face tokenizer.json",
		Long: `Tokenize reads JSON Lines from stdin (or --in) and writes one line per input
line to stdout (or, atomically, to --out):

  default   a JSON string (or {"text": ...}) per line  →  {"ids": [...]}
  --chat    a JSON list of messages (or {"messages": [...],
            "add_generation_prompt": b, "enable_thinking": b}), rendered
            with the Qwen3/Qwen2.5 chat template      →  {"ids": [...]}
            (Qwen3 thinking on unless --think=false, as in generate --chat)
  --decode  {"ids": [...]} (or a bare list)           →  a JSON string

Special tokens written in the text (<|im_start|>, [CLS]) are recognised;
--special also adds the post-processor's ones ([CLS] … [SEP] for BERT).
Errors name the input and line (invalid UTF-8, bad JSON).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if decode && chat {
				return fmt.Errorf("--decode and --chat are exclusive")
			}
			if tokPath == "" {
				return fmt.Errorf("--tokenizer is required")
			}
			tok, err := tokenizer.Load(tokPath)
			if err != nil {
				return err
			}
			opts := tokenizer.JSONLOptions{
				Mode: tokenizer.JSONLEncode, Name: "stdin",
				Special: special, SkipSpecial: skipSpecial,
				Chat: tokenizer.ChatOptions{Family: family, AddGenerationPrompt: !noGenPrompt},
			}
			switch {
			case decode:
				opts.Mode = tokenizer.JSONLDecode
			case chat:
				opts.Mode = tokenizer.JSONLChat
			}
			if noThinking || !think {
				off := false
				opts.Chat.EnableThinking = &off
			}
			var r io.Reader = cmd.InOrStdin()
			if in != "" {
				f, err := os.Open(in)
				if err != nil {
					return err
				}
				defer f.Close()
				st, err := f.Stat()
				if err != nil {
					return err
				}
				bar := progressbar.NewOptions64(st.Size(),
					progressbar.OptionSetWriter(progressOut(cmd.ErrOrStderr())),
					progressbar.OptionSetDescription("tokenize"),
					progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionClearOnFinish())
				defer bar.Finish()
				opts.Progress = func(n int64) { _ = bar.Set64(n) }
				r, opts.Name = f, in
			}
			if out == "" {
				_, err = tok.TransformJSONL(r, cmd.OutOrStdout(), opts)
				return err
			}
			return atomicfile.Write(out, func(w io.Writer) error {
				_, err := tok.TransformJSONL(r, w, opts)
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&tokPath, "tokenizer", "", "tokenizer.json, or a folder with tokenizer.json (and tokenizer_config.json)")
	fl.StringVar(&in, "in", "", "input JSON Lines file (default: stdin)")
	fl.StringVar(&out, "out", "", "output file, written atomically (default: stdout)")
	fl.BoolVar(&decode, "decode", false, "decode {\"ids\": [...]} lines to text")
	fl.BoolVar(&chat, "chat", false, "render message lists with the chat template, then encode")
	fl.StringVar(&family, "chat-template", "", "chat template family: qwen3 or qwen2.5 (default: detected)")
	fl.BoolVar(&noGenPrompt, "no-generation-prompt", false, "with --chat: do not append the assistant header")
	fl.BoolVar(&think, "think", true, "with --chat: Qwen3 thinking (--think=false: enable_thinking=false, the empty think block); the same default as generate --chat")
	fl.BoolVar(&noThinking, "no-thinking", false, "with --chat: enable_thinking=false")
	_ = fl.MarkDeprecated("no-thinking", "use --think=false")
	fl.BoolVar(&special, "special", false, "add the post-processor's special tokens ([CLS] … [SEP])")
	fl.BoolVar(&skipSpecial, "skip-special", false, "with --decode: drop special tokens")
	return cmd
}
