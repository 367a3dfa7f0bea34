package vector

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cas-engine/cas/tensor"
)

// IVFOptions configure a new IVF index.
type IVFOptions struct {
	// Metric of the index (and of its coarse quantizer).
	Metric Metric
	// Encoding of the vectors in the inverted lists. SQ8 codes the
	// residual x − c of each vector to its list centroid c (FAISS's
	// by_residual), which narrows the quantized range.
	Encoding Encoding
	// NProbe is the default number of lists a search visits (≤ 0: 1).
	NProbe int
	// KMeans trains the coarse quantizer. Its Metric is set to the
	// index's; for inner product the k-means is spherical (centroids
	// renormalised), as FAISS's IndexIVF does for METRIC_INNER_PRODUCT.
	KMeans KMeansOptions
	// Progress, when non-nil, receives the k-means progress bar of Train.
	Progress io.Writer
}

// IVF is an inverted-file index (FAISS's IndexIVFFlat and
// IndexIVFScalarQuantizer): a coarse quantizer — a Flat index of nlist
// k-means centroids — assigns every vector to its nearest centroid's list;
// a search scores the query against the centroids, visits the nprobe best
// lists and scans only their vectors.
//
// Each list stores its vectors contiguously (F32, F16 or SQ8 codes) with
// their ids. A batch search groups the (query, list) pairs by list, so each
// list is read from memory once per batch and scanned with the blocked
// multi-query kernel.
type IVF struct {
	d         int
	nlist     int
	metric    Metric
	enc       Encoding
	residual  bool
	nprobe    int
	quantizer *Flat
	sq        *tensor.SQ8
	lists     []ivfList
	ntotal    int
	kmeans    KMeansOptions
	progress  io.Writer
	closer    func() error
}

// ivfList is one inverted list.
type ivfList struct {
	codes vecCodes
	ids   []int64
	norms []float32 // L2 only: ‖x̂‖² (of the residual when residual)
}

// checkIVFShape checks the arguments every inverted-file index takes: the
// dimension d, the list count nlist and the metric; kind prefixes errors.
func checkIVFShape(kind string, d, nlist int, m Metric) error {
	if d <= 0 || d > maxDim {
		return fmt.Errorf("%s: dimension %d outside 1…%d", kind, d, maxDim)
	}
	if nlist <= 0 || nlist > 1<<24 {
		return fmt.Errorf("%s: nlist %d outside 1…%d", kind, nlist, 1<<24)
	}
	if err := checkMetric(m); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	return nil
}

// NewIVF returns an untrained IVF index with nlist lists.
func NewIVF(d, nlist int, opt IVFOptions) (*IVF, error) {
	if err := checkIVFShape("ivf index", d, nlist, opt.Metric); err != nil {
		return nil, err
	}
	if err := checkEncoding(opt.Encoding); err != nil {
		return nil, fmt.Errorf("ivf index: %w", err)
	}
	km := opt.KMeans
	km.Metric = opt.Metric
	km.Spherical = opt.Metric == InnerProduct
	ix := &IVF{
		d: d, nlist: nlist, metric: opt.Metric, enc: opt.Encoding,
		residual: opt.Encoding == SQ8,
		nprobe:   max(1, opt.NProbe),
		kmeans:   km, progress: opt.Progress,
	}
	ix.initLists()
	return ix, nil
}

func (ix *IVF) initLists() {
	ix.lists = make([]ivfList, ix.nlist)
	for i := range ix.lists {
		ix.lists[i].codes = newVecCodes(ix.enc, ix.d)
	}
}

// Dim is the vector dimension.
func (ix *IVF) Dim() int { return ix.d }

// Len is the number of stored vectors.
func (ix *IVF) Len() int { return ix.ntotal }

// Metric is the comparison the index ranks by.
func (ix *IVF) Metric() Metric { return ix.metric }

// Encoding is the storage of the list vectors.
func (ix *IVF) Encoding() Encoding { return ix.enc }

// NList is the number of inverted lists.
func (ix *IVF) NList() int { return ix.nlist }

// NProbe is the default number of lists a search visits.
func (ix *IVF) NProbe() int { return ix.nprobe }

