package search

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"os"
	"runtime"
	"sort"
	"sync"

	"github.com/cas-engine/cas/internal/atomicfile"
)

// BM25Params are Okapi BM25's free parameters. pyserini's defaults (and
// Search-R1's BM25 index) use k1 = 0.9, b = 0.4.
type BM25Params struct {
	K1 float32 `json:"k1"`
	B  float32 `json:"b"`
}

// DefaultBM25Params returns pyserini's defaults k1 = 0.9, b = 0.4.
func DefaultBM25Params() BM25Params { return BM25Params{K1: 0.9, B: 0.4} }

// Validate checks k1 ≥ 0 finite and b ∈ [0, 1] (Lucene's checks).
func (p BM25Params) Validate() error {
	if math.IsNaN(float64(p.K1)) || math.IsInf(float64(p.K1), 0) || p.K1 < 0 {
		return fmt.Errorf("bm25: k1 = %v, want a finite value ≥ 0", p.K1)
	}
	if math.IsNaN(float64(p.B)) || p.B < 0 || p.B > 1 {
		return fmt.Errorf("bm25: b = %v, want 0 ≤ b ≤ 1", p.B)
	}
	return nil
}

// Lucene stores a document's length in one byte (SmallFloat.intToByte4):
// lengths below 24 are exact, larger ones keep 4 significant bits. BM25
// scores use the decoded, approximate length; reproducing the encoding is
// what makes our scores equal pyserini's.
const lengthFreeValues = 24 // 255 - longToInt4(math.MaxInt32)

// longToInt4 is Lucene's SmallFloat.longToInt4: a float-like encoding of a
// non-negative integer with 4 significant bits (3 stored, 1 implicit).
func longToInt4(i uint64) uint32 {
	numBits := 64 - bits.LeadingZeros64(i)
	if numBits < 4 {
		return uint32(i) // subnormal
	}
	shift := numBits - 4
	encoded := uint32(i>>uint(shift)) & 0x07
	return encoded | uint32(shift+1)<<3
}

// int4ToLong inverts longToInt4 (up to the rounding down it did).
func int4ToLong(i uint32) uint64 {
	b := uint64(i & 0x07)
	shift := int(i>>3) - 1
	if shift == -1 {
		return b
	}
	return (b | 0x08) << uint(shift)
}

// EncodeLength is Lucene's SmallFloat.intToByte4: the one-byte norm of a
// document with n terms.
func EncodeLength(n uint32) byte {
	n = min(n, math.MaxInt32) // Lucene lengths are Java ints
	if n < lengthFreeValues {
		return byte(n)
	}
	return byte(lengthFreeValues + longToInt4(uint64(n-lengthFreeValues)))
}

// DecodeLength is Lucene's SmallFloat.byte4ToInt: the length BM25 uses for
// a document whose norm byte is b.
func DecodeLength(b byte) uint32 {
	if b < lengthFreeValues {
		return uint32(b)
	}
	return uint32(lengthFreeValues + int4ToLong(uint32(b)-lengthFreeValues))
}

// BM25IDF is Lucene's BM25 idf, computed in float64 and rounded to float32:
//
//	idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))
//
// with N the number of documents that have at least one term.
func BM25IDF(df, docCount uint64) float32 {
	return float32(math.Log(1 + (float64(docCount)-float64(df)+0.5)/(float64(df)+0.5)))
}

