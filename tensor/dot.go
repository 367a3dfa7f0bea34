package tensor

import (
	"fmt"

	"github.com/viterin/vek/vek32"
)

// Vectors and matrices are flat, row-major []float32: row j of an n×d matrix
// x is x[j*d : (j+1)*d]. A batch of queries is such a matrix too.

// Dot returns the inner product ⟨x, y⟩ = Σᵢ xᵢ·yᵢ (vek's AVX2 kernel; 0 for
// empty vectors). It panics when the lengths differ (a programmer error).
func Dot(x, y []float32) float32 {
	if len(x) != len(y) {
		panic(fmt.Sprintf("tensor.Dot: lengths %d and %d differ", len(x), len(y)))
	}
	if len(x) == 0 {
		return 0
	}
	return vek32.Dot(x, y)
}

// DotRows scores one query against the rows of x:
//
//	out[j] = ⟨q, x[j·d : (j+1)·d]⟩,   d = len(q), j < len(out).
//
// Four rows are scored at once (four independent FMA chains), taken a
// quarter of the rows apart so that memory is read as four sequential
// streams. DotRows, DotRowsParallel and DotBlock return bit-identical
// values for the same (query, row) pair.
func DotRows(out, q, x []float32) { dotRowsWith(kernels, out, q, x) }

func dotRowsWith(ks *kernelSet, out, q, x []float32) { dotRowsQuartered(out, q, x, ks.dot4, ks.dot) }

// dotRowsQuartered computes out[j] = dot(q, x_j) for the rows x_j of x
// (row length len(q)) with dot4 over the rows in quartered order.
//
// Quartered order: the 1×4 kernel takes rows j, j+m, j+2m, j+3m (m = n/4),
// so it reads four long sequential streams that the hardware prefetchers
// follow, instead of four 3 KiB runs side by side (measured 1.2–1.5× the
// streaming time that way, ≈ 1.0× this way).
func dotRowsQuartered[T float32 | uint16 | uint8](out, q []float32, x []T,
	dot4 func(*[4]float32, []float32, []T, int), dot func([]float32, []T) float32) {
	d, n := len(q), len(out)
	checkLen("rows", len(x), n*d)
	m := n / 4
	var b [4]float32
	for j := range m {
		dot4(&b, q, x[j*d:], m*d)
		out[j], out[j+m], out[j+2*m], out[j+3*m] = b[0], b[1], b[2], b[3]
	}
	for j := 4 * m; j < n; j++ {
		out[j] = dot(q, x[j*d:(j+1)*d])
	}
}

// DotRowsF16 is DotRows over rows stored as IEEE binary16 bit patterns:
// out[j] = ⟨q, f32(x_j)⟩, exact conversion, float32 accumulation.
func DotRowsF16(out, q []float32, x []uint16) { dotRowsF16With(kernels, out, q, x) }

func dotRowsF16With(ks *kernelSet, out, q []float32, x []uint16) {
	dotRowsQuartered(out, q, x, ks.dotF16x4, ks.dotF16)
}

// DotRowsU8 is DotRows over rows of bytes: out[j] = Σᵢ qᵢ·x_j[i]. With a
// query prepared by SQ8.PrepareQuery it scores scalar-quantized rows.
func DotRowsU8(out, q []float32, x []uint8) { dotRowsU8With(kernels, out, q, x) }

func dotRowsU8With(ks *kernelSet, out, q []float32, x []uint8) {
	dotRowsQuartered(out, q, x, ks.dotU8x4, ks.dotU8)
}

// DotRowsParallel is DotRows with the rows split over workers goroutines
// (workers ≤ 0: GOMAXPROCS). The result is bit-identical to DotRows.
func DotRowsParallel(out, q, x []float32, workers int) {
	d := len(q)
	checkLen("rows", len(x), len(out)*d)
	ParallelFor(len(out), workers, 256, func(_, lo, hi int) {
		dotRowsWith(kernels, out[lo:hi], q, x[lo*d:])
	})
}

