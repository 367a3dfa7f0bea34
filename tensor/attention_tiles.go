package tensor

import (
	"math"

	"github.com/viterin/vek/vek32"
)

// The tiles of Attention.Forward and Backward, computed by the GEMM
// micro-kernel (gemmKernelSet.micro: an mr×nr register tile, 6×16 with
// AVX2) on operands packed once per (batch row b, KV group j) and reused
// by every query block, instead of tensor.Gemm calls that pack K, V and
// the tile again for each product.
//
// The query rows of group j are R = t·r + i (position t, head j·r + i),
// taken in blocks of QueryTile positions and, within a block, in panels of
// mr rows; keys in tiles of KeyTile (a multiple of nr) and, within a
// tile, in chunks of nr. Per (b, j):
//
//	kp, vp  K and V as nr-key panels of depth h (B of S = Q·Kᵀ, dP = dO·Vᵀ)
//	kr, vr  K and V as rows [S, h] padded to nr features (B of dQ = dS·K, O = P·V)
//	        (the forward packs kp and vr, the backward kp, vp and kr; when h
//	        is a multiple of nr and A is read in place, K and V are read in
//	        place instead of kr, vr)
//
// and per block the rows of Q and dO, copied [rows, h]. The A operands
// are the rows of Q and dO (of S = Q·Kᵀ, dP = dO·Vᵀ), their columns (of
// dKᵀ = Qᵀ·dS, dVᵀ = dOᵀ·P, whose B, the probabilities and their gradient
// [rows, keys], is read in place) and the rows of P and dS (of O = P·V,
// dQ = dS·K). With AVX2 the micro-kernel reads them in place with strides
// (sgemm6x16StridedNAVX2) and nothing else is packed; the other kernel sets
// pack them into panels: qp, dop (mr-row panels of depth h), qt, dot
// (mr-feature panels of depth the block's rows) per block, and P and dS
// panel by panel (ks.transpose).
//
// The softmax of each row of a tile is one fused pass after its maximum
// (attnSoftmax), as are the backward's P and dS (attnGrad). The forward
// runs one panel at a time (its scores, their softmax, O += P·V: the mr
// rows of scores stay in L1); the backward's dKᵀ and dVᵀ sum over the
// rows of a block, so it keeps the block's tiles.
//
// Masked keys cost nothing at the granularity of one panel of mr rows and
// one chunk of nr keys: each panel computes only the chunks that meet its
// rows' unmasked key ranges (maskRows), so the causal mask's upper
// triangle is skipped to within a chunk, and dKᵀ, dVᵀ of a key chunk sum
// over the panels that compute it. For a row whose bias is exactly zero
// inside its range and masked outside (the causal and left-padding masks)
// the bias is not added; entries outside the row's range are exact zeros
// of the softmax (e^(s − m) underflows to 0 for a masked s ≤ −1e29 when
// the row has an unmasked key), so they are written as zeros and left out
// of the row's maximum and sum. Other rows (a general bias, or no unmasked
// key) get the bias added over their panel's chunks.

// attnRow is the mask of one bias row (b, t): lo ≤ s < hi holds every
// unmasked key ([0, S) when no key is unmasked), and zero reports that
// the row's unmasked keys are exactly [lo, hi) with bias 0 (±0) on each.
type attnRow struct {
	lo, hi int32
	zero   bool
}

// maskRows returns the attnRow of each of the Batch·T rows of bias.
func (a *Attention) maskRows(bias []float32) []attnRow {
	rows := a.rowsBuffer(a.Batch * a.T)
	ParallelFor(len(rows), a.Workers, 64, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			rows[i] = maskRow(bias[i*a.S : (i+1)*a.S])
		}
	})
	return rows
}