// BM25Index is an inverted index scored with Lucene's BM25Similarity, as
// pyserini computes it (Lucene ≥ 8: no (k1+1) factor in the numerator):
//
//	score(q, d) = Σ_{t ∈ q} c(t, q) · idf(t) · tf / (tf + k1 · (1 − b + b · dl / avgdl))
//
// where c(t, q) is the count of t in the analysed query (pyserini's
// bag-of-words query boosts a repeated term), tf the count of t in d, dl
// d's length decoded from its one-byte norm, and avgdl = Σ lengths / N.
// Each term's contribution is computed in float32 exactly as Lucene's
// BM25Scorer (weight − weight / (1 + tf · normInverse)), the sum in float64
// and the total rounded to float32; ties go to the lower row.
//
// The index is immutable and safe for concurrent searches.
type BM25Index struct {
	params   BM25Params
	analyzer *Analyzer
	numDocs  int
	docCount uint64 // documents with ≥ 1 term
	sumTTF   uint64 // Σ document lengths
	avgdl    float32
	cache    [256]float32 // 1 / (k1 · ((1 − b) + b · dl / avgdl)) per norm byte

	norms     []byte // [numDocs]
	numTerms  int
	termOff   []byte // [numTerms+1] u64 into termBytes
	termBytes []byte // sorted terms, concatenated
	df        []byte // [numTerms] u32
	postOff   []byte // [numTerms+1] u64 into postings
	postings  []byte // per term: df × (uvarint docDelta, uvarint tf)

	accPool sync.Pool // *bm25Accumulator
}

// BM25Builder accumulates documents in row order into an in-memory inverted
// index (postings are varint-compressed: about 2.5 bytes a posting).
type BM25Builder struct {
	analyzer *Analyzer
	params   BM25Params
	vocab    map[string]uint32
	terms    []string
	postings [][]byte
	lastDoc  []uint32
	df       []uint32
	norms    []byte
	docCount uint64
	sumTTF   uint64
	tf       map[uint32]uint32
	order    []uint32
}

// NewBM25Builder starts an empty index.
func NewBM25Builder(a *Analyzer, p BM25Params) (*BM25Builder, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &BM25Builder{analyzer: a, params: p, vocab: map[string]uint32{}, tf: map[uint32]uint32{}}, nil
}

// Len returns the number of documents added.
func (b *BM25Builder) Len() int { return len(b.norms) }

// AddText analyses text and adds it as the next document.
func (b *BM25Builder) AddText(text string) {
	b.AddTerms(b.analyzer.Analyze(text))
}

// AddTerms adds an already analysed document as the next row.
func (b *BM25Builder) AddTerms(terms []string) {
	doc := uint32(len(b.norms))
	n := len(terms)
	if n > math.MaxUint32 {
		n = math.MaxUint32
	}
	b.norms = append(b.norms, EncodeLength(uint32(n)))
	if n == 0 {
		return
	}
	b.docCount++
	b.sumTTF += uint64(n)
	clear(b.tf)
	b.order = b.order[:0]
	for _, t := range terms {
		id, ok := b.vocab[t]
		if !ok {
			id = uint32(len(b.terms))
			b.vocab[t] = id
			b.terms = append(b.terms, t)
			b.postings = append(b.postings, nil)
			b.lastDoc = append(b.lastDoc, 0)
			b.df = append(b.df, 0)
		}
		if b.tf[id] == 0 {
			b.order = append(b.order, id)
		}
		b.tf[id]++
	}
	for _, id := range b.order {
		delta := doc - b.lastDoc[id]
		if b.df[id] == 0 {
			delta = doc
		}
		p := binary.AppendUvarint(b.postings[id], uint64(delta))
		b.postings[id] = binary.AppendUvarint(p, uint64(b.tf[id]))
		b.lastDoc[id] = doc
		b.df[id]++
	}
}

