package train

import "github.com/cas-engine/cas/agent"

// packed is a micro-batch of trajectories laid out as the training and
// scoring graphs take it: rows right-padded to a common bucketed length T,
// padded with empty rows up to a fixed row count so that one compiled graph
// serves every micro-batch of that length. All slices are row-major [rows, T]
// (per-row slices [rows]).
type packed struct {
	rows, seqLen int
	index        []int     // trajectory index of each real row (len ≤ rows)
	ids          []int32   // token ids (0 on padding)
	attn         []int32   // 1 on real tokens
	lossMask     []float32 // 1 on policy-generated response tokens
	respMaskI    []int32   // lossMask as int32 (for Model.Score)
}

// seqBucket rounds a sequence length up to the lengths graphs are compiled
// for: powers of two from 16 to 1024, then multiples of 512, so a run
// compiles a handful of shapes instead of one per length.
func seqBucket(n int) int {
	if n > 1024 {
		return (n + 511) / 512 * 512
	}
	b := 16
	for b < n {
		b *= 2
	}
	return b
}

// packRows lays out trajectories trajs[idx] for idx in index into rows rows.
func packRows(trajs []*agent.Trajectory, index []int, rows int) *packed {
	longest := 1
	for _, i := range index {
		longest = max(longest, len(trajs[i].IDs))
	}
	t := seqBucket(longest)
	p := &packed{
		rows: rows, seqLen: t, index: index,
		ids:       make([]int32, rows*t),
		attn:      make([]int32, rows*t),
		lossMask:  make([]float32, rows*t),
		respMaskI: make([]int32, rows*t),
	}
	for r, i := range index {
		tr := trajs[i]
		base := r * t
		for j, id := range tr.IDs {
			p.ids[base+j] = int32(id)
			p.attn[base+j] = 1
		}
		for j, m := range tr.Mask {
			if m == 1 {
				p.lossMask[base+j] = 1
				p.respMaskI[base+j] = 1
			}
		}
	}
	return p
}

// responseOf copies the response part of row r of a [rows, T] matrix.
func (p *packed) responseOf(m []float32, r int, tr *agent.Trajectory) []float32 {
	base := r*p.seqLen + tr.PromptLen
	return append([]float32(nil), m[base:base+tr.ResponseLen()]...)
}

// spread spreads per-response-token values of each row's trajectory into
// a [rows, T] matrix (0 elsewhere).
func (p *packed) spread(trajs []*agent.Trajectory, values func(i int) []float32) []float32 {
	out := make([]float32, p.rows*p.seqLen)
	for r, i := range p.index {
		tr := trajs[i]
		copy(out[r*p.seqLen+tr.PromptLen:], values(i))
	}
	return out
}

// perRow gathers one value per row (0 on padding rows).
func (p *packed) perRow(values []float32) []float32 {
	out := make([]float32, p.rows)
	for r, i := range p.index {
		out[r] = values[i]
	}
	return out
}