// maskRow is the attnRow of one bias row: whole blocks of 8 masked
// entries skipped from either end (maskedLead, maskedTrail), then one
// entry at a time; the zero test by nonzero.
func maskRow(row []float32) attnRow {
	first := -1
	for s := maskedLead(row); s < len(row); s++ {
		if row[s] > AttentionMaskedBias {
			first = s
			break
		}
	}
	if first < 0 {
		return attnRow{0, int32(len(row)), false}
	}
	last, s := first, len(row)-1
	for ; s > first && s >= len(row)&^7; s-- { // the entries past the last block
		if row[s] > AttentionMaskedBias {
			last = s
			break
		}
	}
	if last == first && s > first {
		// Blocks of 8 from b0 (past first) up to s + 1, a multiple of 8.
		b0 := min(roundUp(first+1, 8), s+1)
		for s -= maskedTrail(row[b0 : s+1]); s > first; s-- {
			if row[s] > AttentionMaskedBias {
				last = s
				break
			}
		}
	}
	return attnRow{int32(first), int32(last + 1), !nonzero(row[first : last+1])}
}

// attnScratch is one worker's operands and buffers (sizes in newScratch).
type attnScratch struct {
	a        *Attention
	key      attnScratchKey // the sizes (AttentionBuffers)
	ks       *gemmKernelSet
	mr, nr   int
	h, r     int
	hPad, hm int // h rounded up to nr and to mr
	sPad     int // S rounded up to nr
	bq, bk   int // positions of a block, keys of a tile
	ld       int // the row stride of s and ds: bk + nr, so that rows are not a multiple of 1 KiB apart (L1 set aliasing; within the noise on the 25M layer)
	// stridedN is ks.micro on n tiles in one call, A's element (i, p) of
	// tile t read in place at a[t·astep + i·rs + p·ps] (attnStridedN;
	// nil: A is packed into panels, the buffers qp, dop, qt, dot and ap).
	stridedN func(k int, a []float32, rs, ps, astep int, b []float32, ldb, bstep int, c []float32, ldc, cstep, n int, acc bool)

	kp, vp, kr, vr []float32
	// kRows, vRows: row s of K, V of the current (b, j) at [s·ldRows:]
	// (features past h zero to hPad when they are kr, vr).
	kRows, vRows []float32
	ldRows       int
	q, do        []float32 // the block's rows [mPad, h], zero past m (and mr floats of slack)
	qp, dop      []float32 // mr-row panels of q, do
	qt, dot      []float32 // mr-feature panels of q, do (depth mPad)
	s, ds        []float32 // scores → P, dP → dS of one tile [mPad, ld] (the forward: one panel, [mr, ld])
	ap           []float32 // one panel of P or dS transposed [ld, mr]
	o            []float32 // O or dQ accumulators [mPad, hPad]
	mx, l, d     []float32 // per row: running max, sum (inverse sum), D
	dkt, dvt     []float32 // dKᵀ, dVᵀ of one (b, j) [hm, sPad]
	tmp          []float32
	lo, hi       []int // per panel: the tile's chunks [lo, hi) (relative)
	klo, khi     []int // per panel: the keys [klo, khi) within them that its rows' ranges meet
	sufLo, sufHi []int // per panel p (and np): the bounds of the chunks of the panels from p on
}

