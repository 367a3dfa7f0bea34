package vector

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/cas-engine/cas/internal/relpath"
	"github.com/cas-engine/cas/tensor"
)

// The search settings an IVF-PQ index gets by default from `cas index
// import --pq` and `cas bench scale`: visit DefaultPQNProbe lists and
// re-score the DefaultPQRerank best ADC candidates exactly. Measured at 1M
// vectors of the E5-fitted synthetic set (vectest.E5MixGen, 1,024 lists),
// recall@10 against exact search depends on the re-rank depth, not on
// nprobe from 16 to 512: re-ranks of 100 / 200 / 500 / 1,000 give 0.753 /
// 0.914 / 0.992 / 1.000 with 64-byte codes and 0.889 / 0.971 / 0.999 /
// 1.000 with 96-byte codes (README, "cas bench scale"). The cheapest
// setting above 0.95 there, 96 bytes with a re-rank of 200, has little
// margin for the deeper ADC ranks of larger N; 500 and nprobe 32 keep one.
const (
	DefaultPQNProbe = 32
	DefaultPQRerank = 500
)

// IVFPQOptions configure a new IVF-PQ index.
type IVFPQOptions struct {
	// Metric of the index (and of its coarse quantizer).
	Metric Metric
	// M is the number of sub-quantizers: bytes per stored vector. It must
	// divide the dimension (E5's 768: 48, 64, 96, 192, …).
	M int
	// NProbe is the default number of lists a search visits (≤ 0: 1).
	NProbe int
	// Rerank is the default number of ADC candidates re-scored exactly
	// against the F32 vectors when a refine source is attached (SetRefine;
	// ≤ 0: no re-rank).
	Rerank int
	// KMeans trains the coarse quantizer, as for IVF; its Seed and
	// Threads also drive the PQ codebooks (25 iterations each, FAISS's
	// default).
	KMeans KMeansOptions
	// Progress, when non-nil, receives the k-means progress bar of Train.
	Progress io.Writer
}

// IVFPQ is an inverted file with product-quantized residuals, FAISS's
// IndexIVFPQ (by_residual, 8-bit codes): vector x in list l (nearest
// centroid c_l) is stored as the M-byte PQ code of its residual
// r = x − c_l, so that x̂ = c_l + r̂ (see pq.go). A query q scores
//
//	inner product:  ⟨q, x̂⟩ = ⟨q, c_l⟩ + Σ_m T_m[code_m],   T_m[j] = ⟨q_m, C_m[j]⟩ (one table per query)
//	L2:             ‖q − x̂‖² = Σ_m T'_m[code_m],           T'_m[j] = ‖(q − c_l)_m − C_m[j]‖² (one per query and list)
//
// where ⟨q, c_l⟩ is the coarse quantizer's score (FAISS's dis0).
//
// With a refine source (SetRefine: the F32 vectors, row = id, normally the
// FAISS flat file the index was converted from), a search keeps the best
// max(k, rerank) ADC candidates per query and re-scores them exactly, as
// FAISS's IndexRefineFlat does: the codes select, the original vectors
// rank. An opened index reads those rows with pread (rowFile), not through
// the file's memory map: the kernel's page cache keeps what it likes, but
// none of it counts in the process's resident set, which stays the codes,
// ids and centroids however many rows the re-rank has touched (through a
// map, fault-around brings in 64 KB per row read, and a 65 GB file's pages
// would pile up in RSS).
type IVFPQ struct {
	d, nlist   int
	metric     Metric
	nprobe     int
	rerank     int
	quantizer  *Flat
	pq         *productQuantizer
	lists      []pqList
	ntotal     int
	refine     *Flat
	refinePath string
	rows       *rowFile // where set, the re-rank reads refine's rows from the file
	kmeans     KMeansOptions
	progress   io.Writer
	closer     func() error
}

// pqList is one inverted list: n codes of M bytes and their ids.
type pqList struct {
	codes []uint8
	ids   []int64
}

// NewIVFPQ returns an untrained IVF-PQ index with nlist lists and M
// sub-quantizers.
func NewIVFPQ(d, nlist int, opt IVFPQOptions) (*IVFPQ, error) {
	if err := checkIVFShape("ivf-pq index", d, nlist, opt.Metric); err != nil {
		return nil, err
	}
	pq, err := newPQ(d, opt.M)
	if err != nil {
		return nil, fmt.Errorf("ivf-pq index: %w", err)
	}
	km := opt.KMeans
	km.Metric = opt.Metric
	km.Spherical = opt.Metric == InnerProduct
	return &IVFPQ{d: d, nlist: nlist, metric: opt.Metric, nprobe: max(1, opt.NProbe), rerank: max(0, opt.Rerank),
		pq: pq, lists: make([]pqList, nlist), kmeans: km, progress: opt.Progress}, nil
}

