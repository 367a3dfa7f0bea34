package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cas-engine/cas/model/qwen"
)

func newLogitsCmd() *cobra.Command {
	var modelDir, in, out, precision string
	cmd := &cobra.Command{
		Use:   "logits",
		Short: "Write the logits of a Qwen model for a batch of token ids",
		Long: `Logits reads input_ids [batch, seq_len] and optionally attention_mask
(1 for real tokens, left or right padding) from a safetensors file, runs the
full forward pass of the Qwen2/Qwen3 model in --model, and writes the float32
tensor "logits" [batch, seq_len, vocab] to --out (atomically), so the numbers
can be diffed against another implementation. Logits at padded positions are
not meaningful. --precision bf16 keeps the weights and activations in
bfloat16 (as a bf16 model runs in transformers); the default f32 upcasts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := qwen.ParsePrecision(precision)
			if err != nil {
				return fmt.Errorf("--precision: %w", err)
			}
			m, err := loadQwen(modelDir, p, progressOut(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer m.Backend().Finalize()
			tb, err := qwen.ReadTokenBatch(in, m.Config.VocabSize, m.Config.MaxPositionEmbeddings)
			if err != nil {
				return err
			}
			if err := m.WriteLogits(tb, out); err != nil {
				return fmt.Errorf("%s: %w", out, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote logits [%d %d %d] to %s\n", tb.Batch, tb.SeqLen, m.Config.VocabSize, out)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "Hugging Face Qwen2/Qwen3 folder (config.json, model.safetensors or its index)")
	fl.StringVar(&in, "in", "", "safetensors file with input_ids and optional attention_mask")
	fl.StringVar(&out, "out", "", "output safetensors file (tensor logits)")
	fl.StringVar(&precision, "precision", "f32", "weights and activations: f32 or bf16")
	for _, name := range []string{"model", "in", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
