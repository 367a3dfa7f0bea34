package vector

import (
	"fmt"

	"github.com/cas-engine/cas/tensor"
)

// vecCodes is a row-major run of n encoded vectors of dimension d: one of
// f32, f16 or u8 holds n·d components. Flat keeps one; IVF one per list.
// The slices may view a read-only memory map: they are then capped at their
// length, so append copies before it writes.
type vecCodes struct {
	enc Encoding
	d   int
	n   int
	f32 []float32
	f16 []uint16
	u8  []uint8
}

func newVecCodes(enc Encoding, d int) vecCodes { return vecCodes{enc: enc, d: d} }

// reserve makes room for n more vectors without reallocating.
func (c *vecCodes) reserve(n int) {
	m := (c.n + n) * c.d
	switch c.enc {
	case F32:
		if cap(c.f32) < m {
			c.f32 = append(make([]float32, 0, m), c.f32...)
		}
	case F16:
		if cap(c.f16) < m {
			c.f16 = append(make([]uint16, 0, m), c.f16...)
		}
	case SQ8:
		if cap(c.u8) < m {
			c.u8 = append(make([]uint8, 0, m), c.u8...)
		}
	}
}

// appendVectors encodes the rows of x and appends them (sq for SQ8).
func (c *vecCodes) appendVectors(x []float32, sq *tensor.SQ8) {
	switch c.enc {
	case F32:
		c.f32 = append(c.f32, x...)
	case F16:
		old := len(c.f16)
		c.f16 = growSlice(c.f16, len(x))
		tensor.EncodeF16(c.f16[old:], x)
	case SQ8:
		old := len(c.u8)
		c.u8 = growSlice(c.u8, len(x))
		sq.Encode(c.u8[old:], x)
	}
	c.n += len(x) / c.d
}

// growSlice extends s by n zero elements (amortised like append).
func growSlice[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s[:len(s)+n]
	}
	return append(s, make([]T, n)...)
}

// view returns rows [lo, hi) sharing storage, capped so appends copy.
func (c *vecCodes) view(lo, hi int) vecCodes {
	v := vecCodes{enc: c.enc, d: c.d, n: hi - lo}
	a, b := lo*c.d, hi*c.d
	switch c.enc {
	case F32:
		v.f32 = c.f32[a:b:b]
	case F16:
		v.f16 = c.f16[a:b:b]
	case SQ8:
		v.u8 = c.u8[a:b:b]
	}
	return v
}

// decode writes the reconstruction of rows [lo, hi) into dst.
func (c *vecCodes) decode(dst []float32, lo, hi int, sq *tensor.SQ8) {
	a, b := lo*c.d, hi*c.d
	switch c.enc {
	case F32:
		copy(dst, c.f32[a:b])
	case F16:
		tensor.DecodeF16(dst[:b-a], c.f16[a:b])
	case SQ8:
		sq.Decode(dst[:b-a], c.u8[a:b])
	}
}

// dotRows writes out[j] = Σᵢ qv[i]·code(lo+j)[i] for j < hi−lo: the raw
// kernel value, to which queryPrep's bias is added.
func (c *vecCodes) dotRows(out, qv []float32, lo, hi int) {
	a := lo * c.d
	switch c.enc {
	case F32:
		tensor.DotRows(out[:hi-lo], qv, c.f32[a:])
	case F16:
		tensor.DotRowsF16(out[:hi-lo], qv, c.f16[a:])
	case SQ8:
		tensor.DotRowsU8(out[:hi-lo], qv, c.u8[a:])
	}
}

// dotBlock is dotRows for nq prepared queries, out[i·ldo + j].
func (c *vecCodes) dotBlock(out []float32, ldo int, qv []float32, nq, lo, hi int, scratch []float32) []float32 {
	a, b := lo*c.d, hi*c.d
	switch c.enc {
	case F32:
		tensor.DotBlockStrided(out, ldo, qv, nq, c.f32[a:b], hi-lo, c.d)
	case F16:
		scratch = tensor.DotBlockStridedF16(out, ldo, qv, nq, c.f16[a:b], hi-lo, c.d, scratch)
	case SQ8:
		scratch = tensor.DotBlockStridedU8(out, ldo, qv, nq, c.u8[a:b], hi-lo, c.d, scratch)
	}
	return scratch
}

