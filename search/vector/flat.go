package vector

import (
	"errors"
	"fmt"

	"github.com/cas-engine/cas/tensor"
)

// Flat is an exact (brute-force) index, like FAISS's IndexFlatIP and
// IndexFlatL2: every query is scored against every stored vector.
//
// Vectors are stored as F32, F16 (half the memory; scores computed on the
// rounded vectors) or SQ8 (a quarter; needs Train to fit the per-dimension
// ranges). Scoring runs blocked kernels from package tensor: one query
// streams the rows at memory bandwidth, a batch shares each L2-resident tile
// of rows between all queries (3×4 register blocks), and an F32 batch of 16
// or more queries runs on the tensor GEMM fused with the top-k selection
// (flat_gemm.go).
type Flat struct {
	d      int
	metric Metric
	codes  vecCodes
	sq     *tensor.SQ8 // SQ8 ranges; nil until trained
	ids    []int64     // nil: the id of row j is j
	norms  []float32   // L2 only: ‖x̂_j‖²
	closer func() error
	// screen chooses the AMX-BF16 screened path of F32 batches
	// (flat_screen.go); screenStats counts its queries and fallbacks.
	screen      screenMode
	screenStats screenCounters
}

// NewFlat returns an empty flat index of dimension d.
func NewFlat(d int, metric Metric, enc Encoding) (*Flat, error) {
	if d <= 0 || d > maxDim {
		return nil, fmt.Errorf("flat index: dimension %d outside 1…%d", d, maxDim)
	}
	if err := checkMetric(metric); err != nil {
		return nil, fmt.Errorf("flat index: %w", err)
	}
	if err := checkEncoding(enc); err != nil {
		return nil, fmt.Errorf("flat index: %w", err)
	}
	return &Flat{d: d, metric: metric, codes: newVecCodes(enc, d)}, nil
}

// maxDim bounds the dimension of any index (FAISS has no limit; 65,536
// covers every embedding model and keeps sizes far from overflow).
const maxDim = 1 << 16

// Dim is the vector dimension.
func (f *Flat) Dim() int { return f.d }

// Len is the number of stored vectors.
func (f *Flat) Len() int { return f.codes.n }

// Metric is the comparison the index ranks by.
func (f *Flat) Metric() Metric { return f.metric }

// Encoding is the storage of the vectors.
func (f *Flat) Encoding() Encoding { return f.codes.enc }

// IsTrained is false only for an SQ8 index before Train.
func (f *Flat) IsTrained() bool { return f.codes.enc != SQ8 || f.sq != nil }

// SQ8Params returns the scalar quantizer of an SQ8 index (nil otherwise).
func (f *Flat) SQ8Params() *tensor.SQ8 { return f.sq }

// String describes the index.
func (f *Flat) String() string {
	return fmt.Sprintf("Flat(d=%d, n=%d, metric=%v, encoding=%v)", f.d, f.Len(), f.metric, f.codes.enc)
}

// Train fits the SQ8 ranges to x; for F32 and F16 there is nothing to learn
// and x is only checked. An SQ8 index can be trained only while empty.
func (f *Flat) Train(x []float32) error {
	n, err := checkVectors("train", x, f.d)
	if err != nil {
		return err
	}
	if f.codes.enc != SQ8 {
		return nil
	}
	if f.Len() > 0 {
		return errors.New("train: the SQ8 index already holds vectors")
	}
	if n == 0 {
		return errors.New("train: no vectors")
	}
	sq, err := tensor.TrainSQ8(x, f.d)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	f.sq = sq
	return nil
}

// Reserve makes room for n more vectors, so that adding a known number of
// vectors allocates once (no transient doubling of a large index).
func (f *Flat) Reserve(n int) {
	if n <= 0 {
		return
	}
	f.codes.reserve(n)
	if f.ids != nil && cap(f.ids) < len(f.ids)+n {
		f.ids = append(make([]int64, 0, len(f.ids)+n), f.ids...)
	}
	if f.metric == L2 && cap(f.norms) < len(f.norms)+n {
		f.norms = append(make([]float32, 0, len(f.norms)+n), f.norms...)
	}
}