func (a *Attention) newScratch(ks *gemmKernelSet, backward bool) *attnScratch {
	h := a.HeadDim
	bq, bk := a.tiles(ks)
	w := &attnScratch{a: a, key: a.scratchKey(ks, backward), ks: ks, mr: ks.mr, nr: ks.nr, h: h, r: a.groups(), bq: bq, bk: bk, ld: bk + ks.nr,
		stridedN: attnStridedN(ks)}
	w.hPad, w.hm, w.sPad = roundUp(h, w.nr), roundUp(h, w.mr), roundUp(a.S, w.nr)
	mPad := roundUp(bq*w.r, w.mr)
	packed := w.stridedN == nil
	w.kp = make([]float32, w.sPad*h)
	// The slack: the last panel of features (from hm − mr) of the last row.
	w.q = make([]float32, mPad*h+w.mr)
	if backward {
		w.s = make([]float32, mPad*w.ld)
	} else {
		w.s = make([]float32, w.mr*w.ld) // one panel at a time
	}
	if packed {
		w.qp = make([]float32, mPad*h)
		w.ap = make([]float32, w.mr*w.ld)
	}
	w.o = make([]float32, mPad*w.hPad)
	w.mx = make([]float32, mPad)
	w.l = make([]float32, mPad)
	inPlace := w.rowsInPlace()
	if !backward && !inPlace {
		w.vr = make([]float32, w.sPad*w.hPad)
	}
	w.tmp = make([]float32, max(h, mPad, w.nr, w.ld))
	w.lo = make([]int, mPad/w.mr)
	w.hi = make([]int, mPad/w.mr)
	w.sufLo = make([]int, mPad/w.mr+1)
	w.sufHi = make([]int, mPad/w.mr+1)
	w.klo = make([]int, mPad/w.mr)
	w.khi = make([]int, mPad/w.mr)
	if backward {
		w.vp = make([]float32, w.sPad*h)
		if !inPlace {
			w.kr = make([]float32, w.sPad*w.hPad)
		}
		w.do = make([]float32, mPad*h+w.mr)
		if packed {
			w.dop = make([]float32, mPad*h)
			w.qt = make([]float32, w.hm*mPad)
			w.dot = make([]float32, w.hm*mPad)
		}
		w.ds = make([]float32, mPad*w.ld)
		w.d = make([]float32, mPad)
		w.dkt = make([]float32, w.hm*w.sPad)
		w.dvt = make([]float32, w.hm*w.sPad)
	}
	return w
}

// mul runs C[i·ldc + j] (+)= Σ_{p<k} a[i·rs + p·ps]·b[p·ldb + j] for
// i < mr, j < nr (k ≥ 1) after checking that the slices hold every element
// it touches: the kernel set's micro-kernel on a packed panel (rs = 1,
// ps = mr), w.stridedN on one tile on any other layout.
func (w *attnScratch) mul(k int, a []float32, rs, ps int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	_ = a[(w.mr-1)*rs+(k-1)*ps]
	_ = b[(k-1)*ldb+w.nr-1]
	_ = c[(w.mr-1)*ldc+w.nr-1]
	if rs == 1 && ps == w.mr {
		w.ks.micro(k, a, b, ldb, c, ldc, acc)
		return
	}
	w.stridedN(k, a, rs, ps, 0, b, ldb, 0, c, ldc, 0, 1, acc)
}

// mulN runs mul on the n tiles t < n with A from a[t·astep:], B from
// b[t·bstep:] and C at c[t·cstep:] (steps ≥ 0): the same float32s as n
// mul calls, in one kernel call where the set has stridedN.
func (w *attnScratch) mulN(k int, a []float32, rs, ps, astep int, b []float32, ldb, bstep int, c []float32, ldc, cstep, n int, acc bool) {
	if n <= 0 {
		return
	}
	if w.stridedN == nil {
		for t := range n {
			w.mul(k, a[t*astep:], rs, ps, b[t*bstep:], ldb, c[t*cstep:], ldc, acc)
		}
		return
	}
	// The last tile's extents (the steps are ≥ 0).
	_ = a[(n-1)*astep+(w.mr-1)*rs+(k-1)*ps]
	_ = b[(n-1)*bstep+(k-1)*ldb+w.nr-1]
	_ = c[(n-1)*cstep+(w.mr-1)*ldc+w.nr-1]
	w.stridedN(k, a, rs, ps, astep, b, ldb, bstep, c, ldc, cstep, n, acc)
}

// rowPanel returns A = panel p (rows p·mr + i, i < mr) of the block's
// rows x (q or do, [mPad, h]) over the features, with its strides: in
// place, or from xp (their panels) when the tiles pack.
func (w *attnScratch) rowPanel(x, xp []float32, p int) (a []float32, rs, ps int) {
	if w.stridedN != nil {
		return x[p*w.mr*w.h:], w.h, 1
	}
	return xp[p*w.mr*w.h:], 1, w.mr
}

