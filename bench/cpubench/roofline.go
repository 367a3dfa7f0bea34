package cpubench

import (
	"fmt"
	"sync"
	"time"

	"github.com/viterin/vek/vek32"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/backend/gocpu"
	"github.com/cas-engine/cas/internal/cputime"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/tensor"
)

// MatrixFLOPs is the matrix work of one forward pass of cfg over batch rows
// of seqLen tokens: 2 FLOPs per multiply-add of every projection (q, k, v,
// o, gate, up, down and the output layer, 2·tokens·their weights) and of
// the attention products QKᵀ and PV over the full T×T score matrix that the
// graph computes (4·B·H·T²·head_dim per layer). Elementwise work, norms
// and softmax are not counted: this is the GEMM roofline's numerator.
func MatrixFLOPs(cfg *qwen.Config, batch, seqLen int) float64 {
	hd := cfg.HeadDim
	if hd == 0 {
		hd = cfg.HiddenSize / cfg.NumAttentionHeads
	}
	d, h, kv := float64(cfg.HiddenSize), float64(cfg.NumAttentionHeads), float64(cfg.NumKeyValueHeads)
	layer := d*h*float64(hd) + 2*d*kv*float64(hd) + h*float64(hd)*d + 3*d*float64(cfg.IntermediateSize)
	weights := float64(cfg.NumHiddenLayers)*layer + float64(cfg.VocabSize)*d
	tokens := float64(batch * seqLen)
	attn := 4 * float64(batch) * h * float64(seqLen) * float64(seqLen) * float64(hd) * float64(cfg.NumHiddenLayers)
	return 2*tokens*weights + attn
}

// TrainFLOPs is the matrix work of one training step on batch × seqLen ids
// (inputs of seqLen-1 tokens): the forward pass and a backward pass of
// twice its work (the gradients of both operands of every product).
func TrainFLOPs(cfg *qwen.Config, batch, seqLen int) float64 {
	return 3 * MatrixFLOPs(cfg, batch, seqLen-1)
}

// StreamedBytes is what batch-1 decoding reads per token at least: every
// weight once in float32 (bytesPerWeight 4) except the input embedding,
// of which one row is read (with tied embeddings the output layer streams
// the whole table, counted once).
func StreamedBytes(cfg *qwen.Config, bytesPerWeight int) int64 {
	n := cfg.NumParameters()
	if !cfg.TieWordEmbeddings {
		n -= int64(cfg.VocabSize) * int64(cfg.HiddenSize)
	}
	return n * int64(bytesPerWeight)
}

// measureStream returns the read bandwidth in bytes/s of threads workers
// each summing its share of a 256 MiB array (larger than any cache), best
// of the runs within minTime.
func measureStream(threads int, minTime time.Duration) float64 {
	bps, _ := measureStreamCPU(threads, minTime)
	return bps
}

// measureStreamCPU is measureStream that also returns the bytes read per
// process CPU-second over all the runs.
func measureStreamCPU(threads int, minTime time.Duration) (bps, cpuBps float64) {
	const n = 64 << 20 // float32s
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	var sink [64]float32
	var mu sync.Mutex
	runs := 0
	c0 := cputime.Process()
	d, _ := timeIt(minTime, func() error {
		runs++
		tensor.ParallelFor(n, threads, 4096, func(w, lo, hi int) {
			s := vek32.Sum(x[lo:hi])
			mu.Lock()
			sink[w%len(sink)] += s
			mu.Unlock()
		})
		return nil
	})
	cpu := (cputime.Process() - c0).Seconds()
	_ = sink
	return 4 * n / d.Seconds(), 4 * n * float64(runs) / cpu
}

// profileModel runs one training step (not with opt.DecodeOnly) and one
// decode of a random model of cfg on a profiling gocpu backend, each after a warm-up (compilation), and
// records the time per op kind in row.
func profileModel(cfg *qwen.Config, opt *Options, row *ModelRow) error {
	config := gocpu.BackendName + ":profile"
	if opt.ProfileShapes {
		config += "=shapes"
	}
	be, err := backend.NewWithConfig(config)
	if err != nil {
		return err
	}
	defer be.Finalize()
	prof, ok := be.(*gocpu.Backend)
	if !ok {
		return fmt.Errorf("backend %s is not gocpu", be)
	}
	m, err := qwen.NewRandom(cfg, be, 1)
	if err != nil {
		return err
	}
	// Sessions on gocpu run the host step, which has no ops to profile:
	// the decode profile is the step graph's, the reference path.
	m.SetGraphStep(true)
	ids := make([]int32, opt.Batch*opt.SeqLen)
	for i := range ids {
		ids[i] = int32((i*7919 + 13) % cfg.VocabSize)
	}
	if !opt.DecodeOnly {
		mask := make([]int32, len(ids))
		for i := range mask {
			mask[i] = 1
		}
		for range 2 { // compile, then profile
			prof.Profile(true)
			if err := ForwardPass(m, ids, mask, opt.Batch, opt.SeqLen); err != nil {
				return err
			}
		}
		row.ForwardProfile = prof.Profile(true)
		tr, err := NewTrainer(m, 1e-4)
		if err != nil {
			return err
		}
		if _, err := tr.Step(ids, opt.Batch, opt.SeqLen); err != nil {
			return fmt.Errorf("train step: %w", err)
		}
		prof.Profile(true)
		if _, err := tr.Step(ids, opt.Batch, opt.SeqLen); err != nil {
			return fmt.Errorf("train step: %w", err)
		}
		row.TrainProfile = prof.Profile(true)
	}
	if _, err := decodeSpeed(m, 1, 64, opt.DecodeTokens, func() { prof.Profile(true) }); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	row.DecodeProfile = prof.Profile(true)
	row.DecodeProfileTokens = opt.DecodeTokens
	return nil
}
