package tensor

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// General matrix products (GEMM) for GoMLX's DotGeneral and the transformer
// layers built on it:
//
//	Out[b][i][j] (+)= Σ_{p<K} A[b](i, p) · B[b](p, j),   b < Batch, i < M, j < N,
//
// with A and B given by strides, so one routine serves every layout a
// transformer meets without copying: x·Wᵀ with W in Hugging Face's [out, in]
// layout, x·W, batched attention products, and the transposed products of
// back-propagation. Out is contiguous [Batch, M, N] float32.
//
// Large problems run the BLIS algorithm (Van Zee & van de Geijn, "BLIS: A
// Framework for Rapidly Instantiating BLAS Functionality", ACM TOMS 2015):
// K is cut into slices of kc, B's slice is packed into kc×nr panels and A's
// into mr×kc panels so that an mr×nr register tile of Out accumulates
// mr·nr·kc multiply-adds from cache (AVX-512: 12×32 tiles, 24 ZMM
// accumulators). Small M with k-contiguous operands (decoding: one or a few
// rows against a weight matrix) skips packing and streams W's rows through
// 4×4 and 1×8 dot-product kernels, since each weight is used only M times.
// Packing transposes k-contiguous rows in registers (16×16 blocks with
// AVX-512, 8×8 with AVX2). Work is split over goroutines by batch entries,
// then along the longer of M and N (each task packs its own rows of A and
// columns of B, except that the operand every task would pack whole is
// packed once, by all workers, first); every output is computed by the
// same sequence of operations whatever the split, so results do not depend
// on the number of workers.

// Operand is one matrix operand of a Gemm: element (b, r, c) is
// Data[Offset + b·BatchStride + r·RowStride + c·ColStride], where for A r is
// the row i and c the contracted index p, and for B r is p and c the column
// j. Exactly one of F32 and BF16 (bfloat16 bit patterns, the high half of a
// float32) holds the data. Strides may be zero (broadcast) but not negative.
type Operand struct {
	F32                               []float32
	BF16                              []uint16
	Offset                            int
	BatchStride, RowStride, ColStride int
}

// Gemm is one (batched) matrix product; see the package comment above.
type Gemm struct {
	Batch, M, N, K int
	A, B           Operand
	// Accumulate adds the product to Out instead of overwriting it.
	Accumulate bool
	// Workers bounds the goroutines used (≤ 0: GOMAXPROCS).
	Workers int
}

// RowMajor returns the operand of a contiguous row-major [batch, rows, cols]
// float32 array.
func RowMajor(data []float32, rows, cols int) Operand {
	return Operand{F32: data, BatchStride: rows * cols, RowStride: cols, ColStride: 1}
}

// Transposed returns the operand that reads a contiguous row-major
// [batch, cols, rows] float32 array as its transpose [batch, rows, cols]:
// the B operand of x·Wᵀ for W in Hugging Face's [out, in] layout is
// Transposed(W, in, out).
func Transposed(data []float32, rows, cols int) Operand {
	return Operand{F32: data, BatchStride: rows * cols, RowStride: 1, ColStride: rows}
}

// MatMulT computes out[M,N] = a[M,K] · w[N,K]ᵀ (Hugging Face's [out, in]
// weights, contracting the last axis of both) on workers goroutines (≤ 0:
// GOMAXPROCS). It panics if a slice is too short (a programmer error).
func MatMulT(out, a, w []float32, m, n, k, workers int) {
	g := Gemm{Batch: 1, M: m, N: n, K: k, A: RowMajor(a, m, k), B: Transposed(w, k, n), Workers: workers}
	g.mustRun(out)
}

// MatMulTBF16 is MatMulT with the weights in bfloat16 (converted exactly to
// float32 as they are packed; accumulation is float32).
func MatMulTBF16(out, a []float32, w []uint16, m, n, k, workers int) {
	g := Gemm{Batch: 1, M: m, N: n, K: k, A: RowMajor(a, m, k),
		B: Operand{BF16: w, BatchStride: n * k, RowStride: 1, ColStride: k}, Workers: workers}
	g.mustRun(out)
}