// Finish sorts the vocabulary and returns the searchable index. The builder
// must not be used afterwards.
func (b *BM25Builder) Finish() *BM25Index {
	ids := make([]uint32, len(b.terms))
	for i := range ids {
		ids[i] = uint32(i)
	}
	sort.Slice(ids, func(i, j int) bool { return b.terms[ids[i]] < b.terms[ids[j]] })
	var termBytesLen, postLen int
	for i := range b.terms {
		termBytesLen += len(b.terms[i])
		postLen += len(b.postings[i])
	}
	ix := &BM25Index{
		params:    b.params,
		analyzer:  b.analyzer,
		numDocs:   len(b.norms),
		docCount:  b.docCount,
		sumTTF:    b.sumTTF,
		norms:     b.norms,
		numTerms:  len(ids),
		termOff:   make([]byte, 0, 8*(len(ids)+1)),
		termBytes: make([]byte, 0, termBytesLen),
		df:        make([]byte, 0, 4*len(ids)),
		postOff:   make([]byte, 0, 8*(len(ids)+1)),
		postings:  make([]byte, 0, postLen),
	}
	for _, id := range ids {
		ix.termOff = binary.LittleEndian.AppendUint64(ix.termOff, uint64(len(ix.termBytes)))
		ix.termBytes = append(ix.termBytes, b.terms[id]...)
		ix.df = binary.LittleEndian.AppendUint32(ix.df, b.df[id])
		ix.postOff = binary.LittleEndian.AppendUint64(ix.postOff, uint64(len(ix.postings)))
		ix.postings = append(ix.postings, b.postings[id]...)
		b.postings[id] = nil
	}
	ix.termOff = binary.LittleEndian.AppendUint64(ix.termOff, uint64(len(ix.termBytes)))
	ix.postOff = binary.LittleEndian.AppendUint64(ix.postOff, uint64(len(ix.postings)))
	ix.init()
	*b = BM25Builder{}
	return ix
}

// init computes avgdl and the norm cache as Lucene's BM25Similarity.scorer:
//
//	avgdl = (float32)(sumTotalTermFreq / (double) docCount)
//	cache[i] = 1 / (k1 · ((1 − b) + b · LENGTH_TABLE[i] / avgdl))   (float32)
func (ix *BM25Index) init() {
	if ix.docCount > 0 {
		ix.avgdl = float32(float64(ix.sumTTF) / float64(ix.docCount))
	}
	k1, b := ix.params.K1, ix.params.B
	for i := range ix.cache {
		if ix.avgdl == 0 {
			continue
		}
		dl := float32(DecodeLength(byte(i)))
		ix.cache[i] = 1 / (k1 * ((1 - b) + b*dl/ix.avgdl))
	}
	ix.accPool.New = func() any { return &bm25Accumulator{score: make([]float64, ix.numDocs)} }
}

// Len returns the number of documents (rows).
func (ix *BM25Index) Len() int { return ix.numDocs }

// NumTerms returns the vocabulary size.
func (ix *BM25Index) NumTerms() int { return ix.numTerms }

// AvgDocLength returns avgdl as Lucene computes it (float32).
func (ix *BM25Index) AvgDocLength() float32 { return ix.avgdl }

// Params returns k1 and b.
func (ix *BM25Index) Params() BM25Params { return ix.params }

// Analyzer returns the analyzer queries are analysed with.
func (ix *BM25Index) Analyzer() *Analyzer { return ix.analyzer }

func (ix *BM25Index) term(i int) []byte {
	s := binary.LittleEndian.Uint64(ix.termOff[8*i:])
	e := binary.LittleEndian.Uint64(ix.termOff[8*i+8:])
	return ix.termBytes[s:e]
}

// lookup returns the term's ordinal by binary search in the sorted vocabulary.
func (ix *BM25Index) lookup(t string) (int, bool) {
	tb := []byte(t)
	i := sort.Search(ix.numTerms, func(i int) bool { return bytes.Compare(ix.term(i), tb) >= 0 })
	return i, i < ix.numTerms && bytes.Equal(ix.term(i), tb)
}

// DocFreq returns the number of documents containing the (analysed) term.
func (ix *BM25Index) DocFreq(term string) int {
	i, ok := ix.lookup(term)
	if !ok {
		return 0
	}
	return int(binary.LittleEndian.Uint32(ix.df[4*i:]))
}

// RowScore is one BM25 result: a corpus row and its score.
type RowScore struct {
	Row   int
	Score float32
}

// bm25Accumulator is a dense score array plus the list of rows touched, so
// that resetting costs O(touched), not O(N).
type bm25Accumulator struct {
	score   []float64
	touched []int32
}

