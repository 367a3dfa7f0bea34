package tensor

import (
	"fmt"
	"unsafe"
)

// Batched bfloat16 products on AMX tiles (Intel Advanced Matrix
// Extensions, AMX-BF16): TDPBF16PS multiplies a 16 × 32 bfloat16 tile by a
// 32 × 16 one into 16 × 16 float32 accumulators, 8,192 multiply-adds an
// instruction, where an AVX-512 FMA does 16 and VDPBF16PS 32. This is
// what makes a compressed flat batch search faster than the F32 GEMM, not
// only smaller: on this project's Xeon, VDPBF16PS runs at about half the
// F32 FMA's multiply-add rate (BenchmarkDotBF16CPUTime), AMX at many times
// it (BenchmarkDotBF16PanelsCPUTime).
//
// The stored rows go into BF16Panels: rounded to bfloat16, padded to
// multiples of 32 rows and 32 components, and laid out as AMX's B operand
// wants — 16-row panels in which each pair of components (2p, 2p+1) of the
// 16 rows is one 64-byte tile row. Queries are padded row-major bfloat16
// (PadBF16Queries). DotBF16Panels then computes
//
//	out[i·ldo + j] = Σ_{p<k} q[i][p] · x[j][p]     (float32 sums)
//
// for the padded block (the padding contributes zeros). Without AMX the
// same values come from a plain-Go loop over the packed layout.

// HasAMXBF16 reports whether DotBF16Panels runs on AMX tiles (the CPU has
// AMX-BF16 and the kernel granted this process the tile state).
func HasAMXBF16() bool { return amxKernel != nil }

func roundUp32(n int) int { return (n + 31) &^ 31 }

// BF16Panels are rows packed for DotBF16Panels (see above).
type BF16Panels struct {
	N, K       int // rows and components
	NPad, KPad int // padded to multiples of 32
	Data       []uint16
}

// PackF16 packs n rows of k binary16 codes (row-major), rounded to
// bfloat16; scratch (returned, reused) is its working memory.
//
// Each whole panel of 16 rows is converted row by row into bfloat16
// (F16ToBF16, vectorised), then laid out by a 16 × 16 transpose of 32-bit
// words — a pair of components of one row is one word, and the panel is
// the transpose of the 16 rows' words — where the CPU has it
// (transposeWords16); the packed bits are the same as row-by-row packing.
func (p *BF16Panels) PackF16(src []uint16, n, k int, scratch []float32) []float32 {
	return p.packPanels(n, k, scratch,
		func(dst []uint16, j int) { F16ToBF16(dst, src[j*k:(j+1)*k], nil) },
		func(row []float32, j int) { DecodeF16(row, src[j*k:(j+1)*k]) })
}

// packPanels is the driver of PackF16 and PackF32Norms. Where the CPU has
// the 16 × 16 word transpose, each whole panel of 16 rows is converted row
// by row into bfloat16 by toBF16(dst, j) (dst holds KPad values, zero past
// k) and laid out by transposeWords16; every other row j is written as
// float32 values by toF32(row, j) and packed by put (which rounds them to
// bfloat16). scratch (returned, reused) is the working memory.
func (p *BF16Panels) packPanels(n, k int, scratch []float32, toBF16 func(dst []uint16, j int), toF32 func(row []float32, j int)) []float32 {
	p.reset(n, k)
	full := 0
	if hasTransposeWords16 && n >= 16 {
		// 16 rows of KPad bfloat16 values (zero past k) in scratch.
		if cap(scratch) < 8*p.KPad {
			scratch = make([]float32, 8*p.KPad)
		}
		rows := unsafe.Slice((*uint16)(unsafe.Pointer(&scratch[0])), 16*p.KPad)
		clear(rows)
		full = n / 16 * 16
		for j0 := 0; j0 < full; j0 += 16 {
			for r := range 16 {
				toBF16(rows[r*p.KPad:r*p.KPad+k], j0+r)
			}
			transposeWords16(p.Data[j0*p.KPad:(j0+16)*p.KPad], rows, p.KPad/2)
		}
	}
	if full == n {
		return scratch
	}
	if cap(scratch) < k {
		scratch = make([]float32, k)
	}
	row := scratch[:k]
	for j := full; j < n; j++ {
		toF32(row, j)
		p.put(j, row)
	}
	return scratch
}

