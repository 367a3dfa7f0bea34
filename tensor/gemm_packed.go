package tensor

import "fmt"

// Products with operands packed once and reused: S = A·Wᵀ where one side
// is multiplied against many blocks of the other — a batch of queries
// against every tile of a flat index's stored vectors, or a chunk of
// k-means points against every centroid. MatMulT packs both operands
// again on every call (and its loops write the whole M × N output before
// returning), so a caller that tiles a large product pays the packing of
// the reused side once per tile and streams every score block out of L2.
// Here the caller packs each side once (PackedLeft, PackedRight) and asks
// for one block of rows at a time (MatMulTPacked), small enough to stay in
// L2 and to be consumed (a top-k selection, an argmin) before the next.
//
// The arithmetic is exactly MatMulT's: the same kernels, the same depth
// slices of kc (gemmBlocking), the first slice written and the others
// added, each output summed in the same order. A product computed this way
// is therefore bit-identical to MatMulT's on the same operands, whatever
// the blocks and tiles (TestMatMulTPackedMatchesMatMulT).

// packedOperand is an m × k matrix packed in panels of w rows for each
// depth slice [pc, pc+kc): element (r, p) of slice pc is at
// data[pc·rowsPad + (r/w)·kcs·w + (p−pc)·w + r mod w], where kcs is the
// slice's depth and rowsPad the rows rounded up to w (zero rows pad the
// last panel).
type packedOperand struct {
	ks        *gemmKernelSet
	rows, k   int
	w, kc     int
	rowsPad   int
	data, tmp []float32
}

func (p *packedOperand) pack(x []float32, rows, k, w int, ks *gemmKernelSet) {
	if rows < 0 || k < 0 || len(x) < rows*k {
		panic(fmt.Sprintf("tensor: packing %d × %d from %d values", rows, k, len(x)))
	}
	p.ks, p.rows, p.k, p.w = ks, rows, k, w
	p.kc = ks.blocking().kc
	p.rowsPad = roundUp(rows, w)
	p.data = growF32(p.data, p.rowsPad*k)
	p.tmp = growF32(p.tmp, max(min(p.kc, k), w))
	if rows == 0 || k == 0 {
		return
	}
	op := RowMajor(x, rows, k)
	for pc := 0; pc < k; pc += p.kc {
		kcs := min(p.kc, k-pc)
		packPanels(p.data[pc*p.rowsPad:], &op, pc, k, 1, rows, kcs, w, p.tmp, ks)
	}
}

// PackedLeft is the left operand A (m rows of k) of MatMulTPacked, packed
// once: for a batch of queries, every tile of stored vectors reuses it.
type PackedLeft struct{ p packedOperand }

// Pack packs a (row-major m × k), reusing the storage of earlier packs.
func (l *PackedLeft) Pack(a []float32, m, k int) { l.packWith(a, m, k, gemmKernels) }

func (l *PackedLeft) packWith(a []float32, m, k int, ks *gemmKernelSet) {
	l.p.pack(a, m, k, ks.mr, ks)
}

// Rows is m.
func (l *PackedLeft) Rows() int { return l.p.rows }

// GemmBlockAlign is the multiple that the row blocks of MatMulTPacked
// start at: the register-tile height of the GEMM kernels this CPU runs.
func GemmBlockAlign() int { return gemmKernels.mr }

// PackedRight is the right operand of MatMulTPacked: n rows of W (k
// values each, the rows of S = A·Wᵀ's columns), packed once.
type PackedRight struct{ p packedOperand }

// Pack packs w (row-major n × k), reusing the storage of earlier packs.
func (r *PackedRight) Pack(w []float32, n, k int) { r.packWith(w, n, k, gemmKernels) }

func (r *PackedRight) packWith(w []float32, n, k int, ks *gemmKernelSet) {
	r.p.pack(w, n, k, ks.nr, ks)
}

// Rows is n.
func (r *PackedRight) Rows() int { return r.p.rows }

// MatMulTPacked writes out[(i−i0)·ldo + j] = Σ_{p<k} a_i[p] · w_j[p] for
// rows i0 ≤ i < i1 of l and every row j < n of r, on the calling
// goroutine. i0 must be a multiple of GemmBlockAlign() (i1 may be anything
// up to l.Rows()), ldo ≥ n, and both operands packed with the same k. It
// panics on a programmer error (mismatched operands, short out). The
// operands are only read: goroutines may share them.
func MatMulTPacked(out []float32, ldo int, l *PackedLeft, i0, i1 int, r *PackedRight) {
	a, b := &l.p, &r.p
	n, k := b.rows, a.k
	if a.ks != b.ks || b.k != k {
		panic(fmt.Sprintf("tensor.MatMulTPacked: operands packed with k=%d and k=%d or different kernels", a.k, b.k))
	}
	if i0 < 0 || i1 > a.rows || i0 > i1 || i0%a.w != 0 {
		panic(fmt.Sprintf("tensor.MatMulTPacked: rows [%d, %d) of %d (start a multiple of %d)", i0, i1, a.rows, a.w))
	}
	m := i1 - i0
	if m == 0 || n == 0 {
		return
	}
	if ldo < n || len(out) < (m-1)*ldo+n {
		panic(fmt.Sprintf("tensor.MatMulTPacked: out has %d values for %d × %d (ldo %d)", len(out), m, n, ldo))
	}
	if k == 0 {
		for i := range m {
			clear(out[i*ldo : i*ldo+n])
		}
		return
	}
	mc := a.ks.blocking().mc // rows whose panels stay in L2 while B passes
	var tile []float32       // an edge tile, allocated when there is one
	for ic := i0; ic < i1; ic += mc {
		matMulTPackedBlock(out[(ic-i0)*ldo:], ldo, a, ic, min(i1, ic+mc), b, &tile)
	}
}

// matMulTPackedBlock is MatMulTPacked for the rows [i0, i1) of one block
// of at most mc rows, written from out[0].
func matMulTPackedBlock(out []float32, ldo int, a *packedOperand, i0, i1 int, b *packedOperand, edge *[]float32) {
	ks := a.ks
	mr, nr := ks.mr, ks.nr
	n, k := b.rows, a.k
	for pc := 0; pc < k; pc += a.kc {
		kcs := min(a.kc, k-pc)
		acc := pc > 0
		as := a.data[pc*a.rowsPad:]
		bs := b.data[pc*b.rowsPad:]
		for jr := 0; jr < n; jr += nr {
			bp := bs[jr*kcs : (jr+nr)*kcs]
			nn := min(nr, n-jr)
			for ir := i0; ir < i1; ir += mr {
				ap := as[ir*kcs : (ir+mr)*kcs]
				mm := min(mr, i1-ir)
				c0 := (ir-i0)*ldo + jr
				if mm == mr && nn == nr {
					ks.micro(kcs, ap, bp, nr, out[c0:], ldo, acc)
					continue
				}
				if *edge == nil {
					*edge = make([]float32, mr*nr)
				}
				tile := *edge
				ks.micro(kcs, ap, bp, nr, tile, nr, false)
				for i := range mm {
					dst := out[c0+i*ldo : c0+i*ldo+nn]
					src := tile[i*nr : i*nr+nn]
					if acc {
						for j, v := range src {
							dst[j] += v
						}
					} else {
						copy(dst, src)
					}
				}
			}
		}
	}
}