// Search returns the k best rows for one query, best first.
func (ix *BM25Index) Search(query string, k int) []RowScore {
	return ix.searchTerms(ix.analyzer.Analyze(query), k)
}

func (ix *BM25Index) searchTerms(terms []string, k int) []RowScore {
	if k <= 0 || len(terms) == 0 || ix.numDocs == 0 {
		return nil
	}
	// Bag of words: a repeated query term becomes one clause boosted by its count.
	counts := make(map[string]int, len(terms))
	uniq := terms[:0:0]
	for _, t := range terms {
		if counts[t] == 0 {
			uniq = append(uniq, t)
		}
		counts[t]++
	}
	acc := ix.accPool.Get().(*bm25Accumulator)
	defer ix.accPool.Put(acc)
	for _, t := range uniq {
		i, ok := ix.lookup(t)
		if !ok {
			continue
		}
		df := binary.LittleEndian.Uint32(ix.df[4*i:])
		weight := float32(counts[t]) * BM25IDF(uint64(df), ix.docCount)
		p := ix.postings[binary.LittleEndian.Uint64(ix.postOff[8*i:]):binary.LittleEndian.Uint64(ix.postOff[8*i+8:])]
		doc := uint64(0)
		for j := uint32(0); j < df; j++ {
			delta, n := binary.Uvarint(p)
			p = p[n:]
			tf, m := binary.Uvarint(p)
			p = p[m:]
			doc += delta
			s := weight - weight/(1+float32(tf)*ix.cache[ix.norms[doc]])
			if acc.score[doc] == 0 {
				acc.touched = append(acc.touched, int32(doc))
			}
			acc.score[doc] += float64(s)
		}
	}
	h := make(rowHeap, 0, min(k, len(acc.touched)))
	for _, d := range acc.touched {
		r := RowScore{Row: int(d), Score: float32(acc.score[d])}
		acc.score[d] = 0
		if len(h) < k {
			heap.Push(&h, r)
		} else if worse(h[0], r) {
			h[0] = r
			heap.Fix(&h, 0)
		}
	}
	acc.touched = acc.touched[:0]
	out := make([]RowScore, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(RowScore)
	}
	return out
}

// worse reports whether a ranks below b (lower score, or equal score and
// higher row — Lucene breaks ties by document order).
func worse(a, b RowScore) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return a.Row > b.Row
}

// rowHeap is a min-heap by rank: the root is the worst kept result.
type rowHeap []RowScore

func (h rowHeap) Len() int           { return len(h) }
func (h rowHeap) Less(i, j int) bool { return worse(h[i], h[j]) }
func (h rowHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rowHeap) Push(x any)        { *h = append(*h, x.(RowScore)) }
func (h *rowHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// SearchBatch searches many queries on all cores (GOMAXPROCS workers). The
// result for query i is out[i]. It stops early when ctx is cancelled.
func (ix *BM25Index) SearchBatch(ctx context.Context, queries []string, k int) ([][]RowScore, error) {
	out := make([][]RowScore, len(queries))
	workers := min(runtime.GOMAXPROCS(0), len(queries))
	if workers <= 1 {
		for i, q := range queries {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			out[i] = ix.Search(q, k)
		}
		return out, nil
	}
	var (
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = ix.Search(queries[i], k)
			}
		}()
	}
	var err error
	for i := range queries {
		if err = ctx.Err(); err != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	return out, nil
}

// BM25 file layout (little-endian), loaded with one read and used in place:
//
//	magic "CASBM25\x01" | version u32 | reserved u32
//	k1 f32 | b f32 | analyzer JSON length u32 | analyzer JSON
//	numDocs u64 | docCount u64 | sumTTF u64 | numTerms u64 | termBytes u64 | postings u64
//	norms [numDocs]u8 | termOff [numTerms+1]u64 | termBytes | df [numTerms]u32
//	postOff [numTerms+1]u64 | postings
//	crc32-Castagnoli u32 of everything before
const (
	bm25Magic   = "CASBM25\x01"
	bm25Version = 1
)

