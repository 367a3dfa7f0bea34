package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/cas-engine/cas/world"
)

func newWorldCmd() *cobra.Command {
	var (
		seed                           uint64
		out, size                      string
		train, aps, aci, test, rl, voc int
		twoHop                         float64
		docsPerSearch                  int
	)
	cmd := &cobra.Command{
		Use:   "world --seed S --out DIR [--size small|default]",
		Short: "Generate the synthetic encyclopedia, its question splits and its tokenizer",
		Long: `Generate the demo's world, deterministically from --seed: a fictional
encyclopedia (corpus.jsonl, wiki-18 format), FlashRAG question files with
gold passage ids per hop (train.jsonl, aps_calib.jsonl, aci_calib.jsonl,
test.jsonl, and grpo.jsonl with --grpo; test and GRPO entities never
appear in train questions), a byte-level BPE tokenizer trained on the
world's text (tokenizer.json, Hugging Face format) and a summary
(world.json). Flags other than --seed, --out and --size
override the preset.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out is required")
			}
			cfg, err := world.ConfigForSize(size, seed)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			for _, o := range []struct {
				name string
				dst  *int
				v    int
			}{{"train", &cfg.Train, train}, {"aps-calib", &cfg.APSCalib, aps}, {"aci-calib", &cfg.ACICalib, aci}, {"test", &cfg.Test, test}, {"grpo", &cfg.GRPO, rl}, {"vocab", &cfg.VocabSize, voc}} {
				if f.Changed(o.name) {
					*o.dst = o.v
				}
			}
			if f.Changed("two-hop") {
				cfg.TwoHopFraction = twoHop
			}
			start := time.Now()
			bar := progressbar.NewOptions(3, progressbar.OptionSetWriter(progressOut(cmd.ErrOrStderr())),
				progressbar.OptionSetDescription("generating world"), progressbar.OptionClearOnFinish())
			fail := func(err error) error {
				bar.Clear()
				return err
			}
			w, err := world.Generate(cfg)
			if err != nil {
				return fail(err)
			}
			bar.Describe("training tokenizer")
			bar.Add(1)
			tok, err := w.TrainTokenizer()
			if err != nil {
				return fail(err)
			}
			bar.Describe("writing " + out)
			bar.Add(1)
			if err := w.WriteDir(out, tok); err != nil {
				return fail(err)
			}
			bar.Add(1)
			st, err := w.StatsFor(tok, docsPerSearch)
			if err != nil {
				return err
			}
			o := cmd.OutOrStdout()
			fmt.Fprintf(o, "world seed %d (%s) written to %s in %.2fs\n", seed, size, out, time.Since(start).Seconds())
			st.Print(o)
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&seed, "seed", 1, "random seed; equal seeds and flags give byte-identical files")
	f.StringVar(&out, "out", "", "output directory (created if missing)")
	f.StringVar(&size, "size", "default", "world preset: small or default")
	f.IntVar(&train, "train", 0, "train questions (default: the preset's)")
	f.IntVar(&aps, "aps-calib", 0, "APS calibration questions (default: the preset's)")
	f.IntVar(&aci, "aci-calib", 0, "ACI calibration questions (default: the preset's)")
	f.IntVar(&test, "test", 0, "test questions (default: the preset's)")
	f.IntVar(&rl, "grpo", 0, "GRPO questions, about entities of their own, written to grpo.jsonl (default: the preset's; none)")
	f.IntVar(&voc, "vocab", 0, "tokenizer vocabulary size incl. 256 bytes and added tokens (default: the preset's)")
	f.Float64Var(&twoHop, "two-hop", 0, "fraction of two-hop questions per split (default: the preset's)")
	f.IntVar(&docsPerSearch, "stats-docs", 3, "documents per search assumed in the printed trajectory token counts")
	return cmd
}