// featurePanel returns A = the features f ≤ i < f + mr of the block's
// rows x (q or do) from row q0 on, rows as the depth, with its strides
// and the step to the next mr features: in place (features past h read
// the next row's, whose products are not stored; x has mr floats of
// slack), or from xt (their panels, depth mPad) when the tiles pack.
func (w *attnScratch) featurePanel(x, xt []float32, f, q0, mPad int) (a []float32, rs, ps, step int) {
	if w.stridedN != nil {
		return x[f+q0*w.h:], 1, w.h, w.mr
	}
	return xt[f*mPad+q0*w.mr:], 1, w.mr, w.mr * mPad
}

// packKV packs K and V of (b, j): kp as nr-key panels of depth h, and
// (the forward's) V as rows vRows, or vp and (the backward's) K as rows
// kRows likewise: in place when h is a multiple of nr, else vr, kr padded
// to hPad features and sPad keys with zeros.
func (w *attnScratch) packKV(k, v []float32, b, j int) {
	a, h := w.a, w.h
	kv := a.KVHeads
	base := (b*a.S*kv + j) * h
	kop, vop := Operand{F32: k}, Operand{F32: v}
	packPanels(w.kp, &kop, base, kv*h, 1, a.S, h, w.nr, w.tmp, w.ks)
	inPlace := w.rowsInPlace()
	if inPlace {
		w.ldRows = kv * h
	} else {
		w.ldRows = w.hPad
	}
	if !w.key.backward {
		if w.vRows = v[base:]; !inPlace {
			rowsPadded(w.vr, v, base, kv*h, a.S, h, w.hPad, w.sPad)
			w.vRows = w.vr
		}
		return
	}
	packPanels(w.vp, &vop, base, kv*h, 1, a.S, h, w.nr, w.tmp, w.ks)
	if w.kRows = k[base:]; !inPlace {
		rowsPadded(w.kr, k, base, kv*h, a.S, h, w.hPad, w.sPad)
		w.kRows = w.kr
	}
}

// rowsInPlace reports whether the products over keys (tileTimes) read K
// and V in place: h a multiple of nr (no feature padding), and A read in
// place, whose products run over the keys of each row's range exactly
// (packed, they run over whole chunks, and keys past S would be read).
func (w *attnScratch) rowsInPlace() bool { return w.h%w.nr == 0 && w.stridedN != nil }

// rowsPadded writes dst[s·ld + f] = src[base + s·rs + f] for s < n, f < h,
// and zeros for h ≤ f < ld and n ≤ s < nPad.
func rowsPadded(dst, src []float32, base, rs, n, h, ld, nPad int) {
	for s := range n {
		d := dst[s*ld : (s+1)*ld]
		copy(d, src[base+s*rs:base+s*rs+h])
		clear(d[h:])
	}
	clear(dst[n*ld : nPad*ld])
}

// loadBlock copies the rows R = (t − t0)·r + i, t0 ≤ t < t1, i < r, of
// group j of batch row b from x [Batch, T, Heads, h] into dst [mPad, h],
// zeros past them, and returns their number m.
func (w *attnScratch) loadBlock(dst, x []float32, b, j, t0, t1 int) int {
	a, r, h := w.a, w.r, w.h
	for t := t0; t < t1; t++ {
		src := x[((b*a.T+t)*a.Heads+j*r)*h:]
		copy(dst[(t-t0)*r*h:(t-t0+1)*r*h], src[:r*h])
	}
	m := (t1 - t0) * r
	clear(dst[m*h : roundUp(m, w.mr)*h])
	return m
}

// blockKeys returns [lo, hi), the union of the key ranges of the rows of
// positions t0 ≤ t < t1 of batch row b.
func (w *attnScratch) blockKeys(rows []attnRow, b, t0, t1 int) (lo, hi int) {
	lo, hi = w.a.S, 0
	for _, ri := range rows[b*w.a.T+t0 : b*w.a.T+t1] {
		lo, hi = min(lo, int(ri.lo)), max(hi, int(ri.hi))
	}
	return lo, hi
}