// Dim is the vector dimension.
func (ix *IVFPQ) Dim() int { return ix.d }

// Len is the number of stored vectors.
func (ix *IVFPQ) Len() int { return ix.ntotal }

// Metric is the comparison the index ranks by.
func (ix *IVFPQ) Metric() Metric { return ix.metric }

// NList is the number of inverted lists.
func (ix *IVFPQ) NList() int { return ix.nlist }

// M is the number of sub-quantizers (bytes per code).
func (ix *IVFPQ) M() int { return ix.pq.m }

// NProbe is the default number of lists a search visits.
func (ix *IVFPQ) NProbe() int { return ix.nprobe }

// SetNProbe changes the default number of lists visited (clamped to
// 1…nlist). Not safe concurrently with Search.
func (ix *IVFPQ) SetNProbe(n int) { ix.nprobe = min(max(1, n), ix.nlist) }

// Rerank is the default number of candidates re-scored exactly (0: none,
// or no refine source).
func (ix *IVFPQ) Rerank() int {
	if ix.refine == nil {
		return 0
	}
	return ix.rerank
}

// SetRerank changes the default re-rank depth (≤ 0: off). Not safe
// concurrently with Search.
func (ix *IVFPQ) SetRerank(r int) { ix.rerank = max(0, r) }

// IsTrained tells whether the coarse quantizer and PQ codebooks exist.
func (ix *IVFPQ) IsTrained() bool { return ix.quantizer != nil && ix.pq.cent != nil }

// Quantizer is the coarse quantizer (nil before Train).
func (ix *IVFPQ) Quantizer() *Flat { return ix.quantizer }

// Refine is the attached exact-vector source (nil: none).
func (ix *IVFPQ) Refine() *Flat { return ix.refine }

// SetRefine attaches the F32 vectors the re-rank reads: row id of f is the
// vector stored with id (f must have as many rows as the index holds
// vectors, no explicit ids, and the index's dimension and metric). path,
// when not empty, is where f lives; SaveIndex records it so that opening
// the saved index attaches it again. The index takes ownership of f (Close
// closes it).
func (ix *IVFPQ) SetRefine(f *Flat, path string) error {
	ix.closeRows()
	if f == nil {
		ix.refine, ix.refinePath = nil, ""
		return nil
	}
	if f.codes.enc != F32 || f.ids != nil || f.d != ix.d || f.metric != ix.metric {
		return fmt.Errorf("refine vectors: want an F32 %v flat index of d %d whose ids are rows, got %v", ix.metric, ix.d, f)
	}
	if f.Len() != ix.ntotal {
		return fmt.Errorf("refine vectors: %d rows for an index of %d vectors (row i must be the vector of id i)", f.Len(), ix.ntotal)
	}
	ix.refine, ix.refinePath = f, path
	return nil
}

// ListSizes returns the number of vectors in each list.
func (ix *IVFPQ) ListSizes() []int {
	s := make([]int, ix.nlist)
	for i := range ix.lists {
		s[i] = len(ix.lists[i].ids)
	}
	return s
}

// String describes the index.
func (ix *IVFPQ) String() string {
	return fmt.Sprintf("IVFPQ(d=%d, nlist=%d, M=%d, n=%d, metric=%v, nprobe=%d, rerank=%d)", ix.d, ix.nlist, ix.pq.m, ix.ntotal, ix.metric, ix.nprobe, ix.Rerank())
}

// Close releases the memory maps of an opened index and of its refine
// source.
func (ix *IVFPQ) Close() error {
	err := ix.closeRows()
	if ix.refine != nil {
		if cerr := ix.refine.Close(); err == nil {
			err = cerr
		}
		ix.refine = nil
	}
	if cerr := release(&ix.closer); err == nil {
		err = cerr
	}
	return err
}

// pqEncoding names IVF-PQ's 8-bit PQ codes in a cas file header.
const pqEncoding = "pq8"

// openRefine opens the refine source recorded in a saved index (relative
// to dir, the index file's folder) and attaches it.
func (ix *IVFPQ) openRefine(dir string) error {
	path := relpath.Resolve(dir, ix.refinePath)
	src, b, err := openMapped(path, nil)
	if err != nil {
		return fmt.Errorf("re-rank vectors: %w", err)
	}
	f, ok := src.(*Flat)
	if !ok {
		src.Close()
		return fmt.Errorf("re-rank vectors %s: a %T, want a flat F32 index", path, src)
	}
	if err := ix.SetRefine(f, path); err != nil {
		f.Close()
		return fmt.Errorf("re-rank vectors %s: %w", path, err)
	}
	if off, ok := offsetIn(b, f.codes.f32); ok && littleEndian {
		fh, err := os.Open(path)
		if err != nil {
			ix.Close()
			return fmt.Errorf("re-rank vectors: %w", err)
		}
		ix.rows = &rowFile{f: fh, off: off, d: ix.d}
	}
	return nil
}

