package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagVocabulary is the one name of each concept across subcommands and
// the YAML run configs; `cas --help` prints it. Old names keep working as
// hidden, deprecated aliases.
const flagVocabulary = `Flags mean the same thing in every subcommand (YAML run configs use the
same names under their section):
  --model DIR            the Qwen policy folder (YAML model.path)
  --tokenizer F          the policy's tokenizer.json (YAML model.tokenizer)
  --chat-template NAME   chat template family, qwen3 or qwen2.5 (default: the tokenizer's;
                         YAML model.chat_template)
  --think                Qwen3 thinking in a rendered chat (default on, as in Hugging Face's
                         template; --think=false renders Qwen3's empty think block)
  --encoder DIR          the E5/BERT encoder folder of a dense index
  --encoder-tokenizer F, --encoder-max-len N, --encoder-batch N
                         the encoder's tokenizer.json, sequence length and batch
  --index DIR            an index folder (YAML retriever.index)
  --retriever URL        a Search-R1-compatible retrieval server (YAML retriever.url)
  --corpus F             the corpus JSONL: what 'index build' indexes, elsewhere the corpus
                         used instead of the one an index folder records (YAML retriever.corpus)
  --candidates N         passages retrieved per search before APS truncates them
  --topk N               passages kept per search without APS (the fixed top-k baseline)
  --aps F                an APS calibration report (qhat.json) (YAML aps.qhat_file)
  --out PATH             what the command writes (file or folder)
  --no-progress          no progress bars (on a non-terminal they are a plain line every 5 s)
  --set key=value        override a YAML config field by its dotted path

Paths that cas records in the files it writes (a run's config.yaml, an index
folder's settings.json) are relative to that file's folder when they lie
inside it, else absolute: run and index folders can be moved or copied.

An interrupted train, demo, ablate or index build saves its progress, prints
the command that continues it and exits 130 (SIGINT) or 143 (SIGTERM); only a
finished run exits 0.`

// aliasFlag adds old as a hidden, deprecated second name of the existing
// flag name (same value), so that old scripts keep working.
func aliasFlag(cmd *cobra.Command, old, name string) {
	f := cmd.Flags()
	nf := f.Lookup(name)
	if nf == nil {
		panic("aliasFlag: no flag --" + name)
	}
	f.AddFlag(&pflag.Flag{Name: old, Usage: nf.Usage, Value: nf.Value, DefValue: nf.DefValue, NoOptDefVal: nf.NoOptDefVal})
	_ = f.MarkDeprecated(old, "use --"+name)
}

// makeOutputDir creates the folder of the output file that flag names
// (nothing when path is empty), before a command's work: a path that
// cannot be a file fails at once with an error naming the flag, not after
// minutes of measuring or scoring, and a new folder such as out/ in
// --out out/report.json is made, as users expect.
func makeOutputDir(flag, path string) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("--%s %s: %w", flag, path, err)
	}
	return nil
}