// panelChunks sets w.lo[p], w.hi[p] for the np panels of the block at t0
// (m rows): the key chunks, relative to the tile [s0, s1), that meet the
// ranges of the panel's rows (lo = hi when none does).
func (w *attnScratch) panelChunks(rows []attnRow, b, t0, m, s0, s1 int) (np int) {
	mr, nr, r := w.mr, w.nr, w.r
	np = (m + mr - 1) / mr
	for p := range np {
		lo, hi := s1, s0
		for i := p * mr; i < min(m, (p+1)*mr); i++ {
			ri := rows[b*w.a.T+t0+i/r]
			lo, hi = min(lo, int(ri.lo)), max(hi, int(ri.hi))
		}
		lo, hi = max(lo, s0), min(hi, s1)
		if lo >= hi {
			w.lo[p], w.hi[p], w.klo[p], w.khi[p] = 0, 0, 0, 0
			continue
		}
		w.lo[p], w.hi[p] = (lo-s0)/nr*nr, roundUp(hi-s0, nr)
		w.klo[p], w.khi[p] = lo-s0, hi-s0
	}
	return np
}

// products writes dst[(p·mr + i)·ld + c] = Σ_f x(p·mr + i, f)·bp(s0 + c, f)
// over each panel's chunks: the block's rows x (q or do; xp their panels
// when the tiles pack) against the nr-key panels bp of K or V.
func (w *attnScratch) products(dst, x, xp, bp []float32, np, s0 int) {
	mr, nr, h, ld := w.mr, w.nr, w.h, w.ld
	for p := range np {
		a, rs, ps := w.rowPanel(x, xp, p)
		if c := w.lo[p]; c < w.hi[p] {
			w.mulN(h, a, rs, ps, 0, bp[(s0+c)*h:], nr, nr*h, dst[p*mr*ld+c:], ld, nr, (w.hi[p]-c)/nr, false)
		}
	}
}

// clearOutside zeros x[c0:e0] and x[e1:] (calling clear only for a
// non-empty range: the causal rows have none before e0).
func clearOutside(x []float32, c0, e0, e1 int) {
	if c0 < e0 {
		clear(x[c0:e0])
	}
	if e1 < len(x) {
		clear(x[e1:])
	}
}

// rowKeys returns the entries [e0, e1) of row i's chunks [c0, c1) of the
// tile at s0 that enter its softmax (the rest are zeros of it), adding the
// bias to them unless the row's bias is zero there.
func (w *attnScratch) rowKeys(sr, bias []float32, ri attnRow, b, t, s0, c0, c1 int) (e0, e1 int) {
	a := w.a
	e0, e1 = c0, min(c1, a.S-s0)
	if ri.zero {
		return max(e0, int(ri.lo)-s0), min(e1, int(ri.hi)-s0)
	}
	if e0 < e1 {
		off := (b*a.T+t)*a.S + s0
		vek32.Add_Inplace(sr[e0:e1], bias[off+e0:off+e1])
	}
	return e0, e1
}

// tileTimes adds, for each of the np panels p of x (rows p·mr + i,
// i < mr, of a tile of P or dS), panelTimes(x[p·mr·ld:], p, rows, s0):
// O += P·V with rows = vRows, dQs += dS·K with rows = kRows.
func (w *attnScratch) tileTimes(x []float32, np int, rows []float32, s0 int) {
	for p := range np {
		w.panelTimes(x[p*w.mr*w.ld:], p, rows, s0)
	}
}

