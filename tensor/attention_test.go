package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// attentionCase is one shape of the attention tests; pad left-pads each
// batch row b by b·pad masked keys (and queries), as batched rollouts do.
type attentionCase struct {
	b, heads, kv, t, h, bq, bk, pad int
	causal, randomBias              bool
}

func (c attentionCase) String() string {
	return fmt.Sprintf("B%d_H%d_kv%d_T%d_h%d_tile%dx%d_pad%d_causal%v_rand%v", c.b, c.heads, c.kv, c.t, c.h, c.bq, c.bk, c.pad, c.causal, c.randomBias)
}

// attentionInputs draws qs, k, v, dO and builds the bias of c: causal
// and/or left padding at −1e30, or random finite values.
func attentionInputs(r *rand.Rand, c attentionCase) (qs, k, v, bias, dO []float32) {
	fill := func(n int, s float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * s)
		}
		return x
	}
	qs = fill(c.b*c.t*c.heads*c.h, 0.5)
	k = fill(c.b*c.t*c.kv*c.h, 1)
	v = fill(c.b*c.t*c.kv*c.h, 1)
	dO = fill(c.b*c.t*c.heads*c.h, 1)
	bias = make([]float32, c.b*c.t*c.t)
	for b := range c.b {
		for t := range c.t {
			for s := range c.t {
				x := float32(0)
				if c.randomBias {
					x = float32(r.NormFloat64())
				}
				if (c.causal && s > t) || s < b*c.pad {
					x = -1e30
				}
				bias[(b*c.t+t)*c.t+s] = x
			}
		}
	}
	return qs, k, v, bias, dO
}

// refAttention is the float64 reference of Attention.Forward and Backward
// from the materialised scores, with the layouts of Attention.
func refAttention(c attentionCase, qs, k, v, bias, dO []float32) (fwd, grads []float64) {
	r, h, kv, T := c.heads/c.kv, c.h, c.kv, c.t
	fwd = make([]float64, c.b*T*c.heads*(h+2))
	grads = make([]float64, c.b*kv*T*(r+2)*h)
	for b := range c.b {
		for j := range kv {
			for i := range r {
				head := j*r + i
				qrow := func(t int) []float32 { return qs[((b*T+t)*c.heads+head)*h:][:h] }
				dorow := func(t int) []float32 { return dO[((b*T+t)*c.heads+head)*h:][:h] }
				krow := func(s int) []float32 { return k[((b*T+s)*kv+j)*h:][:h] }
				vrow := func(s int) []float32 { return v[((b*T+s)*kv+j)*h:][:h] }
				for t := range T {
					sc := make([]float64, T)
					m := math.Inf(-1)
					for s := range T {
						dot := 0.0
						for x := range h {
							dot += float64(qrow(t)[x]) * float64(krow(s)[x])
						}
						// The bias as float32 adds it (−1e30 swallows the score).
						sc[s] = float64(float32(dot) + bias[(b*T+t)*T+s])
						m = math.Max(m, sc[s])
					}
					sum := 0.0
					for s := range sc {
						sum += math.Exp(sc[s] - m)
					}
					o := make([]float64, h)
					p := make([]float64, T)
					for s := range T {
						p[s] = math.Exp(sc[s]-m) / sum
						for x := range h {
							o[x] += p[s] * float64(vrow(s)[x])
						}
					}
					f := fwd[(((b*kv+j)*T+t)*r+i)*(h+2):]
					copy(f, o)
					f[h], f[h+1] = m, sum
					dd := 0.0
					for x := range h {
						dd += float64(dorow(t)[x]) * o[x]
					}
					g := grads[(b*kv+j)*T*(r+2)*h:]
					for s := range T {
						dp := 0.0
						for x := range h {
							dp += float64(dorow(t)[x]) * float64(vrow(s)[x])
						}
						ds := p[s] * (dp - dd)
						for x := range h {
							g[(t*(r+2)+i)*h+x] += ds * float64(krow(s)[x])
							g[(s*(r+2)+r)*h+x] += ds * float64(qrow(t)[x])
							g[(s*(r+2)+r+1)*h+x] += p[s] * float64(dorow(t)[x])
						}
					}
				}
			}
		}
	}
	return fwd, grads
}