// SetNProbe changes the default number of lists visited (clamped to
// 1…nlist). Not safe concurrently with Search; pass SearchParams instead.
func (ix *IVF) SetNProbe(n int) { ix.nprobe = min(max(1, n), ix.nlist) }

// IsTrained tells whether the coarse quantizer (and SQ8 ranges) exist.
func (ix *IVF) IsTrained() bool { return ix.quantizer != nil }

// Quantizer is the coarse quantizer (nil before Train): a Flat index whose
// row i is the centroid of list i.
func (ix *IVF) Quantizer() *Flat { return ix.quantizer }

// ListSizes returns the number of vectors in each list.
func (ix *IVF) ListSizes() []int {
	s := make([]int, ix.nlist)
	for i := range ix.lists {
		s[i] = ix.lists[i].codes.n
	}
	return s
}

// String describes the index.
func (ix *IVF) String() string {
	return fmt.Sprintf("IVF(d=%d, nlist=%d, n=%d, metric=%v, encoding=%v, nprobe=%d)", ix.d, ix.nlist, ix.ntotal, ix.metric, ix.enc, ix.nprobe)
}

// Close releases the memory map of an opened index.
func (ix *IVF) Close() error {
	return release(&ix.closer)
}

// Train learns the nlist centroids by k-means on x (subsampled to at most
// 256·nlist vectors, as FAISS does) and, for SQ8, the ranges of the
// residuals. Training is allowed only while the index is empty.
func (ix *IVF) Train(x []float32) error {
	n, err := checkTrain(x, ix.d, ix.ntotal, "IVF")
	if err != nil {
		return err
	}
	if n < ix.nlist {
		return fmt.Errorf("train: %d vectors for %d lists (need at least one per list)", n, ix.nlist)
	}
	q, err := trainCoarse(x, ix.d, ix.nlist, ix.metric, ix.kmeans, ix.progress)
	if err != nil {
		return err
	}
	if ix.enc == SQ8 {
		// Fit the ranges on the residuals of (a sample of) the training set.
		res, err := trainResiduals(q, x, n, 1<<16, ix.kmeans.Seed+1, ix.kmeans.Threads)
		if err != nil {
			return err
		}
		sq, err := tensor.TrainSQ8(res, ix.d)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		ix.sq = sq
	}
	ix.quantizer = q
	return nil
}

// trainCoarse learns an IVF's coarse quantizer: a Flat index of the
// nlist k-means centroids of x (km.Metric and Spherical already set for
// the index's metric).
func trainCoarse(x []float32, d, nlist int, m Metric, km KMeansOptions, progress io.Writer) (*Flat, error) {
	km.Progress = progress
	res, err := KMeans(x, d, nlist, km)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	q, err := NewFlat(d, m, F32)
	if err != nil {
		return nil, err
	}
	if err := q.Add(nil, res.Centroids); err != nil {
		return nil, err
	}
	return q, nil
}

func subtract(dst, a, b []float32) {
	for i := range dst {
		dst[i] = a[i] - b[i]
	}
}

// assignLists returns the nearest list of every vector of x: screened on
// AMX-BF16 and rescored exactly (assignScreened, as k-means assigns) for
// a batch of screenMinQueries or more where the CPU has it, else by the
// quantizer's exact search. Either way a vector's list depends on that
// vector alone, not on how the vectors are batched.
func assignLists(q *Flat, x []float32, threads int) ([]int64, error) {
	d, k := q.d, q.Len()
	if n := len(x) / d; len(x)%d == 0 && n >= screenMinQueries && q.codes.enc == F32 && useScreenAssign(k) {
		var cnorm []float32
		if q.metric == L2 {
			cnorm = q.norms
		}
		assign := make([]int32, n)
		if _, ok := assignScreened(assign, x, q.codes.f32, cnorm, n, d, k, q.metric, threads); ok {
			lists := make([]int64, n)
			for i, a := range assign {
				lists[i] = q.ID(int(a))
			}
			return lists, nil
		}
	}
	_, lists, err := q.search(x, 1, &SearchParams{Threads: threads}, false)
	return lists, err
}