// packF16Rows is PackF16 row by row (the reference of the panel path).
func (p *BF16Panels) packF16Rows(src []uint16, n, k int) {
	p.reset(n, k)
	row := make([]float32, k)
	for j := range n {
		DecodeF16(row, src[j*k:(j+1)*k])
		p.put(j, row)
	}
}

// PackF32 packs n rows of k float32 values (row-major), rounded to
// bfloat16.
func (p *BF16Panels) PackF32(src []float32, n, k int) {
	p.reset(n, k)
	for j := range n {
		p.put(j, src[j*k:(j+1)*k])
	}
}

func (p *BF16Panels) reset(n, k int) {
	p.N, p.K, p.NPad, p.KPad = n, k, roundUp32(n), roundUp32(k)
	size := p.NPad * p.KPad
	if cap(p.Data) < size {
		p.Data = make([]uint16, size)
	}
	p.Data = p.Data[:size]
	clear(p.Data[n/16*16*p.KPad:]) // the last, partly filled panel and the padding panels
	if k < p.KPad {
		clear(p.Data[:n/16*16*p.KPad])
	}
}

// put writes row j: component c goes to panel j/16, pair c/2, slot j mod 16.
func (p *BF16Panels) put(j int, row []float32) {
	panel := p.Data[(j/16)*16*p.KPad:]
	slot := (j % 16) * 2
	for c := 0; c+1 < len(row); c += 2 {
		o := (c/2)*32 + slot
		panel[o] = F32ToBF16(row[c])
		panel[o+1] = F32ToBF16(row[c+1])
	}
	if len(row)%2 == 1 {
		c := len(row) - 1
		panel[(c/2)*32+slot] = F32ToBF16(row[c])
	}
}

// at is component c of row j, from the packed layout.
func (p *BF16Panels) at(j, c int) uint16 {
	return p.Data[(j/16)*16*p.KPad+(c/2)*32+(j%16)*2+c%2]
}

// PadBF16Queries rounds m rows of k float32 values to bfloat16 into dst,
// row-major with KPad = roundUp32(k) components and roundUp32(m) rows, the
// padding zero (dst is reallocated when too small, and returned).
func PadBF16Queries(dst []uint16, q []float32, m, k int) []uint16 {
	mp, kp := roundUp32(m), roundUp32(k)
	if cap(dst) < mp*kp {
		dst = make([]uint16, mp*kp)
	}
	dst = dst[:mp*kp]
	clear(dst)
	for i := range m {
		EncodeBF16(dst[i*kp:i*kp+k], q[i*k:(i+1)*k])
	}
	return dst
}

// DotBF16Panels computes the products of the m padded queries q (from
// PadBF16Queries, k = p.K) with the packed rows p into out, row i at
// out[i·ldo:], for all roundUp32(m) × p.NPad padded cells (ldo ≥ p.NPad).
func DotBF16Panels(out []float32, ldo int, q []uint16, m int, p *BF16Panels) {
	dotBF16Panels(amxKernel, out, ldo, q, m, p)
}

// amxBlockFunc runs the AMX kernel over nqb × nrb blocks of 32 × 32.
type amxBlockFunc func(out []float32, ldo int, q []uint16, nqb int, p *BF16Panels)

func dotBF16Panels(amx amxBlockFunc, out []float32, ldo int, q []uint16, m int, p *BF16Panels) {
	mp := roundUp32(m)
	if m <= 0 || p.N <= 0 {
		return
	}
	if ldo < p.NPad || len(out) < (mp-1)*ldo+p.NPad || len(q) < mp*p.KPad {
		panic(fmt.Sprintf("tensor.DotBF16Panels: out %d (ldo %d), q %d too short for m=%d, %d×%d panels", len(out), ldo, len(q), m, p.NPad, p.KPad))
	}
	if amx != nil {
		amx(out, ldo, q, mp/32, p)
		return
	}
	for i := range mp {
		qi := q[i*p.KPad : (i+1)*p.KPad]
		for j := range p.NPad {
			var s float32
			for c := range p.KPad {
				s += BF16ToF32(qi[c]) * BF16ToF32(p.at(j, c))
			}
			out[i*ldo+j] = s
		}
	}
}