// Add encodes and appends the vectors of x with the given ids (nil: their
// positions). Once an explicit id has been given, every vector has one.
func (f *Flat) Add(ids []int64, x []float32) error {
	n, err := checkAdd(ids, x, f.d, f.IsTrained())
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	start := f.Len()
	if ids != nil && f.ids == nil {
		f.ids = make([]int64, start, start+n)
		for j := range f.ids {
			f.ids[j] = int64(j)
		}
	}
	if f.ids != nil {
		if ids != nil {
			f.ids = append(f.ids, ids...)
		} else {
			for j := range n {
				f.ids = append(f.ids, int64(start+j))
			}
		}
	}
	f.codes.appendVectors(x, f.sq)
	if f.metric == L2 {
		f.norms = appendNorms(f.norms, &f.codes, start, f.Len(), f.sq)
	}
	return nil
}

// appendNorms appends ‖x̂_j‖² of the decoded rows [lo, hi) of c.
func appendNorms(norms []float32, c *vecCodes, lo, hi int, sq *tensor.SQ8) []float32 {
	const chunk = 1024
	buf := make([]float32, min(chunk, hi-lo)*c.d)
	for a := lo; a < hi; a += chunk {
		b := min(hi, a+chunk)
		c.decode(buf, a, b, sq)
		old := len(norms)
		norms = growSlice(norms, b-a)
		tensor.SquaredNorms(norms[old:], buf[:(b-a)*c.d], c.d)
	}
	return norms
}

// ID returns the id of stored row j.
func (f *Flat) ID(j int) int64 {
	if f.ids == nil {
		return int64(j)
	}
	return f.ids[j]
}

// Reconstruct writes the (decoded) vector of row j into dst[:Dim()].
func (f *Flat) Reconstruct(j int, dst []float32) error {
	if j < 0 || j >= f.Len() {
		return fmt.Errorf("reconstruct: row %d outside 0…%d", j, f.Len()-1)
	}
	if len(dst) < f.d {
		return fmt.Errorf("reconstruct: destination holds %d values, need %d", len(dst), f.d)
	}
	f.codes.decode(dst, j, j+1, f.sq)
	return nil
}

// Close releases the memory map of an opened index.
func (f *Flat) Close() error {
	return release(&f.closer)
}

// release calls *closer (the unmapping of an opened index) once and clears
// it; nil releases nothing.
func release(closer *func() error) error {
	if *closer == nil {
		return nil
	}
	c := *closer
	*closer = nil
	return c()
}

// preparedQueries are a batch in the kernels' form (see prepQuery).
type preparedQueries struct {
	nq   int
	qv   []float32 // nq × d
	bias []float32 // per query
	base []float32 // L2: ‖q‖²
	qb   []uint16  // qv in bfloat16 (F16 codes scored by scanBF16)
	// left is qv packed once for the F32 GEMM (scanGEMM).
	left tensor.PackedLeft
}

func prepareQueries(q []float32, nq, d int, enc Encoding, sq *tensor.SQ8, m Metric) preparedQueries {
	p := preparedQueries{nq: nq, qv: make([]float32, nq*d), bias: make([]float32, nq)}
	for i := range nq {
		p.bias[i] = prepQuery(enc, sq, p.qv[i*d:(i+1)*d], q[i*d:(i+1)*d])
	}
	if m == L2 {
		p.base = make([]float32, nq)
		tensor.SquaredNorms(p.base, q, d)
	}
	return p
}

func (p *preparedQueries) baseOf(i int) float32 {
	if p.base == nil {
		return 0
	}
	return p.base[i]
}

// Search returns the k nearest stored vectors of each query (see Index).
// The rows are split over p.Threads goroutines; the result is identical
// for any thread count.
func (f *Flat) Search(q []float32, k int, p *SearchParams) ([]float32, []int64, error) {
	return f.search(q, k, p, true)
}