// Add assigns each vector to its nearest centroid and appends it (its
// residual, for SQ8) to that list, with the given ids (nil: the positions
// Len(), Len()+1, …).
func (ix *IVF) Add(ids []int64, x []float32) error {
	n, err := checkAdd(ids, x, ix.d, ix.IsTrained())
	if err != nil {
		return err
	}
	d := ix.d
	const chunk = 8192
	res := make([]float32, d)
	dec := make([]float32, d)
	for c0 := 0; c0 < n; c0 += chunk {
		c1 := min(n, c0+chunk)
		lists, err := assignLists(ix.quantizer, x[c0*d:c1*d], ix.kmeans.Threads)
		if err != nil {
			return fmt.Errorf("add: %w", err)
		}
		for i := c0; i < c1; i++ {
			l := &ix.lists[lists[i-c0]]
			v := x[i*d : (i+1)*d]
			if ix.residual {
				c := ix.quantizer.codes.f32[int(lists[i-c0])*d:]
				subtract(res, v, c)
				v = res
			}
			row := l.codes.n
			l.codes.appendVectors(v, ix.sq)
			if ids != nil {
				l.ids = append(l.ids, ids[i])
			} else {
				l.ids = append(l.ids, int64(ix.ntotal+i))
			}
			if ix.metric == L2 {
				// ‖x̂‖² of the stored (decoded) row, as the flat index does.
				l.codes.decode(dec, row, row+1, ix.sq)
				var nrm [1]float32
				tensor.SquaredNorms(nrm[:], dec, d)
				l.norms = append(l.norms, nrm[0])
			}
		}
	}
	ix.ntotal += n
	return nil
}

// probed is the start of an inverted-file search: the queries' nprobe
// best lists (cl, with the quantizer's scores cs, row-major nq × nprobe)
// and the result arrays to fill.
type probed struct {
	nq, nprobe, threads int
	cs                  []float32
	cl                  []int64
	scores              []float32
	ids                 []int64
}

// probe checks a search of an IVF-style index (coarse quantizer q of nlist
// lists, default nprobe def) and runs the coarse search.
func probe(q *Flat, d, nlist, def int, queries []float32, k int, p *SearchParams) (probed, error) {
	nq, err := checkSearch(queries, k, d)
	if err != nil {
		return probed{}, err
	}
	if q == nil {
		return probed{}, fmt.Errorf("search: %w", ErrNotTrained)
	}
	pr := probed{nq: nq, scores: make([]float32, nq*k), ids: make([]int64, nq*k), nprobe: def}
	if nq == 0 {
		return pr, nil
	}
	if p != nil && p.NProbe > 0 {
		pr.nprobe = p.NProbe
	}
	pr.nprobe = min(pr.nprobe, nlist)
	pr.threads = tensor.Workers(p.threads())
	pr.cs, pr.cl, err = q.search(queries, pr.nprobe, &SearchParams{Threads: pr.threads}, false)
	return pr, err
}

// ivfProbe is one (query, list) pair of a batch search.
type ivfProbe struct {
	query  int32
	coarse float32 // the quantizer's score of the list for the query
}

// Search visits the nprobe best lists of each query (p.NProbe, or the
// index default) and returns the k best vectors found (see Index). The
// (query, list) pairs are grouped by list and the lists shared out among
// p.Threads goroutines; the result does not depend on the thread count or
// on how queries are batched.
func (ix *IVF) Search(q []float32, k int, p *SearchParams) ([]float32, []int64, error) {
	pr, err := probe(ix.quantizer, ix.d, ix.nlist, ix.nprobe, q, k, p)
	if err != nil || pr.nq == 0 {
		return pr.scores, pr.ids, err
	}
	nq, nprobe, threads, cs, cl, scores, ids := pr.nq, pr.nprobe, pr.threads, pr.cs, pr.cl, pr.scores, pr.ids

	// Group the probes by list.
	buckets := make(map[int32][]ivfProbe, min(ix.nlist, nq*nprobe))
	for i := range nq {
		for j := range nprobe {
			l := cl[i*nprobe+j]
			if l < 0 || ix.lists[l].codes.n == 0 {
				continue
			}
			buckets[int32(l)] = append(buckets[int32(l)], ivfProbe{query: int32(i), coarse: cs[i*nprobe+j]})
		}
	}
	type work struct {
		list   int32
		probes []ivfProbe
		cost   int
	}
	items := make([]work, 0, len(buckets))
	totalRows := 0
	for l, ps := range buckets {
		rows := ix.lists[l].codes.n
		items = append(items, work{list: l, probes: ps, cost: rows * len(ps)})
		totalRows += rows * len(ps)
	}
	// Largest first for load balance; list id breaks ties so the order is
	// reproducible.
	slices.SortFunc(items, func(a, b work) int {
		if a.cost != b.cost {
			return b.cost - a.cost
		}
		return int(a.list - b.list)
	})

	workers := max(1, min(threads, len(items), totalRows/2048))
	heaps := make([][]*tensor.TopK, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			hs := make([]*tensor.TopK, nq)
			var sc ivfScratch
			for {
				i := int(next.Add(1) - 1)
				if i >= len(items) {
					break
				}
				it := &items[i]
				ix.scanList(hs, k, q, it.list, it.probes, &sc)
			}
			heaps[w] = hs
		}(w)
	}
	wg.Wait()

	writeMerged(ix.metric, heaps, nq, k, scores, ids)
	return scores, ids, nil
}

