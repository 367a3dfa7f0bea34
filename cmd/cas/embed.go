package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/model/bert"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func newEmbedCmd() *cobra.Command {
	var (
		modelDir, tokPath, in, out, prefixKind string
		batch, maxLen                          int
	)
	cmd := &cobra.Command{
		Use:   "embed",
		Short: "Embed texts with an E5/BERT model into raw float32 vectors",
		Long: `Embed reads a JSON Lines file of texts (a JSON string per line, or objects with
"contents", "text" (+ "title"), "question" or "query"), adds the E5 prefix,
encodes with [CLS] … [SEP] (truncated to --encoder-max-len), mean-pools and
L2-normalises, and writes little-endian float32 vectors, row-major
[n, hidden_size], in input order. The output appears atomically.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if modelDir == "" {
				return fmt.Errorf("embed: --encoder DIR is required")
			}
			prefix, err := bert.PrefixFor(prefixKind)
			if err != nil {
				return err
			}
			tok, err := loadModelTokenizer(modelDir, tokPath)
			if err != nil {
				return err
			}
			total, err := countLines(in)
			if err != nil {
				return err
			}
			enc, closeEnc, err := loadBERT(modelDir, bert.Options{BatchSize: batch, MaxLen: maxLen})
			if err != nil {
				return err
			}
			defer closeEnc()
			f, err := os.Open(in)
			if err != nil {
				return err
			}
			defer f.Close()
			bar := progressbar.NewOptions(total,
				progressbar.OptionSetWriter(progressOut(cmd.ErrOrStderr())),
				progressbar.OptionSetDescription("embed"),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("texts"),
				progressbar.OptionClearOnFinish())
			var n int
			err = atomicfile.Write(out, func(w io.Writer) error {
				var err error
				n, err = enc.EmbedJSONL(tok, f, w, prefix, 0, func(done int) { _ = bar.Set(done) })
				if err != nil {
					return fmt.Errorf("%s: %w", in, err)
				}
				return nil
			})
			_ = bar.Finish()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %d vectors × %d float32 to %s\n", n, enc.Dim(), out)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "encoder", "", "E5/BERT encoder: a Hugging Face BertModel folder (config.json, model.safetensors)")
	fl.StringVar(&tokPath, "encoder-tokenizer", "", "tokenizer.json (default: <encoder>/tokenizer.json)")
	fl.StringVar(&in, "in", "", "input texts, JSON Lines")
	fl.StringVar(&out, "out", "", "output vectors, raw little-endian float32 [n, dim]")
	fl.StringVar(&prefixKind, "prefix", "passage", "E5 prefix: query, passage or none")
	fl.IntVar(&batch, "encoder-batch", 32, "sequences per forward pass")
	fl.IntVar(&maxLen, "encoder-max-len", 256, "maximum tokens per text, [CLS] and [SEP] included")
	aliasFlag(cmd, "model", "encoder")
	aliasFlag(cmd, "tokenizer", "encoder-tokenizer")
	aliasFlag(cmd, "batch", "encoder-batch")
	aliasFlag(cmd, "max-len", "encoder-max-len")
	for _, name := range []string{"in", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// countLines counts the non-blank lines of a file, for the progress bar.
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	n := 0
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}