// MatMul computes out[M,N] = a[M,K] · b[K,N], all row-major.
func MatMul(out, a, b []float32, m, n, k, workers int) {
	g := Gemm{Batch: 1, M: m, N: n, K: k, A: RowMajor(a, m, k), B: RowMajor(b, k, n), Workers: workers}
	g.mustRun(out)
}

// BatchMatMulT computes out[b] = a[b] · w[b]ᵀ for b < batch with a
// [batch, M, K] and w [batch, N, K] (attention scores q·kᵀ).
func BatchMatMulT(out, a, w []float32, batch, m, n, k, workers int) {
	g := Gemm{Batch: batch, M: m, N: n, K: k, A: RowMajor(a, m, k), B: Transposed(w, k, n), Workers: workers}
	g.mustRun(out)
}

func (g *Gemm) mustRun(out []float32) {
	if err := g.Run(out); err != nil {
		panic(err)
	}
}

// Validate checks the sizes, strides and slice lengths against out.
func (g *Gemm) Validate(out []float32) error {
	if g.Batch < 0 || g.M < 0 || g.N < 0 || g.K < 0 {
		return fmt.Errorf("tensor.Gemm: negative size batch=%d M=%d N=%d K=%d", g.Batch, g.M, g.N, g.K)
	}
	if need := g.Batch * g.M * g.N; len(out) < need {
		return fmt.Errorf("tensor.Gemm: out has length %d, need %d", len(out), need)
	}
	// The operands are read only when the product has terms.
	used := g.Batch*g.M*g.N*g.K > 0
	if err := g.A.check("A", g.Batch, g.M, g.K, used); err != nil {
		return err
	}
	return g.B.check("B", g.Batch, g.K, g.N, used)
}

func (o *Operand) check(name string, batch, rows, cols int, used bool) error {
	if o.Offset < 0 || o.BatchStride < 0 || o.RowStride < 0 || o.ColStride < 0 {
		return fmt.Errorf("tensor.Gemm: operand %s has a negative offset or stride", name)
	}
	if !used {
		return nil
	}
	if (o.F32 == nil) == (o.BF16 == nil) {
		return fmt.Errorf("tensor.Gemm: operand %s needs exactly one of F32 and BF16", name)
	}
	last := o.Offset + (batch-1)*o.BatchStride + (rows-1)*o.RowStride + (cols-1)*o.ColStride
	if n := o.len(); last >= n {
		return fmt.Errorf("tensor.Gemm: operand %s [%d,%d,%d] with strides (%d,%d,%d)+%d reaches index %d of %d",
			name, batch, rows, cols, o.BatchStride, o.RowStride, o.ColStride, o.Offset, last, n)
	}
	return nil
}

func (o *Operand) len() int {
	if o.F32 != nil {
		return len(o.F32)
	}
	return len(o.BF16)
}

// run returns n values of the operand starting at element off with step
// between them, as float32: a subslice of F32 when contiguous, otherwise
// gathered (and converted) into tmp.
func (o *Operand) run(off, step, n int, tmp []float32) []float32 {
	if o.F32 != nil {
		if step == 1 {
			return o.F32[off : off+n : off+n]
		}
		tmp = tmp[:n]
		for i := range tmp {
			tmp[i] = o.F32[off+i*step]
		}
		return tmp
	}
	tmp = tmp[:n]
	if step == 1 {
		DecodeBF16(tmp, o.BF16[off:off+n])
		return tmp
	}
	for i := range tmp {
		tmp[i] = BF16ToF32(o.BF16[off+i*step])
	}
	return tmp
}

// Run computes the product into out (length ≥ Batch·M·N). With K = 0 the
// product is zero. Sizes, strides and lengths are validated first.
func (g *Gemm) Run(out []float32) error {
	if err := g.Validate(out); err != nil {
		return err
	}
	g.run(out, gemmKernels)
	return nil
}