// DotBlock scores nq = len(q)/d queries against nx = len(x)/d rows:
//
//	out[i·nx + j] = ⟨q_i, x_j⟩.
//
// It is register-blocked (3 queries × 4 rows per inner kernel, twelve
// 8-lane accumulators) and cache-blocked (rows in tiles that stay in L2
// while every query passes over them). Use it instead of vek32.MatMul,
// which is slower for this shape than separate single-query scans.
func DotBlock(out, q, x []float32, d int) {
	if d <= 0 {
		clear(out)
		return
	}
	nq, nx := len(q)/d, len(x)/d
	checkLen("out", len(out), nq*nx)
	dotBlockWith(kernels, out, nx, q, nq, x, nx, d)
}

// DotBlockParallel is DotBlock with the rows split over workers goroutines
// (workers ≤ 0: GOMAXPROCS); bit-identical to DotBlock.
func DotBlockParallel(out, q, x []float32, d, workers int) {
	if d <= 0 {
		clear(out)
		return
	}
	nq, nx := len(q)/d, len(x)/d
	checkLen("out", len(out), nq*nx)
	ParallelFor(nx, workers, 64, func(_, lo, hi int) {
		dotBlockWith(kernels, out[lo:], nx, q, nq, x[lo*d:hi*d], hi-lo, d)
	})
}

// rowTile returns how many rows of dimension d make one cache tile: about
// 128 KiB of float32, a multiple of 4, at least 4.
func rowTile(d int) int {
	t := (128 << 10) / (4 * max(d, 1))
	return max(4, t&^3)
}

// dotBlockWith writes out[i*ldo + j] = ⟨q_i, x_j⟩ for i < nq, j < nx.
func dotBlockWith(ks *kernelSet, out []float32, ldo int, q []float32, nq int, x []float32, nx, d int) {
	if nq == 0 || nx == 0 {
		return
	}
	checkLen("queries", len(q), nq*d)
	checkLen("rows", len(x), nx*d)
	checkLen("out", len(out), (nq-1)*ldo+nx)
	tile := rowTile(d)
	var b12 [12]float32
	var b4 [4]float32
	for r0 := 0; r0 < nx; r0 += tile {
		r1 := min(nx, r0+tile)
		r4 := r0 + (r1-r0)&^3
		i := 0
		for ; i+3 <= nq; i += 3 {
			qi := q[i*d:]
			for j := r0; j < r4; j += 4 {
				ks.dot34(&b12, qi, d, x[j*d:], d, d)
				o := out[i*ldo+j:]
				o[0], o[1], o[2], o[3] = b12[0], b12[1], b12[2], b12[3]
				o = out[(i+1)*ldo+j:]
				o[0], o[1], o[2], o[3] = b12[4], b12[5], b12[6], b12[7]
				o = out[(i+2)*ldo+j:]
				o[0], o[1], o[2], o[3] = b12[8], b12[9], b12[10], b12[11]
			}
			for j := r4; j < r1; j++ {
				xj := x[j*d : (j+1)*d]
				for ii := i; ii < i+3; ii++ {
					out[ii*ldo+j] = ks.dot(q[ii*d:(ii+1)*d], xj)
				}
			}
		}
		for ; i < nq; i++ {
			qi := q[i*d : (i+1)*d]
			for j := r0; j < r4; j += 4 {
				ks.dot4(&b4, qi, x[j*d:], d)
				copy(out[i*ldo+j:i*ldo+j+4], b4[:])
			}
			for j := r4; j < r1; j++ {
				out[i*ldo+j] = ks.dot(qi, x[j*d:(j+1)*d])
			}
		}
	}
}

// DotBlockF16 is DotBlock over rows stored as binary16: each tile of rows is
// converted to float32 once into scratch and shared by all queries. scratch
// may be nil; the (possibly grown) scratch is returned for reuse. The values
// equal DotRowsF16's bit for bit.
func DotBlockF16(out, q []float32, x []uint16, d int, scratch []float32) []float32 {
	return dotBlockTiled(out, q, x, d, scratch, kernels.f16to32)
}