// rowFile reads float32 rows of d components from a file at byte offset
// off (row i at off + 4·d·i), by pread: the re-rank's reader.
type rowFile struct {
	f   *os.File
	off int64
	d   int
}

// read fills dst (d floats) with row i.
func (r *rowFile) read(dst []float32, i int64) error {
	if _, err := r.f.ReadAt(bytesOf(dst), r.off+4*int64(r.d)*i); err != nil {
		return fmt.Errorf("re-rank: row %d of %s: %w", i, r.f.Name(), err)
	}
	return nil
}

func (ix *IVFPQ) closeRows() error {
	if ix.rows == nil {
		return nil
	}
	err := ix.rows.f.Close()
	ix.rows = nil
	return err
}

// pqTrainSample caps the residuals the codebooks learn from (FAISS's PQ
// k-means keeps at most 256 points per centroid).
const pqTrainSample = 256 * pqK

// Train learns the nlist coarse centroids by k-means on x (at most
// 256·nlist vectors, as IVF), then the PQ codebooks on the residuals
// x − c(x) of at most 65,536 of them (FAISS's IndexIVFPQ::train). Training
// is allowed only while the index is empty.
func (ix *IVFPQ) Train(x []float32) error {
	n, err := checkTrain(x, ix.d, ix.ntotal, "IVF-PQ")
	if err != nil {
		return err
	}
	if n < ix.nlist || n < pqK {
		return fmt.Errorf("train: %d vectors for %d lists and %d codes per sub-quantizer (need at least %d)", n, ix.nlist, pqK, max(ix.nlist, pqK))
	}
	q, err := trainCoarse(x, ix.d, ix.nlist, ix.metric, ix.kmeans, ix.progress)
	if err != nil {
		return err
	}
	res, err := trainResiduals(q, x, n, pqTrainSample, ix.kmeans.Seed+2, ix.kmeans.Threads)
	if err != nil {
		return err
	}
	km := ix.kmeans
	km.Iterations = 0
	km.Init = KMeansRandom
	if err := ix.pq.train(res, km); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	ix.quantizer = q
	return nil
}

// residuals returns x − c(x) for each vector of x and its nearest
// centroid c(x) in q, and the list numbers.
func residualsAndLists(q *Flat, x []float32, threads int) ([]float32, []int64, error) {
	lists, err := assignLists(q, x, threads)
	if err != nil {
		return nil, nil, err
	}
	d := q.d
	res := make([]float32, len(x))
	for i, l := range lists {
		subtract(res[i*d:(i+1)*d], x[i*d:(i+1)*d], q.codes.f32[int(l)*d:(int(l)+1)*d])
	}
	return res, lists, nil
}

// trainResiduals returns the residuals x − c(x) of the n training vectors
// x, or of a sample of limit of them drawn with seed: what an IVF index
// learns its second-level codes from (IVF's SQ8 ranges, IVF-PQ's
// codebooks).
func trainResiduals(q *Flat, x []float32, n, limit int, seed uint64, threads int) ([]float32, error) {
	m := min(n, limit)
	sample := x[:m*q.d]
	if m < n {
		sample = sampleRows(x, q.d, n, m, newRand(seed))
	}
	res, _, err := residualsAndLists(q, sample, threads)
	return res, err
}

// encodeChunk returns the list of each vector of x and the PQ codes of
// its residual (n × M).
func (ix *IVFPQ) encodeChunk(x []float32, threads int) ([]int64, []uint8, error) {
	res, lists, err := residualsAndLists(ix.quantizer, x, threads)
	if err != nil {
		return nil, nil, err
	}
	codes := make([]uint8, len(lists)*ix.pq.m)
	ix.pq.encode(codes, res, threads)
	return lists, codes, nil
}

// Add assigns each vector to its nearest centroid and appends the PQ code
// of its residual to that list, with the given ids (nil: the positions
// Len(), Len()+1, …). An attached refine source is dropped (its rows no
// longer cover the index).
func (ix *IVFPQ) Add(ids []int64, x []float32) error {
	n, err := checkAdd(ids, x, ix.d, ix.IsTrained())
	if err != nil {
		return err
	}
	d, m := ix.d, ix.pq.m
	const chunk = 8192
	for c0 := 0; c0 < n; c0 += chunk {
		c1 := min(n, c0+chunk)
		lists, codes, err := ix.encodeChunk(x[c0*d:c1*d], ix.kmeans.Threads)
		if err != nil {
			return fmt.Errorf("add: %w", err)
		}
		for i, l := range lists {
			li := &ix.lists[l]
			li.codes = append(li.codes, codes[i*m:(i+1)*m]...)
			if ids != nil {
				li.ids = append(li.ids, ids[c0+i])
			} else {
				li.ids = append(li.ids, int64(ix.ntotal+c0+i))
			}
		}
	}
	ix.ntotal += n
	ix.closeRows()
	if ix.refine != nil {
		ix.refine.Close()
		ix.refine, ix.refinePath = nil, ""
	}
	return nil
}