// gemmKernelSet is one implementation of the inner kernels.
type gemmKernelSet struct {
	name   string
	mr, nr int
	// micro computes C[i·ldc + j] (+)= Σ_{p<k} a[p·mr + i] · b[p·ldb + j]
	// for i < mr, j < nr (overwriting C when acc is false); k ≥ 1.
	micro func(k int, a, b []float32, ldb int, c []float32, ldc int, acc bool)
	// dot4x4 writes out[i·4 + j] = Σ_{p<k} a[i·lda + p] · w[j·ldw + p] and
	// dot1x8 out[j] = Σ_{p<k} a[p] · w[j·ldw + p]; k is a positive multiple
	// of dotAlign. Nil when the set has no dot kernels.
	dot4x4   func(k int, a []float32, lda int, w []float32, ldw int, out *[16]float32)
	dot1x8   func(k int, a, w []float32, ldw int, out *[8]float32)
	dotAlign int
	// transpose writes dst[p·ldd + r] = src[r·lds + p] for p < k (a
	// positive multiple of 16) and r < rows, rows being 16 or the set's mr
	// (12 for AVX-512, 6 for AVX2); nil when absent.
	transpose func(src []float32, lds int, dst []float32, ldd, k, rows int)
	// packRuns writes dst[q·kc·w + p·w + r] = src[p·ps + q·w + r] for
	// q < panels, p < kc, r < w (panels, kc ≥ 1): packDepthRuns on
	// depth-contiguous rows, one whole panel after another. It returns
	// false (writing nothing) for a w it has no kernel for; nil when absent.
	packRuns func(dst, src []float32, ps, kc, panels, w int) bool
	// peak runs n rounds of peakFlops register-only floating-point
	// operations (the FMA peak benchmark).
	peak      func(n int)
	peakFlops int
}

// Blocking of the packed algorithm: kc is the depth of a packed slice,
// mc the rows of A packed at once, nc the columns of B packed at once.
type gemmBlocking struct{ kc, mc, nc int }

func (ks *gemmKernelSet) blocking() gemmBlocking {
	// An mc×kc block of A stays in L2 (96·384·4 B = 144 KiB), the kc×nc
	// block of B in L2/L3 (2.25 MiB); the kc×nr micro-panel of B (48 KiB)
	// streams from L2 with the hardware prefetcher. Tuned on Zen 4 (1 MiB
	// L2) in thread CPU time (BenchmarkGemmCPUTime): 85–95% of the FMA
	// peak of one core from 256³ to 2048×896×4864.
	//
	// AVX2 (6×16 tiles; checked on Zen 3: 32 KiB L1D, 512 KiB L2): kc 256
	// keeps the B micro-panel (16 KiB) and an A micro-panel (6 KiB) in L1
	// together; mc from 48 to 288 and nc from 256 to 4096 measured within
	// the noise of one another at 1024³ (the B block then streams from L3
	// with the hardware prefetcher either way). kc is also the depth of the
	// slices each output is summed in, so changing it would change results.
	switch ks.mr {
	case 12:
		return gemmBlocking{kc: 384, mc: 96, nc: 1536}
	default:
		return gemmBlocking{kc: 256, mc: 96, nc: 1024}
	}
}

// goGemmKernels is the portable implementation, also the reference the
// assembly is tested against.
var goGemmKernels = &gemmKernelSet{name: "go", mr: 4, nr: 8, micro: microGo}

// gemmKernels is the set used by Gemm.Run: the best one this CPU runs.
var gemmKernels = func() *gemmKernelSet {
	if s := gemmAsmSets(); len(s) > 0 {
		return s[0]
	}
	return goGemmKernels
}()

// GemmKernelName reports which GEMM kernels run ("avx512", "avx2" or "go").
func GemmKernelName() string { return gemmKernels.name }

// microGo is the 4×8 micro-kernel in Go (the micro contract of
// gemmKernelSet).
func microGo(k int, a, b []float32, ldb int, c []float32, ldc int, acc bool) {
	var t [4][8]float32
	for p := range k {
		ap := a[p*4 : p*4+4 : p*4+4]
		bp := b[p*ldb : p*ldb+8 : p*ldb+8]
		for i, av := range ap {
			ti := &t[i]
			for j, bv := range bp {
				ti[j] += av * bv
			}
		}
	}
	for i := range 4 {
		ci := c[i*ldc : i*ldc+8 : i*ldc+8]
		if acc {
			for j := range ci {
				ci[j] += t[i][j]
			}
		} else {
			copy(ci, t[i][:])
		}
	}
}

// gemmScratch holds one worker's packing buffers.
type gemmScratch struct {
	a, b, tile, tmp []float32
}

var gemmScratchPool = sync.Pool{New: func() any { return new(gemmScratch) }}