// panelTimes adds, for the mr rows i of x (panel p of a tile of P or dS,
// row i at x[i·ld:]) over the panel's chunks [c0, c1),
// Σ_c x[i·ld + c0 + c] · rows[(s0 + c0 + c)·w.ldRows + f] to
// w.o[(p·mr + i)·hPad + f] for f < hPad. Read in place over the keys its
// rows' ranges meet (x is zero elsewhere in the chunks), the four
// 16-feature tiles in one call; packed, the panel is transposed once and
// then runs every feature.
func (w *attnScratch) panelTimes(x []float32, p int, rows []float32, s0 int) {
	mr, nr, hPad, ld, ldr := w.mr, w.nr, w.hPad, w.ld, w.ldRows
	if w.stridedN == nil {
		c0, c1 := w.lo[p], w.hi[p]
		if c0 >= c1 {
			return
		}
		transposeInto(w.ks, w.ap, mr, x[c0:], ld, mr, c1-c0)
		for f := 0; f < hPad; f += nr {
			w.mul(c1-c0, w.ap, 1, mr, rows[(s0+c0)*ldr+f:], ldr, w.o[p*mr*hPad+f:], hPad, true)
		}
		return
	}
	if c0, c1 := w.klo[p], w.khi[p]; c0 < c1 {
		w.mulN(c1-c0, x[c0:], ld, 1, 0, rows[(s0+c0)*ldr:], ldr, nr, w.o[p*mr*hPad:], hPad, nr, hPad/nr, true)
	}
}

// transposeInto writes dst[c·ldd + i] = src[i·lds + c] for i < rows,
// c < k, with the kernel set's transpose where it has one for the shape.
func transposeInto(ks *gemmKernelSet, dst []float32, ldd int, src []float32, lds, rows, k int) {
	k16 := 0
	if ks.transpose != nil && (rows == ks.mr || rows == 16) {
		k16 = k &^ 15
	}
	if k16 > 0 {
		ks.transpose(src, lds, dst, ldd, k16, rows)
	}
	for i := range rows {
		s := src[i*lds : i*lds+k]
		for c := k16; c < k; c++ {
			dst[c*ldd+i] = s[c]
		}
	}
}

// forwardBlock computes o, m and l of the rows of positions t0 ≤ t < t1
// of (b, j) into fwd.
func (w *attnScratch) forwardBlock(fwd, qs, bias []float32, rows []attnRow, b, j, t0, t1 int) {
	a, ks, mr, h, hPad, ld, r := w.a, w.ks, w.mr, w.h, w.hPad, w.ld, w.r
	m := w.loadBlock(w.q, qs, b, j, t0, t1)
	if w.stridedN == nil {
		qop := RowMajor(w.q, m, h)
		packPanels(w.qp, &qop, 0, h, 1, m, h, mr, w.tmp, ks)
	}
	clear(w.o[:roundUp(m, mr)*hPad])
	for i := range m {
		w.mx[i], w.l[i] = float32(math.Inf(-1)), 0
	}
	lo, hi := w.blockKeys(rows, b, t0, t1)
	for s0 := lo / w.bk * w.bk; s0 < hi; s0 += w.bk {
		s1 := min(a.S, s0+w.bk)
		np := w.panelChunks(rows, b, t0, m, s0, s1)
		// Panel by panel, its scores (w.s's first mr rows, in L1), their
		// softmax and O += P·V.
		for p := range np {
			c0, c1 := w.lo[p], w.hi[p]
			if c0 >= c1 {
				continue
			}
			ap, rs, ps := w.rowPanel(w.q, w.qp, p)
			w.mulN(h, ap, rs, ps, 0, w.kp[(s0+c0)*h:], w.nr, w.nr*h, w.s[c0:], ld, w.nr, (c1-c0)/w.nr, false)
			for i := p * mr; i < min(m, (p+1)*mr); i++ {
				t := t0 + i/r
				sr := w.s[(i-p*mr)*ld : (i-p*mr)*ld+c1]
				e0, e1 := w.rowKeys(sr, bias, rows[b*a.T+t], b, t, s0, c0, c1)
				if e0 >= e1 {
					clear(sr[c0:])
					continue
				}
				clearOutside(sr, c0, e0, e1)
				mNew, sum := attnSoftmax(sr[e0:e1], w.mx[i])
				// The row's first keys: o and l are still zero.
				if alpha := float32(math.Exp(float64(w.mx[i] - mNew))); alpha != 1 && w.mx[i] != float32(math.Inf(-1)) {
					w.l[i] *= alpha
					vek32.MulNumber_Inplace(w.o[i*hPad:i*hPad+h], alpha)
				}
				w.l[i] += sum
				w.mx[i] = mNew
			}
			w.panelTimes(w.s, p, w.vRows, s0)
		}
	}
	base := ((b*a.KVHeads+j)*a.T + t0) * r * (h + 2)
	attnOutRows(fwd[base:], h+2, w.o, hPad, w.mx, w.l, m, h)
}

