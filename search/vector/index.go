package vector

import (
	"errors"
	"fmt"
	"math"

	"github.com/cas-engine/cas/internal/textenum"
)

// Vectors, query batches and results are flat row-major slices throughout:
// n vectors of dimension d are x[i·d : (i+1)·d]; the results of a batch of
// nq queries with k neighbours are scores[i·k : (i+1)·k] and ids[i·k :
// (i+1)·k] for query i, best first.

// Metric is how an index compares a query q with a stored vector x.
type Metric uint8

const (
	// InnerProduct ranks by ⟨q, x⟩, largest first (cosine similarity for
	// unit vectors, as E5 uses).
	InnerProduct Metric = iota
	// L2 ranks by the squared Euclidean distance ‖q − x‖², smallest first.
	L2
)

var metricNames = textenum.Names[Metric]{Type: "metric", Kind: "metric", Names: []string{"ip", "l2"},
	Aliases: map[string]Metric{"inner_product": InnerProduct, "dot": InnerProduct}}

func (m Metric) String() string { return metricNames.String(m) }

// ParseMetric accepts "ip" (or "inner_product", "dot") and "l2", in any case.
func ParseMetric(s string) (Metric, error) { return metricNames.Parse(s) }

// worst is the padding score of a missing result: −FLT_MAX for inner
// product, +FLT_MAX for L2, as FAISS pads (and valid JSON, unlike ±Inf).
func (m Metric) worst() float32 {
	if m == L2 {
		return math.MaxFloat32
	}
	return -math.MaxFloat32
}

// Encoding is how stored vectors are coded.
type Encoding uint8

const (
	// F32 stores float32 components (4 bytes each).
	F32 Encoding = iota
	// F16 stores IEEE binary16 components (2 bytes each, rounded to
	// nearest): half the memory, relative error ≤ 2⁻¹¹ per component.
	F16
	// SQ8 stores one byte per component with a per-dimension min–max
	// scalar quantizer (tensor.SQ8): a quarter of the memory.
	SQ8
)

var encodingNames = textenum.Names[Encoding]{Type: "encoding", Kind: "encoding", Names: []string{"f32", "f16", "sq8"},
	Aliases: map[string]Encoding{"float32": F32, "flat": F32, "float16": F16, "fp16": F16}}

func (e Encoding) String() string { return encodingNames.String(e) }

// ParseEncoding accepts "f32" (or "float32", "flat"), "f16" (or "float16",
// "fp16") and "sq8", in any case.
func ParseEncoding(s string) (Encoding, error) { return encodingNames.Parse(s) }

// bytesPer is the storage of one vector component.
func (e Encoding) bytesPer() int {
	switch e {
	case F16:
		return 2
	case SQ8:
		return 1
	}
	return 4
}

// SearchParams are per-call search settings. A nil *SearchParams means the
// defaults.
type SearchParams struct {
	// NProbe is the number of inverted lists an IVF index visits per query
	// (≤ 0: the index's default, 1 unless changed with SetNProbe). Flat
	// indexes ignore it.
	NProbe int
	// Rerank is the number of candidates an IVF-PQ index with a refine
	// source re-scores exactly (0: the index's default; < 0: none). Other
	// indexes ignore it.
	Rerank int
	// Threads is the number of goroutines (≤ 0: GOMAXPROCS). Results do
	// not depend on it.
	Threads int
}

func (p *SearchParams) threads() int {
	if p == nil {
		return 0
	}
	return p.Threads
}

// Index is a vector index in the spirit of FAISS's faiss::Index.
//
// Dim is d; Len is ntotal, the number of stored vectors; IsTrained tells
// whether Add may be called (an IVF index must first learn its coarse
// quantizer, an SQ8 index its ranges).
//
// Train learns from len(x)/Dim() vectors. Add stores len(x)/Dim() vectors
// with the given ids (nil ids: the positions Len(), Len()+1, …).
//
// Search returns, for each of the len(q)/Dim() queries, the k best stored
// vectors: scores (inner products, largest first, or squared L2 distances,
// smallest first) and ids, row-major [nq × k]. Where fewer than k vectors
// exist (or an IVF probe reaches fewer), the row is padded with id −1 and
// score −FLT_MAX (inner product) or +FLT_MAX (L2). Search is safe for
// concurrent use; Train and Add are not, and must not overlap a Search.
//
// Close releases the index's memory map, if any; the index must not be used
// afterwards.
type Index interface {
	Dim() int
	Len() int
	IsTrained() bool
	Metric() Metric
	Train(x []float32) error
	Add(ids []int64, x []float32) error
	Search(q []float32, k int, p *SearchParams) (scores []float32, ids []int64, err error)
	Close() error
}

// ErrNotTrained is returned by Add and Search on an index that needs Train.
var ErrNotTrained = errors.New("index is not trained")

// checkVectors validates a row-major batch of dimension d and returns the
// number of rows.
func checkVectors(what string, x []float32, d int) (int, error) {
	if d <= 0 {
		return 0, fmt.Errorf("%s: index dimension %d", what, d)
	}
	if len(x)%d != 0 {
		return 0, fmt.Errorf("%s: %d values are not a whole number of %d-d vectors", what, len(x), d)
	}
	return len(x) / d, nil
}