// roundUp returns n rounded up to a multiple of m (n ≥ 0, m > 0).
func roundUp(n, m int) int { return (n + m - 1) / m * m }

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// gemmTask is a rectangle of the output of one batch entry.
type gemmTask struct{ b, i0, i1, j0, j1 int }

// gemmSmallM is the largest M served by the dot kernels (measured: they
// beat packing up to M = 16 when the weights are read once per row block).
const gemmSmallM = 16

func (g *Gemm) run(out []float32, ks *gemmKernelSet) {
	m, n, k := g.M, g.N, g.K
	if g.Batch == 0 || m == 0 || n == 0 {
		return
	}
	size := g.Batch * m * n
	if k == 0 {
		if !g.Accumulate {
			clear(out[:size])
		}
		return
	}
	dot := ks.dot4x4 != nil && m <= gemmSmallM && k >= ks.dotAlign &&
		g.A.ColStride == 1 && g.A.F32 != nil && g.B.RowStride == 1
	workers := Workers(g.Workers)
	// Work units: whole batch entries when there are enough of them,
	// otherwise column ranges (then row ranges) of each entry. A few more
	// tasks than workers keep both cores busy when one is slowed down.
	align := ks.nr
	if dot {
		align = 8
	}
	flops := 2 * g.Batch * m * n * k
	var tasks []gemmTask
	// With the entries split along one side, every task would pack the
	// whole of the other operand (all of A for a column range): then that
	// operand is packed once, by all workers, before the tasks run.
	var pre gemmPre
	switch {
	case workers == 1 || flops < 1<<17:
		tasks = make([]gemmTask, g.Batch)
		for b := range tasks {
			tasks[b] = gemmTask{b, 0, m, 0, n}
		}
		workers = 1
	case g.Batch >= 2*workers:
		tasks = make([]gemmTask, g.Batch)
		for b := range tasks {
			tasks[b] = gemmTask{b, 0, m, 0, n}
		}
	default:
		// Each task packs its rows of A and its columns of B, so split
		// the longer side: the other operand is packed once for all
		// tasks (below). That side is cut into up to gemmTasksPerWorker
		// ranges a worker, so that when another process takes cycles
		// from one core the other takes more of the ranges (with two
		// ranges a worker, a core at half speed left the product ≈ 12%
		// slower than its share of work; with eight, ≈ 3%). Only when
		// the longer side cannot give two ranges a worker is the other
		// side split too (each task then packs its part of both).
		minPer := (2*workers + g.Batch - 1) / g.Batch
		perEntry := (gemmTasksPerWorker*workers + g.Batch - 1) / g.Batch
		rows, cols := 1, 1
		if dot || n >= m {
			cols = max(1, min(perEntry, (n+align-1)/align))
			if cols < minPer && !dot {
				rows = max(1, min((minPer+cols-1)/cols, (m+ks.mr-1)/ks.mr))
			}
		} else {
			rows = max(1, min(perEntry, (m+ks.mr-1)/ks.mr))
			if rows < minPer {
				cols = max(1, min((minPer+rows-1)/rows, (n+align-1)/align))
			}
		}
		for b := range g.Batch {
			for r := range rows {
				i0, i1 := splitRange(m, rows, r, ks.mr)
				for c := range cols {
					j0, j1 := splitRange(n, cols, c, align)
					if i0 < i1 && j0 < j1 {
						tasks = append(tasks, gemmTask{b, i0, i1, j0, j1})
					}
				}
			}
		}
		if !dot && len(tasks) > 1 {
			switch {
			case rows == 1 && cols > 1:
				pre.a = g.prepack(&g.A, g.A.RowStride, g.A.ColStride, m, ks.mr, workers, ks)
			case cols == 1 && rows > 1:
				pre.b = g.prepack(&g.B, g.B.ColStride, g.B.RowStride, n, ks.nr, workers, ks)
			}
		}
	}
	workers = min(workers, len(tasks))
	gemmParallel(workers, len(tasks), func(s *gemmScratch, t int) {
		if dot {
			g.dotTask(out, ks, s, tasks[t])
		} else {
			g.packedTask(out, ks, s, tasks[t], &pre)
		}
	})
	pre.release()
}

// gemmTasksPerWorker is how many ranges a worker's share of a product's
// longer side is cut into (see Gemm.run).
const gemmTasksPerWorker = 8