// byteLen is the size of the codes in bytes.
func (c *vecCodes) byteLen() int64 { return int64(c.n) * int64(c.d) * int64(c.enc.bytesPer()) }

// prepQuery writes into qv the vector the kernels take for query q and
// returns the bias to add to their output:
//
//	F32, F16: qv = q, bias 0, so raw = ⟨q, x⟩;
//	SQ8:      qv = q ⊙ Scale, bias = ⟨q, Min⟩, so raw + bias = ⟨q, x̂⟩.
func prepQuery(enc Encoding, sq *tensor.SQ8, qv, q []float32) float32 {
	if enc == SQ8 {
		return sq.PrepareQuery(qv, q)
	}
	copy(qv, q)
	return 0
}

// toKeys turns raw kernel values of one query into ranking keys, larger is
// better:
//
//	inner product: key = raw + bias                     = ⟨q, x̂⟩
//	L2:            key = 2(raw + bias) − ‖x̂‖² − base    = −‖q − x̂‖²
//
// where base = ‖q‖² (or ‖q − c‖² for residual codes) and norms holds ‖x̂‖².
func toKeys(m Metric, raw []float32, bias, base float32, norms []float32) {
	if m == InnerProduct {
		if bias != 0 {
			for j := range raw {
				raw[j] += bias
			}
		}
		return
	}
	norms = norms[:len(raw)]
	for j, v := range raw {
		raw[j] = 2*(v+bias) - norms[j] - base
	}
}

// fromKey converts a ranking key back to the reported score: the inner
// product itself, or the squared distance −key clamped at 0.
func fromKey(m Metric, key float32) float32 {
	if m == L2 {
		return max(-key, 0)
	}
	return key
}

// writeResults sorts one query's selection into scores/ids (length k),
// converting keys and padding the rest.
func writeResults(m Metric, t *tensor.TopK, scores []float32, ids []int64) {
	n := t.Sorted(scores, ids)
	for j := range n {
		scores[j] = fromKey(m, scores[j])
	}
	for j := n; j < len(scores); j++ {
		scores[j] = m.worst()
		ids[j] = -1
	}
}

// writeMerged merges, for each of the nq queries, the per-worker selections
// (first into the first: a worker without heaps, or without one for that
// query, is skipped) and writes the result with writeResults into scores/ids,
// k per query.
func writeMerged(m Metric, heaps [][]*tensor.TopK, nq, k int, scores []float32, ids []int64) {
	empty := tensor.NewTopK(0)
	for i := range nq {
		var t *tensor.TopK
		for _, hs := range heaps {
			if hs == nil || hs[i] == nil {
				continue
			}
			if t == nil {
				t = hs[i]
			} else {
				t.Merge(hs[i])
			}
		}
		if t == nil {
			t = empty
		}
		writeResults(m, t, scores[i*k:(i+1)*k], ids[i*k:(i+1)*k])
	}
}

// tileRows is how many rows one blocked scoring step covers: about 192 KiB
// of float32 rows (a multiple of 4, 4…1024) so the tile stays in L2 while
// every query of the batch passes over it.
func tileRows(d int) int {
	t := (192 << 10) / (4 * max(d, 1))
	return min(1024, max(4, t&^3))
}

func checkMetric(m Metric) error {
	if m != InnerProduct && m != L2 {
		return fmt.Errorf("unsupported metric %v", m)
	}
	return nil
}

func checkEncoding(e Encoding) error {
	if e != F32 && e != F16 && e != SQ8 {
		return fmt.Errorf("unsupported encoding %v", e)
	}
	return nil
}

// growFloats returns s with length n, reallocating when its capacity is
// short (contents are not preserved).
func growFloats(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