// ivfScratch is a worker's reusable buffers.
type ivfScratch struct {
	qv, bias, base, out, dec []float32
	res                      []float32
}

// scanList scores list l against the queries of its probes and offers the
// results to the per-query selections hs (allocated on first use).
func (ix *IVF) scanList(hs []*tensor.TopK, k int, q []float32, l int32, probes []ivfProbe, sc *ivfScratch) {
	d := ix.d
	m := len(probes)
	list := &ix.lists[l]
	sc.qv = growFloats(sc.qv, m*d)
	sc.bias = growFloats(sc.bias, m)
	sc.base = growFloats(sc.base, m)
	sc.res = growFloats(sc.res, d)
	cent := ix.quantizer.codes.f32[int(l)*d : (int(l)+1)*d]
	for i, p := range probes {
		qi := q[int(p.query)*d : (int(p.query)+1)*d]
		qv := sc.qv[i*d : (i+1)*d]
		switch {
		case ix.residual && ix.metric == L2:
			// ‖q − c − r̂‖² = ‖q − c‖² + ‖r̂‖² − 2⟨q − c, r̂⟩
			subtract(sc.res, qi, cent)
			sc.bias[i] = prepQuery(ix.enc, ix.sq, qv, sc.res)
			sc.base[i] = p.coarse
		case ix.residual:
			// ⟨q, c + r̂⟩ = ⟨q, c⟩ + ⟨q, r̂⟩
			sc.bias[i] = prepQuery(ix.enc, ix.sq, qv, qi) + p.coarse
			sc.base[i] = 0
		default:
			sc.bias[i] = prepQuery(ix.enc, ix.sq, qv, qi)
			sc.base[i] = 0
		}
		if hs[p.query] == nil {
			hs[p.query] = tensor.NewTopK(k)
		}
	}
	if ix.metric == L2 && !ix.residual {
		// ‖q‖², with the same arithmetic as the flat index.
		for i, p := range probes {
			tensor.SquaredNorms(sc.base[i:i+1], q[int(p.query)*d:(int(p.query)+1)*d], d)
		}
	}
	n := list.codes.n
	tile := tileRows(d)
	if m < 3 {
		tile = 1024
	}
	tile = min(tile, n)
	sc.out = growFloats(sc.out, m*tile)
	for r0 := 0; r0 < n; r0 += tile {
		r1 := min(n, r0+tile)
		if m < 3 {
			for i := range m {
				list.codes.dotRows(sc.out[i*tile:], sc.qv[i*d:(i+1)*d], r0, r1)
			}
		} else {
			sc.dec = list.codes.dotBlock(sc.out, tile, sc.qv, m, r0, r1, sc.dec)
		}
		var norms []float32
		if ix.metric == L2 {
			norms = list.norms[r0:r1]
		}
		for i, p := range probes {
			raw := sc.out[i*tile : i*tile+(r1-r0)]
			toKeys(ix.metric, raw, sc.bias[i], sc.base[i], norms)
			hs[p.query].PushIDs(raw, list.ids[r0:r1])
		}
	}
}