// search is Search; gemm lets F32 batches use the GEMM (flat_gemm.go). The
// IVF's coarse quantizer passes false, so that an IVF result never depends
// on how its queries are batched.
func (f *Flat) search(q []float32, k int, p *SearchParams, gemm bool) ([]float32, []int64, error) {
	nq, err := checkSearch(q, k, f.d)
	if err != nil {
		return nil, nil, err
	}
	if !f.IsTrained() {
		return nil, nil, fmt.Errorf("search: %w", ErrNotTrained)
	}
	scores := make([]float32, nq*k)
	ids := make([]int64, nq*k)
	// Large batches go in blocks of queries, which bounds the score
	// buffers; each block still shares every row tile among its queries.
	const block = 1024
	for lo := 0; lo < nq; lo += block {
		hi := min(nq, lo+block)
		if gemm && f.useScreen(hi-lo) {
			f.searchScreened(q[lo*f.d:hi*f.d], hi-lo, k, p, scores[lo*k:hi*k], ids[lo*k:hi*k])
			continue
		}
		f.searchBlock(q[lo*f.d:hi*f.d], hi-lo, k, p, gemm && f.useGEMM(hi-lo), scores[lo*k:hi*k], ids[lo*k:hi*k])
	}
	return scores, ids, nil
}

// searchBlock searches nq queries, writing into scores and ids.
func (f *Flat) searchBlock(q []float32, nq, k int, p *SearchParams, gemm bool, scores []float32, ids []int64) {
	pq := prepareQueries(q, nq, f.d, f.codes.enc, f.sq, f.metric)
	if gemm {
		pq.packForGEMM(f)
	}
	n := f.Len()
	workers := tensor.Workers(p.threads())
	// Below ~4k rows per goroutine the start-up is not worth it.
	workers = max(1, min(workers, n/4096))
	// Chunks of rows are handed out dynamically: about 16 per worker, at
	// least 4096 rows, a multiple of 64 (of the GEMM's tile when it runs,
	// so that no tile is cut short at a chunk's end).
	align := 64
	if gemm {
		align = gemmTileRows(f.d)
	}
	chunk := max(4096, (n/(16*workers)+align-1)/align*align)
	heaps := make([][]*tensor.TopK, workers)
	scratch := make([]gemmScratch, workers)
	forChunks(n, chunk, workers, func(w, lo, hi int) {
		hs := heaps[w]
		if hs == nil {
			hs = make([]*tensor.TopK, nq)
			for i := range hs {
				hs[i] = tensor.NewTopK(k)
			}
			heaps[w] = hs
		}
		if gemm {
			f.scanGEMM(hs, &pq, &scratch[w], lo, hi)
		} else {
			f.scan(hs, &pq, lo, hi)
		}
	})
	writeMerged(f.metric, heaps, nq, k, scores, ids)
}

// scan scores rows [lo, hi) for every prepared query and offers them to the
// per-query selections hs.
func (f *Flat) scan(hs []*tensor.TopK, pq *preparedQueries, lo, hi int) {
	d := f.d
	if pq.nq < 3 {
		const tile = 1024
		buf := make([]float32, min(tile, hi-lo))
		for r0 := lo; r0 < hi; r0 += tile {
			r1 := min(hi, r0+tile)
			raw := buf[:r1-r0]
			for i := range pq.nq {
				f.codes.dotRows(raw, pq.qv[i*d:(i+1)*d], r0, r1)
				f.offer(hs[i], raw, pq.bias[i], pq.baseOf(i), r0, r1)
			}
		}
		return
	}
	tile := tileRows(d)
	buf := make([]float32, pq.nq*tile)
	var scratch []float32
	for r0 := lo; r0 < hi; r0 += tile {
		r1 := min(hi, r0+tile)
		scratch = f.codes.dotBlock(buf, tile, pq.qv, pq.nq, r0, r1, scratch)
		for i := range pq.nq {
			f.offer(hs[i], buf[i*tile:i*tile+(r1-r0)], pq.bias[i], pq.baseOf(i), r0, r1)
		}
	}
}

// offer converts raw values of rows [r0, r1) to keys and pushes them.
func (f *Flat) offer(t *tensor.TopK, raw []float32, bias, base float32, r0, r1 int) {
	var norms []float32
	if f.metric == L2 {
		norms = f.norms[r0:r1]
	}
	toKeys(f.metric, raw, bias, base, norms)
	if f.ids == nil {
		t.PushRows(raw, int64(r0))
	} else {
		t.PushIDs(raw, f.ids[r0:r1])
	}
}
