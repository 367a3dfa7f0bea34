package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// poisonAttnBuffers fills every buffer p keeps with NaNs (and the chunk
// ranges and mask rows with garbage), so that a call reading anything it
// did not write first gives different float32s.
func poisonAttnBuffers(p *AttentionBuffers) {
	nan := float32(math.NaN())
	for _, w := range p.scratch {
		for _, x := range [][]float32{w.kp, w.vp, w.kr, w.vr, w.q, w.do, w.qp, w.dop, w.qt, w.dot,
			w.s, w.ds, w.ap, w.o, w.mx, w.l, w.d, w.dkt, w.dvt, w.tmp} {
			for i := range x {
				x[i] = nan
			}
		}
		for _, x := range [][]int{w.lo, w.hi, w.klo, w.khi, w.sufLo, w.sufHi} {
			for i := range x {
				x[i] = -1
			}
		}
	}
	for _, r := range p.rows {
		for i := range r {
			r[i] = attnRow{lo: 3, hi: 2, zero: true}
		}
	}
}

// TestAttentionBuffers checks that calls sharing an AttentionBuffers give
// the float32s of calls that allocate their own, bit for bit, when the
// buffers they take back were filled with NaNs in between, on every
// kernel set, for shapes that leave rows, keys and features past the
// tiles (and a shape change, which must not reuse the wrong sizes).
func TestAttentionBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, ks := range gemmSets() {
		p := new(AttentionBuffers)
		for _, c := range []attentionCase{
			{b: 3, heads: 4, kv: 2, t: 19, h: 16, bq: 3, bk: 5, causal: true, pad: 3},
			{b: 2, heads: 6, kv: 2, t: 33, h: 12, bq: 4, bk: 8, randomBias: true},
			{b: 2, heads: 8, kv: 2, t: 70, h: 64, causal: true, pad: 9},
			{b: 1, heads: 3, kv: 1, t: 41, h: 5, causal: true},
			{b: 2, heads: 8, kv: 2, t: 70, h: 64, causal: true, pad: 9},
		} {
			qs, k, v, bias, dO := attentionInputs(rng, c)
			a := &Attention{Batch: c.b, Heads: c.heads, KVHeads: c.kv, T: c.t, S: c.t, HeadDim: c.h, QueryTile: c.bq, KeyTile: c.bk, Workers: 2}
			var fwd, grads [2][]float32
			for i := range 2 {
				fwd[i] = make([]float32, c.b*c.t*c.heads*(c.h+2))
				grads[i] = make([]float32, c.b*c.kv*c.t*(c.heads/c.kv+2)*c.h)
			}
			a.forwardWith(ks, fwd[0], qs, k, v, bias)
			a.backwardWith(ks, grads[0], qs, k, v, bias, fwd[0], dO)
			pooled := *a
			pooled.Buffers = p
			for range 2 { // the first call may allocate, the second reuses
				poisonAttnBuffers(p)
				pooled.forwardWith(ks, fwd[1], qs, k, v, bias)
				poisonAttnBuffers(p)
				pooled.backwardWith(ks, grads[1], qs, k, v, bias, fwd[1], dO)
			}
			if len(p.scratch) == 0 || len(p.rows) == 0 {
				t.Fatalf("%s/%v: nothing kept: %d scratches, %d mask rows", ks.name, c, len(p.scratch), len(p.rows))
			}
			for i := range fwd[0] {
				if math.Float32bits(fwd[0][i]) != math.Float32bits(fwd[1][i]) {
					t.Fatalf("%s/%v: fwd[%d] = %g with buffers, %g without", ks.name, c, i, fwd[1][i], fwd[0][i])
				}
			}
			for i := range grads[0] {
				if math.Float32bits(grads[0][i]) != math.Float32bits(grads[1][i]) {
					t.Fatalf("%s/%v: grads[%d] = %g with buffers, %g without", ks.name, c, i, grads[1][i], grads[0][i])
				}
			}
		}
	}
}