// gemmParallel runs fn(s, i) for i < n on workers goroutines (the caller's
// among them), each taking the next i in turn with its own scratch s.
func gemmParallel(workers, n int, fn func(s *gemmScratch, i int)) {
	var next atomic.Int64
	work := func() {
		s := gemmScratchPool.Get().(*gemmScratch)
		for {
			i := int(next.Add(1)) - 1
			if i >= n {
				break
			}
			fn(s, i)
		}
		gemmScratchPool.Put(s)
	}
	if workers <= 1 || n <= 1 {
		work()
		return
	}
	var wg sync.WaitGroup
	for range min(workers, n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// gemmPrepacked is one operand of a product packed for all its tasks: for
// batch entry b and the depth slice at pc (of kcs ≤ kc terms), the rows of
// A (columns of B) in panels of w, as packPanels writes them, start at
// data[b·pad·K + pc·pad] (pad: rows rounded up to w), so the panels from
// row r0 (a multiple of w) start at r0·kcs from there.
type gemmPrepacked struct {
	data []float32
	pad  int
}

// slice returns the packed panels of entry b, depth slice pc, from row r0.
func (p *gemmPrepacked) slice(b, pc, r0, k, kcs int) []float32 {
	return p.data[b*p.pad*k+pc*p.pad+r0*kcs:]
}

// gemmPre holds the operands packed before the tasks run (nil: each task
// packs its own).
type gemmPre struct{ a, b *gemmPrepacked }

func (p *gemmPre) release() {
	for _, q := range []*gemmPrepacked{p.a, p.b} {
		if q != nil {
			gemmPrepackPool.Put(q)
		}
	}
}

var gemmPrepackPool = sync.Pool{New: func() any { return new(gemmPrepacked) }}

// gemmPrepackMax bounds the floats of a prepacked operand (64 MiB); a
// larger one is packed by each task as before.
const gemmPrepackMax = 1 << 24

// gemmPrepackRows is the row chunk packed as one unit of work (a multiple
// of every panel width; whole depth runs for a depth-major operand, as
// packedTask's gemmWholeARows).
const gemmPrepackRows = gemmWholeARows

// prepack packs every entry's rows [0, rows) × depth [0, K) of op, whose
// element (r, p) is at Offset + b·BatchStride + r·rs + p·ps, in panels of w
// for each depth slice of the blocking's kc, on workers goroutines; nil
// when that would exceed gemmPrepackMax floats.
func (g *Gemm) prepack(op *Operand, rs, ps, rows, w, workers int, ks *gemmKernelSet) *gemmPrepacked {
	k, kc := g.K, ks.blocking().kc
	pad := roundUp(rows, w)
	if g.Batch*pad*k > gemmPrepackMax {
		return nil
	}
	p := gemmPrepackPool.Get().(*gemmPrepacked)
	p.data = growF32(p.data, g.Batch*pad*k)
	p.pad = pad
	nSlices := (k + kc - 1) / kc
	chunks := (rows + gemmPrepackRows - 1) / gemmPrepackRows
	gemmParallel(workers, g.Batch*nSlices*chunks, func(s *gemmScratch, u int) {
		b, pc, r0 := u/(nSlices*chunks), u/chunks%nSlices*kc, u%chunks*gemmPrepackRows
		kcs := min(kc, k-pc)
		s.tmp = growF32(s.tmp, max(kc, w))
		packPanels(p.slice(b, pc, r0, k, kcs), op, op.Offset+b*op.BatchStride+r0*rs+pc*ps, rs, ps,
			min(gemmPrepackRows, rows-r0), kcs, w, s.tmp, ks)
	})
	return p
}

// splitRange returns the part-th of parts contiguous ranges of [0, n) whose
// inner boundaries are multiples of align.
func splitRange(n, parts, part, align int) (lo, hi int) {
	units := (n + align - 1) / align
	per, extra := units/parts, units%parts
	lo = (part*per + min(part, extra)) * align
	hi = lo + per*align
	if part < extra {
		hi += align
	}
	return min(lo, n), min(hi, n)
}

// packedTask runs the BLIS loops over one output rectangle, packing A and B
// as it goes unless pre holds them packed.
func (g *Gemm) packedTask(out []float32, ks *gemmKernelSet, s *gemmScratch, t gemmTask, pre *gemmPre) {
	mr, nr := ks.mr, ks.nr
	bl := ks.blocking()
	n, k := g.N, g.K
	ldc := n
	cBase := t.b * g.M * n
	aBase := g.A.Offset + t.b*g.A.BatchStride
	bBase := g.B.Offset + t.b*g.B.BatchStride
	ncMax := min(bl.nc, t.j1-t.j0)
	mcMax := min(bl.mc, t.i1-t.i0)
	kcMax := min(bl.kc, k)
	// A stored depth-major (each depth's rows contiguous: the activations
	// or output gradient of a weight gradient, contracted over their
	// leading token axes) is packed in chunks of up to gemmWholeARows rows
	// (whole mc blocks) once per depth slice, so each depth is read as one
	// sequential run rather than one short run per mc block; the short
	// runs, a row length apart, defeat the hardware prefetcher
	// (BenchmarkGemmLayoutCPUTime, layout TN). The mc blocks and their
	// order are the same either way, so results do not change.
	wholeA := pre.a == nil && g.A.F32 != nil && g.A.RowStride == 1 && g.A.ColStride != 1 && t.i1-t.i0 > bl.mc
	chunk := bl.mc
	if wholeA {
		chunk = gemmWholeARows / bl.mc * bl.mc
		mcMax = min(chunk, t.i1-t.i0)
	}
	if pre.b == nil {
		s.b = growF32(s.b, kcMax*((ncMax+nr-1)/nr*nr))
	}
	if pre.a == nil {
		s.a = growF32(s.a, kcMax*((mcMax+mr-1)/mr*mr))
	}
	s.tile = growF32(s.tile, mr*nr)
	s.tmp = growF32(s.tmp, max(kcMax, mr, nr))
	for jc := t.j0; jc < t.j1; jc += bl.nc {
		nc := min(bl.nc, t.j1-jc)
		for pc := 0; pc < k; pc += bl.kc {
			kc := min(bl.kc, k-pc)
			acc := g.Accumulate || pc > 0
			// B panel: row r of the panel set is column jc+r of B.
			pb := s.b
			if pre.b != nil {
				pb = pre.b.slice(t.b, pc, jc, k, kc)
			} else {
				packPanels(s.b, &g.B, bBase+jc*g.B.ColStride+pc*g.B.RowStride, g.B.ColStride, g.B.RowStride, nc, kc, nr, s.tmp, ks)
			}
			for ic := t.i0; ic < t.i1; ic += bl.mc {
				mc := min(bl.mc, t.i1-ic)
				pa := s.a // this block's panels
				if off := (ic - t.i0) % chunk; pre.a != nil {
					pa = pre.a.slice(t.b, pc, ic, k, kc)
				} else if wholeA {
					if off == 0 {
						rows := min(chunk, t.i1-ic)
						packPanels(s.a, &g.A, aBase+ic*g.A.RowStride+pc*g.A.ColStride, g.A.RowStride, g.A.ColStride, rows, kc, mr, s.tmp, ks)
					}
					pa = s.a[off*kc:] // mc is a multiple of mr
				} else {
					packPanels(s.a, &g.A, aBase+ic*g.A.RowStride+pc*g.A.ColStride, g.A.RowStride, g.A.ColStride, mc, kc, mr, s.tmp, ks)
				}
				for jr := 0; jr < nc; jr += nr {
					bp := pb[jr*kc : (jr+nr)*kc]
					nn := min(nr, nc-jr)
					for ir := 0; ir < mc; ir += mr {
						ap := pa[ir*kc : (ir+mr)*kc]
						mm := min(mr, mc-ir)
						c0 := cBase + (ic+ir)*ldc + jc + jr
						if mm == mr && nn == nr {
							ks.micro(kc, ap, bp, nr, out[c0:], ldc, acc)
							continue
						}
						ks.micro(kc, ap, bp, nr, s.tile, nr, false)
						for i := range mm {
							dst := out[c0+i*ldc : c0+i*ldc+nn]
							src := s.tile[i*nr : i*nr+nn]
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
	}
}

// gemmWholeARows bounds the rows of A packed at once for a depth-major A
// (1536·384·4 B = 2.25 MiB, the size of a packed B block); a longer row
// range (the 25M model's output layer: 16384 vocabulary rows) is packed in
// chunks of this many rows.
const gemmWholeARows = 1536

// packPanels packs rows [0, rows) × depth [0, kc) of a matrix view into
// panels of w rows: dst[q·kc·w + p·w + r] = X(q·w + r, p), zero rows
// padding the last panel, where X(r, p) is op's element
// base + r·rs + p·ps.
func packPanels(dst []float32, op *Operand, base, rs, ps, rows, kc, w int, tmp []float32, ks *gemmKernelSet) {
	// Fast path: k-contiguous float32 rows transposed in registers (16×16
	// blocks with AVX-512, 8×8 with AVX2).
	k16 := kc &^ 15
	fast := ks.transpose != nil && op.F32 != nil && ps == 1 && k16 > 0 && (w == ks.mr || w%16 == 0)
	full := rows / w * w
	if ps != 1 && rs == 1 && op.F32 != nil && full > 0 {
		// The rows of one depth p are contiguous: one pass over p copies
		// them into every full panel (reading each source row once).
		//
		// The panel widths of the kernel sets (mr 12 and 6, nr 32 and
		// 16) are copied as fixed-size arrays: copy() of a few dozen
		// bytes calls runtime.memmove once per panel row, which halved the
		// rate of the output layer's weight gradient (TN, 16384 rows).
		// The assembly sets move them with packRuns instead (blocks of 8
		// depth steps, each panel's runs written contiguously; on Zen 3
		// 3–6× fewer CPU-ns per element than packDepthRuns on the 25M
		// model's weight gradients, whose Go copies go through memmove).
		if ks.packRuns == nil || !ks.packRuns(dst, op.F32[base:], ps, kc, full/w, w) {
			packDepthRuns(dst, op.F32, base, ps, full, kc, w)
		}
		if full < rows {
			packPanelsSlow(dst[full*kc:], op, base+full*rs, rs, ps, rows-full, kc, w, tmp)
		}
		return
	}
	for q0 := 0; q0 < rows; q0 += w {
		panel := dst[q0*kc : (q0+w)*kc]
		h := min(w, rows-q0)
		if fast && h == w {
			for r0 := 0; r0 < w; r0 += 16 {
				src := op.F32[base+(q0+r0)*rs:]
				ks.transpose(src, rs, panel[r0:], w, k16, min(16, w-r0))
			}
			for r := 0; r < w && k16 < kc; r++ {
				src := op.F32[base+(q0+r)*rs+k16 : base+(q0+r)*rs+kc]
				d := panel[k16*w+r:]
				for p, x := range src {
					d[p*w] = x
				}
			}
			continue
		}
		packPanelsSlow(panel, op, base+q0*rs, rs, ps, h, kc, w, tmp)
	}
}

// packDepthRuns is packPanels' depth-contiguous case for panels of w rows:
// dst[q0·kc + p·w + r] = src[base + p·ps + q0 + r] for p < kc and
// q0 + r < full (a multiple of w), runs of the kernel sets' widths moved as
// fixed-size arrays: the Go set's packing and the reference of packRuns.
func packDepthRuns(dst, src []float32, base, ps, full, kc, w int) {
	for p := range kc {
		s := src[base+p*ps : base+p*ps+full]
		d := dst[p*w:]
		switch w {
		case 12:
			for q0 := 0; q0 < full; q0 += 12 {
				*(*[12]float32)(d[q0*kc:]) = *(*[12]float32)(s[q0:])
			}
		case 32:
			for q0 := 0; q0 < full; q0 += 32 {
				*(*[32]float32)(d[q0*kc:]) = *(*[32]float32)(s[q0:])
			}
		case 16:
			for q0 := 0; q0 < full; q0 += 16 {
				*(*[16]float32)(d[q0*kc:]) = *(*[16]float32)(s[q0:])
			}
		case 6:
			for q0 := 0; q0 < full; q0 += 6 {
				*(*[6]float32)(d[q0*kc:]) = *(*[6]float32)(s[q0:])
			}
		default:
			for q0 := 0; q0 < full; q0 += w {
				copy(d[q0*kc:q0*kc+w], s[q0:q0+w])
			}
		}
	}
}

// packPanelsSlow packs one panel of h ≤ w rows element by element (any
// layout, BF16 included), zero-padding rows h…w−1.
func packPanelsSlow(panel []float32, op *Operand, base, rs, ps, h, kc, w int, tmp []float32) {
	for r := range h {
		v := op.run(base+r*rs, ps, kc, tmp)
		d := panel[r:]
		for p, x := range v {
			d[p*w] = x
		}
	}
	if h < w {
		for p := range kc {
			clear(panel[p*w+h : p*w+w])
		}
	}
}

// dotTask computes one output rectangle with the dot kernels: A rows and B
// columns (W rows) are both k-contiguous.
func (g *Gemm) dotTask(out []float32, ks *gemmKernelSet, s *gemmScratch, t gemmTask) {
	m, n, k := g.M, g.N, g.K
	ka := k / ks.dotAlign * ks.dotAlign
	lda, ldw := g.A.RowStride, g.B.ColStride
	a := g.A.F32[g.A.Offset+t.b*g.A.BatchStride:]
	wBase := g.B.Offset + t.b*g.B.BatchStride
	c := out[t.b*m*n:]
	// W rows are taken in blocks (converted from BF16 into scratch when
	// needed) so a block stays in L2 while every A row passes over it.
	blk := max(8, (256<<10)/(4*k)&^7)
	var w []float32
	for j0 := t.j0; j0 < t.j1; j0 += blk {
		j1 := min(t.j1, j0+blk)
		nb := j1 - j0
		var wOff, ldwb int
		if g.B.F32 != nil {
			w, wOff, ldwb = g.B.F32, wBase+j0*ldw, ldw
		} else {
			s.b = growF32(s.b, nb*k)
			for j := range nb {
				DecodeBF16(s.b[j*k:(j+1)*k], g.B.BF16[wBase+(j0+j)*ldw:])
			}
			w, wOff, ldwb = s.b, 0, k
		}
		dotBlockGemm(c, n, a, lda, m, w[wOff:], ldwb, j0, nb, k, ka, ks, g.Accumulate)
	}
}

// dotBlockGemm writes (or with acc adds) c[i·ldc + j0 + j] = ⟨a_i, w_j⟩
// for i < m, j < nb, with the kernels over the first ka (aligned) terms and
// Go for the rest.
func dotBlockGemm(c []float32, ldc int, a []float32, lda, m int, w []float32, ldw, j0, nb, k, ka int, ks *gemmKernelSet, acc bool) {
	put := func(dst *float32, v float32) {
		if acc {
			*dst += v
		} else {
			*dst = v
		}
	}
	var t16 [16]float32
	var t8 [8]float32
	m4 := m &^ 3
	j := 0
	for ; j+8 <= nb; j += 8 {
		wj := w[j*ldw:]
		for i := 0; i < m4; i += 4 {
			ai := a[i*lda:]
			for h := 0; h < 8; h += 4 {
				ks.dot4x4(ka, ai, lda, wj[h*ldw:], ldw, &t16)
				for ii := range 4 {
					row := c[(i+ii)*ldc+j0+j+h : (i+ii)*ldc+j0+j+h+4]
					for jj := range 4 {
						put(&row[jj], t16[ii*4+jj]+tailDotGemm(ai[ii*lda+ka:ii*lda+k], wj[(h+jj)*ldw+ka:]))
					}
				}
			}
		}
		for i := m4; i < m; i++ {
			ai := a[i*lda:]
			ks.dot1x8(ka, ai, wj, ldw, &t8)
			row := c[i*ldc+j0+j : i*ldc+j0+j+8]
			for jj := range 8 {
				put(&row[jj], t8[jj]+tailDotGemm(ai[ka:k], wj[jj*ldw+ka:]))
			}
		}
	}
	for ; j < nb; j++ {
		wj := w[j*ldw : j*ldw+k]
		for i := range m {
			put(&c[i*ldc+j0+j], Dot(a[i*lda:i*lda+k], wj))
		}
	}
}

// tailDotGemm returns Σ a[p]·w[p] over len(a) terms.
func tailDotGemm(a, w []float32) float32 {
	var s float32
	w = w[:len(a)]
	for p, v := range a {
		s += v * w[p]
	}
	return s
}