// Search visits the nprobe best lists of each query, ranks their codes by
// ADC and, with a refine source, re-scores the best max(k, rerank)
// candidates exactly (see IVFPQ). Queries are shared out among p.Threads
// goroutines; the result does not depend on the thread count or on how
// queries are batched.
func (ix *IVFPQ) Search(q []float32, k int, p *SearchParams) ([]float32, []int64, error) {
	if ix.pq.cent == nil {
		return nil, nil, fmt.Errorf("search: %w", ErrNotTrained)
	}
	pr, err := probe(ix.quantizer, ix.d, ix.nlist, ix.nprobe, q, k, p)
	if err != nil || pr.nq == 0 {
		return pr.scores, pr.ids, err
	}
	nq, nprobe, threads, cs, cl, scores, ids := pr.nq, pr.nprobe, pr.threads, pr.cs, pr.cl, pr.scores, pr.ids
	rerank := ix.rerank
	if p != nil && p.Rerank != 0 {
		rerank = max(0, p.Rerank)
	}
	if ix.refine == nil {
		rerank = 0
	}
	d, m := ix.d, ix.pq.m
	kc := k
	if rerank > 0 {
		kc = max(k, rerank)
	}
	workers := min(threads, nq)
	errs := make([]error, workers)
	forChunks(nq, 4, workers, func(w, lo, hi int) {
		if errs[w] != nil {
			return
		}
		tab := make([]float32, m*pqK)
		res := make([]float32, d)
		var out []float32
		var cand []int64
		var candS []float32
		top := tensor.NewTopK(kc)
		final := tensor.NewTopK(k)
		for i := lo; i < hi; i++ {
			qi := q[i*d : (i+1)*d]
			top.Reset()
			if ix.metric == InnerProduct {
				ix.pq.ipTable(tab, qi)
			}
			for j := range nprobe {
				l := cl[i*nprobe+j]
				if l < 0 || len(ix.lists[l].ids) == 0 {
					continue
				}
				list := &ix.lists[l]
				n := len(list.ids)
				out = growFloats(out, n)
				var base float32
				if ix.metric == InnerProduct {
					base = cs[i*nprobe+j]
				} else {
					subtract(res, qi, ix.quantizer.codes.f32[int(l)*d:(int(l)+1)*d])
					ix.pq.l2Table(tab, res)
				}
				adcScan(out[:n], tab, list.codes, m)
				if ix.metric == InnerProduct {
					for t := range out[:n] {
						out[t] += base
					}
				} else {
					for t := range out[:n] {
						out[t] = -out[t]
					}
				}
				top.PushIDs(out[:n], list.ids)
			}
			sel := top
			if rerank > 0 {
				cand = growIDs(cand, top.Len())
				candS = growFloats(candS, top.Len())
				c := top.Sorted(candS, cand)
				final.Reset()
				if errs[w] = ix.rescore(final, qi, cand[:c], candS[:c], res); errs[w] != nil {
					return
				}
				sel = final
			}
			writeResults(ix.metric, sel, scores[i*k:(i+1)*k], ids[i*k:(i+1)*k])
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("search: %w", err)
	}
	return scores, ids, nil
}

// rescore pushes the exact keys of the candidate ids into top (⟨q, x⟩, or
// −‖q − x‖²), reading the vectors from the refine source (by pread where
// the index has a rowFile); keys is scratch of the candidates' length, row
// of d floats.
func (ix *IVFPQ) rescore(top *tensor.TopK, q []float32, ids []int64, keys, row []float32) error {
	d := ix.d
	rows := ix.refine.codes.f32
	n := int64(ix.refine.Len())
	for j, id := range ids {
		if id < 0 || id >= n {
			keys[j] = float32(math.NaN()) // ignored by the selection
			continue
		}
		var x []float32
		if ix.rows != nil {
			if err := ix.rows.read(row, id); err != nil {
				return err
			}
			x = row
		} else {
			x = rows[int(id)*d : int(id+1)*d]
		}
		if ix.metric == InnerProduct {
			keys[j] = tensor.Dot(q, x)
		} else {
			var s float32
			for t, v := range q {
				diff := v - x[t]
				s += diff * diff
			}
			keys[j] = -s
		}
	}
	top.PushIDs(keys, ids)
	return nil
}

func growIDs(s []int64, n int) []int64 {
	if cap(s) < n {
		return make([]int64, n)
	}
	return s[:n]
}