// backwardBlock adds the rows of positions t0 ≤ t < t1 of (b, j) to dKᵀ
// and dVᵀ and writes their dQs into grads.
func (w *attnScratch) backwardBlock(grads, qs, dO, bias, fwd []float32, rows []attnRow, b, j, t0, t1 int) {
	a, ks, mr, nr, h, hPad, ld, r := w.a, w.ks, w.mr, w.nr, w.h, w.hPad, w.ld, w.r
	m := w.loadBlock(w.q, qs, b, j, t0, t1)
	w.loadBlock(w.do, dO, b, j, t0, t1)
	mPad := roundUp(m, mr)
	if w.stridedN == nil {
		qop, dop := RowMajor(w.q, mPad, h), RowMajor(w.do, mPad, h)
		packPanels(w.qp, &qop, 0, h, 1, m, h, mr, w.tmp, ks)
		packPanels(w.dop, &dop, 0, h, 1, m, h, mr, w.tmp, ks)
		// Features as rows (stride 1), rows as depth (stride h).
		packPanels(w.qt, &qop, 0, 1, h, h, mPad, mr, w.tmp, ks)
		packPanels(w.dot, &dop, 0, 1, h, h, mPad, mr, w.tmp, ks)
	}
	fbase := ((b*a.KVHeads+j)*a.T + t0) * r * (h + 2)
	attnRowStats(w.d, w.mx, w.l, w.do, h, fwd[fbase:], h+2, m, h)
	clear(w.o[:mPad*hPad])
	lo, hi := w.blockKeys(rows, b, t0, t1)
	for s0 := lo / w.bk * w.bk; s0 < hi; s0 += w.bk {
		s1 := min(a.S, s0+w.bk)
		np := w.panelChunks(rows, b, t0, m, s0, s1)
		w.products(w.s, w.q, w.qp, w.kp, np, s0)
		w.products(w.ds, w.do, w.dop, w.vp, np, s0)
		// P = e^(s − m)/l, dS = P ⊙ (dP − D) over each row's keys.
		u0, u1 := w.bk, 0 // the union of the panels' chunks
		for p := range np {
			if w.lo[p] < w.hi[p] {
				u0, u1 = min(u0, w.lo[p]), max(u1, w.hi[p])
			}
		}
		for i := range m {
			c0, c1 := w.lo[i/mr], w.hi[i/mr]
			if c0 >= c1 {
				continue
			}
			t := t0 + i/r
			sr, dr := w.s[i*ld:i*ld+c1], w.ds[i*ld:i*ld+c1]
			e0, e1 := w.rowKeys(sr, bias, rows[b*a.T+t], b, t, s0, c0, c1)
			if e0 >= e1 {
				clear(sr[c0:])
				clear(dr[c0:])
				continue
			}
			clearOutside(sr, c0, e0, e1)
			clearOutside(dr, c0, e0, e1)
			attnGrad(sr[e0:e1], dr[e0:e1], w.mx[i], w.l[i], w.d[i])
		}
		// Zeros where dKᵀ and dVᵀ read outside a panel's chunks: a chunk's
		// products run over every panel from the first to the last that
		// computes it, so a chunk outside panel p's is read with p's rows
		// only if panels both before and after p compute it: within
		// [max(loB, loA), min(hiB, hiA)), the bounds of the chunks of the
		// panels before p (B) and after it (A). Nested ranges (the causal
		// mask's) read none.
		w.sufLo[np], w.sufHi[np] = w.bk, 0
		for p := np - 1; p >= 0; p-- {
			w.sufLo[p], w.sufHi[p] = w.sufLo[p+1], w.sufHi[p+1]
			if w.lo[p] < w.hi[p] {
				w.sufLo[p], w.sufHi[p] = min(w.sufLo[p], w.lo[p]), max(w.sufHi[p], w.hi[p])
			}
		}
		loB, hiB := w.bk, 0
		for p := range np {
			c0, c1 := w.lo[p], w.hi[p]
			x0, x1 := max(loB, w.sufLo[p+1]), min(hiB, w.sufHi[p+1])
			if c0 < c1 {
				loB, hiB = min(loB, c0), max(hiB, c1)
			} else {
				c0, c1 = x1, x1
			}
			if x0 < min(x1, c0) || max(x0, c1) < x1 {
				for i := p * mr; i < (p+1)*mr; i++ {
					clear(w.s[i*ld+x0 : i*ld+max(x0, min(x1, c0))])
					clear(w.s[i*ld+min(x1, max(x0, c1)) : i*ld+x1])
					clear(w.ds[i*ld+x0 : i*ld+max(x0, min(x1, c0))])
					clear(w.ds[i*ld+min(x1, max(x0, c1)) : i*ld+x1])
				}
			}
		}
		// dVᵀ += dOᵀ·P, then dKᵀ += Qᵀ·dS, chunk by chunk (one product at
		// a time: dO or Q, the A of every chunk, stays in L1).
		for _, g := range [2]struct{ x, xt, b, acc []float32 }{{w.do, w.dot, w.s, w.dvt}, {w.q, w.qt, w.ds, w.dkt}} {
			for c := u0; c < u1; c += nr {
				pf, pl := -1, -1
				for p := range np {
					if w.lo[p] <= c && c < w.hi[p] {
						if pf < 0 {
							pf = p
						}
						pl = p
					}
				}
				if pf < 0 {
					continue
				}
				// Every feature panel f = 0, mr, … < hm.
				q0, q1 := pf*mr, (pl+1)*mr
				a, rs, ps, step := w.featurePanel(g.x, g.xt, 0, q0, mPad)
				w.mulN(q1-q0, a, rs, ps, step, g.b[q0*ld+c:], ld, 0, g.acc[s0+c:], w.sPad, mr*w.sPad, w.hm/mr, true)
			}
		}
		// dQs += dS·K.
		w.tileTimes(w.ds, np, w.kRows, s0)
	}
	gbase := (b*a.KVHeads + j) * a.T * (r + 2) * h
	if hPad == h { // the r rows of a position are contiguous in both
		for t := t0; t < t1; t++ {
			copy(grads[gbase+t*(r+2)*h:gbase+(t*(r+2)+r)*h], w.o[(t-t0)*r*h:(t-t0+1)*r*h])
		}
		return
	}
	for i := range m {
		t, hd := t0+i/r, i%r
		copy(grads[gbase+(t*(r+2)+hd)*h:gbase+(t*(r+2)+hd+1)*h], w.o[i*hPad:i*hPad+h])
	}
}

// storeKV writes dK and dV of (b, j), transposed from dKᵀ and dVᵀ, into
// grads.
func (w *attnScratch) storeKV(grads []float32, b, j int) {
	a, h, r := w.a, w.h, w.r
	gbase := (b*a.KVHeads + j) * a.T * (r + 2) * h
	ldd := (r + 2) * h
	for f0 := 0; f0 < h; f0 += 16 {
		rows := min(16, h-f0)
		transposeInto(w.ks, grads[gbase+r*h+f0:], ldd, w.dkt[f0*w.sPad:], w.sPad, rows, a.S)
		transposeInto(w.ks, grads[gbase+(r+1)*h+f0:], ldd, w.dvt[f0*w.sPad:], w.sPad, rows, a.S)
	}
}