// WriteTo serialises the index.
func (ix *BM25Index) WriteTo(w io.Writer) (int64, error) {
	aj, err := json.Marshal(ix.analyzer.Settings())
	if err != nil {
		return 0, err
	}
	var hdr []byte
	hdr = append(hdr, bm25Magic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, bm25Version)
	hdr = binary.LittleEndian.AppendUint32(hdr, 0)
	hdr = binary.LittleEndian.AppendUint32(hdr, math.Float32bits(ix.params.K1))
	hdr = binary.LittleEndian.AppendUint32(hdr, math.Float32bits(ix.params.B))
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(aj)))
	hdr = append(hdr, aj...)
	for _, v := range []uint64{uint64(ix.numDocs), ix.docCount, ix.sumTTF, uint64(ix.numTerms), uint64(len(ix.termBytes)), uint64(len(ix.postings))} {
		hdr = binary.LittleEndian.AppendUint64(hdr, v)
	}
	crc := crc32.New(corpusCRC)
	mw := io.MultiWriter(w, crc)
	var total int64
	for _, part := range [][]byte{hdr, ix.norms, ix.termOff, ix.termBytes, ix.df, ix.postOff, ix.postings} {
		n, err := mw.Write(part)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	n, err := w.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
	return total + int64(n), err
}

