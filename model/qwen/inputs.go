package qwen

import (
	"fmt"

	"github.com/cas-engine/cas/model/safetensors"
)

// TokenBatch is a batch of token ids with its attention mask, both
// [Batch, SeqLen] row-major, as stored in the golden files and read by
// `cas logits`.
type TokenBatch struct {
	IDs, Mask     []int32
	Batch, SeqLen int
}

// ReadTokenBatch reads input_ids [B, T] (any integer dtype) and, when
// present, attention_mask [B, T] (0/1; default all ones) from a safetensors
// file, checking ids against the vocabulary size when vocab > 0 and T
// against maxSeqLen (the model's max_position_embeddings) when maxSeqLen > 0
// — from the header, before anything is allocated: a 480 KB file of
// input_ids [1, 60000] would otherwise ask attention for 60000² scores per
// head.
func ReadTokenBatch(path string, vocab, maxSeqLen int) (*TokenBatch, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, ok := f.Info("input_ids"); ok && len(info.Shape) == 2 && maxSeqLen > 0 && info.Shape[1] > maxSeqLen {
		return nil, fmt.Errorf("%s: tensor input_ids has %d positions per row, more than max_position_embeddings = %d of config.json",
			path, info.Shape[1], maxSeqLen)
	}
	ids, shape, err := f.Int64("input_ids")
	if err != nil {
		return nil, fmt.Errorf("%s: tensor input_ids: %w", path, err)
	}
	if len(shape) != 2 || shape[0] == 0 || shape[1] == 0 {
		return nil, fmt.Errorf("%s: tensor input_ids has shape %v, want [batch, seq_len] with both positive", path, shape)
	}
	tb := &TokenBatch{Batch: shape[0], SeqLen: shape[1], IDs: make([]int32, len(ids)), Mask: make([]int32, len(ids))}
	for i, id := range ids {
		if id < 0 || (vocab > 0 && id >= int64(vocab)) || id > 1<<31-1 {
			return nil, fmt.Errorf("%s: tensor input_ids: id %d at [%d, %d] outside the vocabulary [0, %d)",
				path, id, i/tb.SeqLen, i%tb.SeqLen, vocab)
		}
		tb.IDs[i] = int32(id)
		tb.Mask[i] = 1
	}
	if _, ok := f.Info("attention_mask"); !ok {
		return tb, nil
	}
	mask, mshape, err := f.Int64("attention_mask")
	if err != nil {
		return nil, fmt.Errorf("%s: tensor attention_mask: %w", path, err)
	}
	if len(mshape) != 2 || mshape[0] != tb.Batch || mshape[1] != tb.SeqLen {
		return nil, fmt.Errorf("%s: tensor attention_mask has shape %v, input_ids %v", path, mshape, shape)
	}
	for i, v := range mask {
		if v != 0 && v != 1 {
			return nil, fmt.Errorf("%s: tensor attention_mask: value %d at [%d, %d], want 0 or 1", path, v, i/tb.SeqLen, i%tb.SeqLen)
		}
		tb.Mask[i] = int32(v)
	}
	return tb, nil
}

// WriteLogits runs the model on the batch and writes its logits [B, T, V]
// as float32 tensor "logits" to path, atomically.
func (m *Model) WriteLogits(tb *TokenBatch, path string) error {
	logits, err := m.Logits(tb.IDs, tb.Mask, tb.Batch, tb.SeqLen)
	if err != nil {
		return err
	}
	shape := []int{tb.Batch, tb.SeqLen, m.Config.VocabSize}
	return safetensors.Write(path, []safetensors.Tensor{safetensors.F32Tensor("logits", shape, logits)}, map[string]string{"format": "pt"})
}