// checkSearch validates Search's arguments and returns the query count.
func checkSearch(q []float32, k, d int) (int, error) {
	if k <= 0 {
		return 0, fmt.Errorf("search: k = %d, want ≥ 1", k)
	}
	nq, err := checkVectors("search", q, d)
	if err != nil {
		return 0, err
	}
	if int64(nq)*int64(k) > 1<<31 {
		return 0, fmt.Errorf("search: %d queries × k = %d results is too many for one call", nq, k)
	}
	return nq, nil
}

// checkTrain validates Train's arguments for a d-dimensional index of the
// kind named ("IVF") holding ntotal vectors: x holds whole vectors and the
// index is still empty. It returns the number of vectors.
func checkTrain(x []float32, d, ntotal int, kind string) (int, error) {
	n, err := checkVectors("train", x, d)
	if err != nil {
		return 0, err
	}
	if ntotal > 0 {
		return 0, fmt.Errorf("train: the %s index already holds vectors", kind)
	}
	return n, nil
}

// checkAdd validates Add's arguments for a d-dimensional index: x holds
// whole vectors, ids (when not nil) one per vector, and the index is
// trained. It returns the number of vectors.
func checkAdd(ids []int64, x []float32, d int, trained bool) (int, error) {
	n, err := checkVectors("add", x, d)
	if err != nil {
		return 0, err
	}
	if ids != nil && len(ids) != n {
		return 0, fmt.Errorf("add: %d ids for %d vectors", len(ids), n)
	}
	if !trained {
		return 0, fmt.Errorf("add: %w", ErrNotTrained)
	}
	return n, nil
}

// IndexInfo summarises an index (for `cas index info`).
type IndexInfo struct {
	Kind     string `json:"kind"`
	Dim      int    `json:"dim"`
	Count    int    `json:"count"`
	Metric   string `json:"metric"`
	Encoding string `json:"encoding"`
	Bytes    int64  `json:"vector_bytes"`
	NList    int    `json:"nlist,omitempty"`
	NProbe   int    `json:"nprobe,omitempty"`
	// List sizes: smallest, largest, and how many lists are empty.
	MinList   int  `json:"min_list,omitempty"`
	MaxList   int  `json:"max_list,omitempty"`
	EmptyList int  `json:"empty_lists,omitempty"`
	HasIDs    bool `json:"explicit_ids"`
	// IVF-PQ: sub-quantizers, default re-rank depth and its F32 source.
	PQM    int    `json:"pq_m,omitempty"`
	Rerank int    `json:"rerank,omitempty"`
	Refine string `json:"refine,omitempty"`
}

// Describe returns an IndexInfo of a Flat or IVF index.
func Describe(ix Index) IndexInfo {
	info := IndexInfo{Dim: ix.Dim(), Count: ix.Len(), Metric: ix.Metric().String()}
	switch v := ix.(type) {
	case *Flat:
		info.Kind, info.Encoding, info.Bytes, info.HasIDs = "flat", v.codes.enc.String(), v.codes.byteLen(), v.ids != nil
	case *IVF:
		info.Kind, info.Encoding, info.NList, info.NProbe, info.HasIDs = "ivf", v.enc.String(), v.nlist, v.nprobe, true
		for l := range v.lists {
			info.Bytes += v.lists[l].codes.byteLen()
		}
		info.MinList, info.MaxList, info.EmptyList = listStats(v.ListSizes())
	case *IVFPQ:
		info.Kind, info.Encoding, info.NList, info.NProbe, info.HasIDs = "ivfpq", pqEncoding, v.nlist, v.nprobe, true
		info.PQM, info.Rerank, info.Refine = v.pq.m, v.Rerank(), v.refinePath
		info.Bytes = int64(v.ntotal) * int64(v.pq.m)
		info.MinList, info.MaxList, info.EmptyList = listStats(v.ListSizes())
	default:
		info.Kind = fmt.Sprintf("%T", ix)
	}
	return info
}

// listStats returns the smallest and largest list size and the number of
// empty lists.
func listStats(sizes []int) (lo, hi, empty int) {
	lo = math.MaxInt
	for _, n := range sizes {
		lo, hi = min(lo, n), max(hi, n)
		if n == 0 {
			empty++
		}
	}
	return lo, hi, empty
}

// CheckImportable accepts an inner-product index whose ids are rows of a
// corpus of ix.Len() passages, of the encoder's width (encDim > 0); name
// is the file named in errors.
func CheckImportable(ix Index, name string, encDim int) error {
	if ix.Metric() != InnerProduct {
		return fmt.Errorf("import: %s ranks by %v distance; E5 retrieval needs an inner-product index (IndexFlatIP)", name, ix.Metric())
	}
	if encDim > 0 && encDim != ix.Dim() {
		return fmt.Errorf("import: %s holds %d-d vectors but the encoder embeds %d-d ones (the passages must be embedded by the same encoder)", name, ix.Dim(), encDim)
	}
	if ix.Len() == 0 {
		return fmt.Errorf("import: %s holds no vectors", name)
	}
	n := int64(ix.Len())
	check := func(ids []int64) error {
		for _, id := range ids {
			if id < 0 || id >= n {
				return fmt.Errorf("import: %s has vector id %d; ids must be corpus rows 0…%d (line order)", name, id, n-1)
			}
		}
		return nil
	}
	switch v := ix.(type) {
	case *Flat:
		return check(v.ids)
	case *IVF:
		for l := range v.lists {
			if err := check(v.lists[l].ids); err != nil {
				return err
			}
		}
	case *IVFPQ:
		for l := range v.lists {
			if err := check(v.lists[l].ids); err != nil {
				return err
			}
		}
	}
	return nil
}