func dotBlockF16With(ks *kernelSet, out []float32, ldo int, q []float32, nq int, x []uint16, nx, d int, scratch []float32) []float32 {
	return dotBlockTiledWith(ks, out, ldo, q, nq, x, nx, d, scratch, ks.f16to32)
}

// DotBlockU8 is DotBlock over rows of bytes (see DotRowsU8), converting each
// tile once into scratch; bit-identical to DotRowsU8.
func DotBlockU8(out, q []float32, x []uint8, d int, scratch []float32) []float32 {
	return dotBlockTiled(out, q, x, d, scratch, kernels.u8to32)
}

func dotBlockU8With(ks *kernelSet, out []float32, ldo int, q []float32, nq int, x []uint8, nx, d int, scratch []float32) []float32 {
	return dotBlockTiledWith(ks, out, ldo, q, nq, x, nx, d, scratch, ks.u8to32)
}

// dotBlockTiled is DotBlock over rows stored as T, which conv widens to
// float32 (len(dst) elements).
func dotBlockTiled[T uint16 | uint8](out, q []float32, x []T, d int, scratch []float32, conv func([]float32, []T)) []float32 {
	if d <= 0 {
		clear(out)
		return scratch
	}
	nq, nx := len(q)/d, len(x)/d
	checkLen("out", len(out), nq*nx)
	return dotBlockTiledWith(kernels, out, nx, q, nq, x, nx, d, scratch, conv)
}

// dotBlockTiledWith converts each tile of rows once into scratch with conv
// and runs the float32 block kernel on it, for all queries.
func dotBlockTiledWith[T uint16 | uint8](ks *kernelSet, out []float32, ldo int, q []float32, nq int, x []T, nx, d int,
	scratch []float32, conv func([]float32, []T)) []float32 {
	if nq == 0 || nx == 0 {
		return scratch
	}
	checkLen("rows", len(x), nx*d)
	tile := rowTile(d)
	scratch = grow(scratch, min(tile, nx)*d)
	for r0 := 0; r0 < nx; r0 += tile {
		r1 := min(nx, r0+tile)
		buf := scratch[:(r1-r0)*d]
		conv(buf, x[r0*d:r1*d])
		dotBlockWith(ks, out[r0:], ldo, q, nq, buf, r1-r0, d)
	}
	return scratch
}

// DotBlockStrided is DotBlock writing out[i·ldo + j] for nq queries and nx
// rows, so callers can fill a column window of a wider score matrix.
func DotBlockStrided(out []float32, ldo int, q []float32, nq int, x []float32, nx, d int) {
	dotBlockWith(kernels, out, ldo, q, nq, x, nx, d)
}

// DotBlockStridedF16 is DotBlockStrided over binary16 rows.
func DotBlockStridedF16(out []float32, ldo int, q []float32, nq int, x []uint16, nx, d int, scratch []float32) []float32 {
	return dotBlockF16With(kernels, out, ldo, q, nq, x, nx, d, scratch)
}

// DotBlockStridedU8 is DotBlockStrided over byte rows.
func DotBlockStridedU8(out []float32, ldo int, q []float32, nq int, x []uint8, nx, d int, scratch []float32) []float32 {
	return dotBlockU8With(kernels, out, ldo, q, nq, x, nx, d, scratch)
}

// grow returns s with length n, reallocating when its capacity is short.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// StreamSum returns the float32 sum of x, read as four sequential streams
// (quarters of x, as DotRows reads its rows) with eight independent
// AVX-512 accumulators where the CPU has them, else vek's sum. It does the
// least work that touches every byte once, so its time over a large x is
// the memory-streaming bound of a scan (`cas bench index`'s stream bound).
// The summation order differs from a sequential sum's.
func StreamSum(x []float32) float32 {
	s, q := sumStreams4(x)
	if rest := x[4*q:]; len(rest) > 0 {
		s += vek32.Sum(rest)
	}
	return s
}