// Save writes the index to path (temp file + rename).
func (ix *BM25Index) Save(path string) error {
	var buf bytes.Buffer
	buf.Grow(len(ix.postings) + len(ix.termBytes) + 20*ix.numTerms + ix.numDocs + 1024)
	if _, err := ix.WriteTo(&buf); err != nil {
		return fmt.Errorf("encode bm25 index: %w", err)
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

// LoadBM25 reads an index written by Save. The file is read once and the
// postings are used in place (no per-term allocation), so loading costs one
// sequential read plus a checksum.
func LoadBM25(path string) (*BM25Index, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load bm25 index: %w", err)
	}
	ix, err := DecodeBM25(raw)
	if err != nil {
		return nil, fmt.Errorf("load bm25 index %s: %w", path, err)
	}
	return ix, nil
}

// DecodeBM25 parses a serialised index, validating sizes, offsets and the
// checksum; it never panics on corrupt input.
func DecodeBM25(raw []byte) (*BM25Index, error) {
	if len(raw) < 8+4*6 {
		return nil, fmt.Errorf("truncated (%d bytes)", len(raw))
	}
	if string(raw[:8]) != bm25Magic {
		return nil, errors.New("not a cas BM25 index (wrong magic number)")
	}
	body := raw[:len(raw)-4]
	if want, got := binary.LittleEndian.Uint32(raw[len(raw)-4:]), crc32.Checksum(body, corpusCRC); want != got {
		return nil, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	r := byteReader{b: body[8:]}
	if v := r.u32(); v != bm25Version {
		return nil, fmt.Errorf("unsupported version %d", v)
	}
	r.u32()
	p := BM25Params{K1: math.Float32frombits(r.u32()), B: math.Float32frombits(r.u32())}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	aj := r.bytes(uint64(r.u32()))
	numDocs, docCount, sumTTF, numTerms, termLen, postLen := r.u64(), r.u64(), r.u64(), r.u64(), r.u64(), r.u64()
	if r.err != nil {
		return nil, r.err
	}
	var as AnalyzerSettings
	if err := json.Unmarshal(aj, &as); err != nil {
		return nil, fmt.Errorf("analyzer settings: %w", err)
	}
	a, err := NewAnalyzer(as)
	if err != nil {
		return nil, err
	}
	rest := uint64(len(r.b))
	if numDocs > rest || numTerms > rest/20 || termLen > rest || postLen > rest {
		return nil, fmt.Errorf("header sizes exceed the file (docs %d, terms %d)", numDocs, numTerms)
	}
	if want := numDocs + 8*(numTerms+1) + termLen + 4*numTerms + 8*(numTerms+1) + postLen; want != rest {
		return nil, fmt.Errorf("body is %d bytes, header says %d", rest, want)
	}
	if docCount > numDocs || numDocs > math.MaxInt32 {
		return nil, fmt.Errorf("docCount %d > numDocs %d", docCount, numDocs)
	}
	ix := &BM25Index{
		params: p, analyzer: a, numDocs: int(numDocs), docCount: docCount, sumTTF: sumTTF,
		numTerms:  int(numTerms),
		norms:     r.bytes(numDocs),
		termOff:   r.bytes(8 * (numTerms + 1)),
		termBytes: r.bytes(termLen),
		df:        r.bytes(4 * numTerms),
		postOff:   r.bytes(8 * (numTerms + 1)),
		postings:  r.bytes(postLen),
	}
	if r.err != nil {
		return nil, r.err
	}
	if err := ix.validate(); err != nil {
		return nil, err
	}
	ix.init()
	return ix, nil
}

// validate checks the offsets tables and walks every posting list once, so
// a corrupt file is rejected at load rather than crashing a search.
func (ix *BM25Index) validate() error {
	for _, tbl := range []struct {
		name string
		off  []byte
		size int
	}{{"term", ix.termOff, len(ix.termBytes)}, {"postings", ix.postOff, len(ix.postings)}} {
		prev := uint64(0)
		for i := 0; i <= ix.numTerms; i++ {
			o := binary.LittleEndian.Uint64(tbl.off[8*i:])
			if o < prev || o > uint64(tbl.size) || (i == 0 && o != 0) || (i == ix.numTerms && o != uint64(tbl.size)) {
				return fmt.Errorf("%s offset %d of term %d out of order", tbl.name, o, i)
			}
			prev = o
		}
	}
	var sumTF uint64
	for i := 0; i < ix.numTerms; i++ {
		if i > 0 && bytes.Compare(ix.term(i-1), ix.term(i)) >= 0 {
			return fmt.Errorf("vocabulary not sorted at term %d", i)
		}
		df := binary.LittleEndian.Uint32(ix.df[4*i:])
		if df == 0 || uint64(df) > ix.docCount {
			return fmt.Errorf("term %q: df %d out of range", ix.term(i), df)
		}
		p := ix.postings[binary.LittleEndian.Uint64(ix.postOff[8*i:]):binary.LittleEndian.Uint64(ix.postOff[8*i+8:])]
		doc := uint64(0)
		for j := uint32(0); j < df; j++ {
			delta, n := binary.Uvarint(p)
			if n <= 0 {
				return fmt.Errorf("term %q: bad posting %d", ix.term(i), j)
			}
			p = p[n:]
			tf, m := binary.Uvarint(p)
			if m <= 0 || tf == 0 {
				return fmt.Errorf("term %q: bad frequency in posting %d", ix.term(i), j)
			}
			p = p[m:]
			if j > 0 && delta == 0 {
				return fmt.Errorf("term %q: repeated document in posting %d", ix.term(i), j)
			}
			doc += delta
			if doc >= uint64(ix.numDocs) {
				return fmt.Errorf("term %q: document %d out of range", ix.term(i), doc)
			}
			sumTF += tf
		}
		if len(p) != 0 {
			return fmt.Errorf("term %q: %d trailing posting bytes", ix.term(i), len(p))
		}
	}
	if sumTF != ix.sumTTF {
		return fmt.Errorf("postings hold %d terms, header says %d", sumTF, ix.sumTTF)
	}
	return nil
}

// byteReader reads little-endian fields, remembering the first overrun.
type byteReader struct {
	b   []byte
	err error
}

func (r *byteReader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("truncated: need %d bytes, %d left", n, len(r.b))
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *byteReader) u32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *byteReader) u64() uint64 {
	b := r.bytes(8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}