// TestAttentionMatchesReference checks the blocked kernel's o, lse and
// gradients against the float64 reference over T = 1, T not a multiple
// of either tile (several key tiles, so the online softmax rescales),
// GQA with KV heads < heads, batch > 1 with left padding (rows with no
// unmasked key), random finite biases and odd head sizes.
func TestAttentionMatchesReference(t *testing.T) {
	cases := []attentionCase{
		{b: 1, heads: 1, kv: 1, t: 1, h: 4, causal: true},
		{b: 2, heads: 4, kv: 2, t: 1, h: 8, causal: true},
		{b: 1, heads: 2, kv: 1, t: 7, h: 5, bq: 2, bk: 3, causal: true},
		{b: 3, heads: 4, kv: 2, t: 19, h: 16, bq: 3, bk: 5, causal: true, pad: 3},
		{b: 2, heads: 6, kv: 2, t: 33, h: 12, bq: 4, bk: 8, randomBias: true},
		{b: 2, heads: 3, kv: 3, t: 40, h: 8, bq: 5, bk: 16, causal: true, randomBias: true, pad: 7},
		{b: 2, heads: 8, kv: 2, t: 70, h: 64, causal: true, pad: 9},
		{b: 1, heads: 4, kv: 1, t: 300, h: 32, causal: true},
	}
	rng := rand.New(rand.NewPCG(19, 5))
	for _, ks := range gemmSets() {
		for _, c := range cases {
			t.Run(ks.name+"/"+c.String(), func(t *testing.T) { testAttentionCase(t, ks, rng, c) })
		}
	}
}

// testAttentionCase is one case of TestAttentionMatchesReference on the
// GEMM micro-kernel of ks.
func testAttentionCase(t *testing.T, ks *gemmKernelSet, rng *rand.Rand, c attentionCase) {
	qs, k, v, bias, dO := attentionInputs(rng, c)
	a := &Attention{Batch: c.b, Heads: c.heads, KVHeads: c.kv, T: c.t, S: c.t, HeadDim: c.h, QueryTile: c.bq, KeyTile: c.bk, Workers: 2}
	fwd := make([]float32, c.b*c.t*c.heads*(c.h+2))
	a.forwardWith(ks, fwd, qs, k, v, bias)
	grads := make([]float32, c.b*c.kv*c.t*(c.heads/c.kv+2)*c.h)
	a.backwardWith(ks, grads, qs, k, v, bias, fwd, dO)
	wantF, wantG := refAttention(c, qs, k, v, bias, dO)
	// float32 sums over T keys and h features, relative to the
	// size of the terms (values and gradients are O(1)).
	tol := 2e-5 * math.Sqrt(float64(c.t*c.h))
	for i, w := range wantF {
		if d := math.Abs(float64(fwd[i]) - w); d > tol*(1+math.Abs(w)) {
			t.Fatalf("fwd[%d] = %g, want %g", i, fwd[i], w)
		}
	}
	for i, w := range wantG {
		if d := math.Abs(float64(grads[i]) - w); d > 4*tol*(1+math.Abs(w)) {
			t.Fatalf("grads[%d] = %g, want %g", i, grads[i], w)
		}
	}
	// One worker and the default tiles: the same within rounding.
	a1 := *a
	a1.Workers, a1.QueryTile, a1.KeyTile = 1, 0, 0
	fwd1 := make([]float32, len(fwd))
	a1.forwardWith(ks, fwd1, qs, k, v, bias)
	for i := range fwd1 {
		if d := math.Abs(float64(fwd1[i] - fwd[i])); d > tol*(1+math.Abs(float64(fwd[i]))) {
			t.Fatalf("default tiles: fwd[%d] = %g, tiled %g", i, fwd1[i], fwd[i])
		}
	}
}

// TestAttentionZeroSizes checks that empty batches and sequences write
// nothing and do not panic.
func TestAttentionZeroSizes(t *testing.T) {
	for _, c := range []struct{ b, t int }{{0, 5}, {3, 0}} {
		a := &Attention{Batch: c.b, Heads: 2, KVHeads: 1, T: c.t, S: c.t, HeadDim: 4}
		a.Forward(nil, nil, nil, nil, nil)
		a.Backward(nil, nil, nil, nil, nil, nil, nil)
	}
}

// BenchmarkAttention runs the forward and backward of one 25M-shaped
// layer (8 rows × 256 tokens, 8 heads in 2 KV groups of head size 64,
// causal).
func BenchmarkAttention(b *testing.B) {
	c := attentionCase{b: 8, heads: 8, kv: 2, t: 256, h: 64, causal: true}
	qs, k, v, bias, dO := attentionInputs(rand.New(rand.NewPCG(1, 2)), c)
	a := &Attention{Batch: c.b, Heads: c.heads, KVHeads: c.kv, T: c.t, S: c.t, HeadDim: c.h, Buffers: new(AttentionBuffers)}
	fwd := make([]float32, c.b*c.t*c.heads*(c.h+2))
	grads := make([]float32, c.b*c.kv*c.t*(c.heads/c.kv+2)*c.h)
	b.Run("forward", func(b *testing.B) {
		for range b.N {
			a.Forward(fwd, qs, k, v, bias)
		}
	})
	b.Run("backward", func(b *testing.B) {
		for range b.N {
			a.Backward(grads, qs, k, v, bias, fwd, dO)
		}
	})
}
