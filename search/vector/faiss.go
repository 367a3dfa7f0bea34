package vector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/tensor"
)

// FAISS index files, as faiss::write_index writes them (little-endian):
//
//	IndexFlatIP "IxFI", IndexFlatL2 "IxF2", IndexFlat "IxFl":
//	  header, uint64 m, m float32 (= ntotal·d)
//	IndexIVFFlat "IwFl":
//	  header, uint64 nlist, uint64 nprobe, quantizer (a flat index),
//	  direct map (uint8 type, uint64 m, m int64 [, uint64 p, p (int64,
//	  int64) pairs for a hash table]), inverted lists "ilar": uint64
//	  nlist, uint64 code size (4·d), list sizes ("full": uint64 nlist then
//	  nlist uint64; "sprs": uint64 2p then p (list, size) pairs), then for
//	  each non-empty list its codes and its int64 ids
//	IndexIVFPQ "IwPQ":
//	  IVF header as IndexIVFFlat's (through the direct map), uint8
//	  by_residual, uint64 code size (M), product quantizer (uint64 d, M,
//	  nbits, then vector of float32 centroids M × 2^nbits × d/M), inverted
//	  lists "ilar" of M-byte codes; legacy "IvPQ": per-list id vectors
//	  right after the quantizer, and per-list code vectors after the
//	  product quantizer instead of "ilar"
//	IndexIDMap "IxMp" / IndexIDMap2 "IxM2":
//	  header, sub-index, uint64 ntotal, ntotal int64 ids
//
// where header = int32 d, int64 ntotal, int64 ×2 (unused), uint8
// is_trained, int32 metric (0 inner product, 1 L2). The reader maps the
// file and views the float32 data in place (FAISS stores it at odd
// offsets; see viewAs).

var faissFourCCs = []string{"IxFI", "IxF2", "IxFl", "IwFl", "IwPQ", "IvPQ", "IxMp", "IxM2"}

func isFAISS(b []byte) bool {
	if len(b) < 4 {
		return false
	}
	for _, f := range faissFourCCs {
		if string(b[:4]) == f {
			return true
		}
	}
	return false
}

// faissReader is a bounds-checked little-endian cursor.
type faissReader struct {
	b   []byte
	off int
	err error
}

func (r *faissReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.off, fmt.Sprintf(format, args...))
	}
}

func (r *faissReader) take(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail("%s needs %d bytes, %d left (truncated file?)", what, n, len(r.b)-r.off)
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *faissReader) u8(what string) uint8 {
	if s := r.take(1, what); s != nil {
		return s[0]
	}
	return 0
}

func (r *faissReader) u32(what string) uint32 {
	if s := r.take(4, what); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (r *faissReader) u64(what string) uint64 {
	if s := r.take(8, what); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (r *faissReader) fourcc() string {
	if s := r.take(4, "fourcc"); s != nil {
		return string(s)
	}
	return ""
}

// vector reads a FAISS std::vector: uint64 count, then count elements of
// elem bytes.
func (r *faissReader) vector(elem uint64, what string) []byte {
	n := r.u64(what + " length")
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b))/elem {
		r.fail("%s claims %d elements (corrupt or truncated file)", what, n)
		return nil
	}
	return r.take(n*elem, what)
}

type faissHeader struct {
	d       int
	ntotal  int64
	trained bool
	metric  Metric
}

func (r *faissReader) header() faissHeader {
	var h faissHeader
	d := int32(r.u32("d"))
	h.ntotal = int64(r.u64("ntotal"))
	r.u64("dummy")
	r.u64("dummy")
	h.trained = r.u8("is_trained") != 0
	m := r.u32("metric_type")
	if r.err != nil {
		return h
	}
	if d <= 0 || d > maxDim {
		r.fail("dimension %d outside 1…%d", d, maxDim)
	}
	h.d = int(d)
	if h.ntotal < 0 || h.ntotal > int64(len(r.b)) {
		r.fail("ntotal %d impossible in a %d-byte file", h.ntotal, len(r.b))
	}
	switch m {
	case 0:
		h.metric = InnerProduct
	case 1:
		h.metric = L2
	default:
		r.fail("metric type %d is not supported (only inner product and L2)", m)
	}
	return h
}

// decodeFAISS builds an index over the bytes of a FAISS index file.
func decodeFAISS(b []byte) (Index, error) {
	r := &faissReader{b: b}
	ix := r.index(0)
	if r.err != nil {
		return nil, fmt.Errorf("FAISS file: %w", r.err)
	}
	if r.off != len(b) {
		return nil, fmt.Errorf("FAISS file: %d trailing bytes after the index", len(b)-r.off)
	}
	return ix, nil
}

// index reads one (possibly nested) index.
func (r *faissReader) index(depth int) Index {
	if depth > 2 {
		r.fail("indexes nested too deeply")
		return nil
	}
	h := r.fourcc()
	switch h {
	case "IxFI", "IxF2", "IxFl":
		return r.flat(h)
	case "IwFl":
		return r.ivfFlat(depth)
	case "IwPQ", "IvPQ":
		return r.ivfPQ(depth, h == "IvPQ")
	case "IxMp", "IxM2":
		hd := r.header()
		sub := r.index(depth + 1)
		ids := r.vector(8, "id map")
		if r.err != nil {
			return nil
		}
		f, ok := sub.(*Flat)
		if !ok {
			r.fail("IndexIDMap around a %T is not supported (only around a flat index)", sub)
			return nil
		}
		if int64(len(ids)/8) != hd.ntotal || hd.ntotal != int64(f.Len()) || hd.d != f.d {
			r.fail("IndexIDMap of %d ids (header %d, d %d) around %d vectors of d %d", len(ids)/8, hd.ntotal, hd.d, f.Len(), f.d)
			return nil
		}
		f.ids = viewAs[int64](ids)
		if f.ids == nil {
			f.ids = []int64{}
		}
		return f
	case "":
		return nil
	}
	r.fail("FAISS index type %q is not supported (IndexFlatIP, IndexFlatL2, IndexIVFFlat, IndexIVFPQ, IndexIDMap)", h)
	return nil
}

func (r *faissReader) flat(fourcc string) *Flat {
	h := r.header()
	data := r.vector(4, "flat vectors")
	if r.err != nil {
		return nil
	}
	if fourcc == "IxFI" && h.metric != InnerProduct || fourcc == "IxF2" && h.metric != L2 {
		r.fail("%s with metric %v", fourcc, h.metric)
		return nil
	}
	if int64(len(data)/4) != h.ntotal*int64(h.d) {
		r.fail("flat index of %d × %d holds %d floats", h.ntotal, h.d, len(data)/4)
		return nil
	}
	f := &Flat{d: h.d, metric: h.metric, codes: vecCodes{enc: F32, d: h.d, n: int(h.ntotal), f32: viewAs[float32](data)}}
	if h.metric == L2 {
		f.norms = make([]float32, f.Len())
		tensor.SquaredNorms(f.norms, f.codes.f32, f.d)
	}
	return f
}

// faissIVFHead is what every IndexIVF file starts with (read_ivf_header).
type faissIVFHead struct {
	h      faissHeader
	nlist  uint64
	nprobe uint64
	q      *Flat
	// legacyIDs are the per-list id vectors of the legacy "Iv*" formats.
	legacyIDs [][]byte
}

// ivfHead reads the IVF header: index header, nlist, nprobe, the flat
// coarse quantizer, the legacy per-list ids (legacy), the direct map.
func (r *faissReader) ivfHead(depth int, legacy bool) *faissIVFHead {
	hd := &faissIVFHead{h: r.header()}
	hd.nlist = r.u64("nlist")
	hd.nprobe = r.u64("nprobe")
	if r.err != nil {
		return nil
	}
	if hd.nlist == 0 || hd.nlist > 1<<24 {
		r.fail("nlist %d outside 1…%d", hd.nlist, 1<<24)
		return nil
	}
	// Each list costs ~150 bytes of bookkeeping in memory but may take only
	// its centroid (4·d bytes) in the file: at d = 1, 2^24 empty lists
	// would cost 38× the file. Lists may cost at most 4× the file (plus
	// 1 MiB for small files).
	if perList := uint64(unsafe.Sizeof(ivfList{})) + 8; hd.nlist*perList > 4*uint64(len(r.b))+1<<20 {
		r.fail("nlist %d would take %d MB of list bookkeeping for a %d-byte file (over 4× its size)", hd.nlist, hd.nlist*perList>>20, len(r.b))
		return nil
	}
	qi := r.index(depth + 1)
	if r.err != nil {
		return nil
	}
	q, ok := qi.(*Flat)
	if !ok || q.ids != nil {
		r.fail("IVF quantizer is a %T, only a flat quantizer is supported", qi)
		return nil
	}
	h := hd.h
	if q.d != h.d || q.Len() != int(hd.nlist) || q.metric != h.metric {
		r.fail("quantizer (d %d, %d centroids, %v) does not match the IVF (d %d, nlist %d, %v)", q.d, q.Len(), q.metric, h.d, hd.nlist, h.metric)
		return nil
	}
	hd.q = q
	if legacy {
		hd.legacyIDs = make([][]byte, hd.nlist)
		for l := range hd.legacyIDs {
			hd.legacyIDs[l] = r.vector(8, "list ids")
		}
	}
	// Direct map: not needed for search.
	dmType := r.u8("direct map type")
	r.vector(8, "direct map")
	if dmType == 2 {
		r.vector(16, "direct map hash table")
	} else if dmType > 2 {
		r.fail("direct map type %d", dmType)
	}
	if r.err != nil {
		return nil
	}
	return hd
}

// invLists reads in-file inverted lists ("ilar") of nlist lists of
// codeSize-byte codes and returns each list's codes and ids.
func (r *faissReader) invLists(nlist, codeSize uint64) (codes, ids [][]byte) {
	if il := r.fourcc(); il != "ilar" {
		if r.err == nil {
			r.fail("inverted lists of type %q are not supported (only in-file \"ilar\")", il)
		}
		return nil, nil
	}
	if n := r.u64("invlists nlist"); n != nlist && r.err == nil {
		r.fail("inverted lists count %d, IVF nlist %d", n, nlist)
		return nil, nil
	}
	if cs := r.u64("code size"); cs != codeSize && r.err == nil {
		r.fail("inverted lists code size %d, expected %d", cs, codeSize)
		return nil, nil
	}
	sizes := make([]uint64, nlist)
	switch lt := r.fourcc(); lt {
	case "full":
		v := r.vector(8, "list sizes")
		if r.err != nil {
			return nil, nil
		}
		if uint64(len(v)/8) != nlist {
			r.fail("%d list sizes for %d lists", len(v)/8, nlist)
			return nil, nil
		}
		for i := range sizes {
			sizes[i] = binary.LittleEndian.Uint64(v[i*8:])
		}
	case "sprs":
		v := r.vector(8, "sparse list sizes")
		if r.err != nil {
			return nil, nil
		}
		if len(v)/8%2 != 0 {
			r.fail("odd sparse list size vector")
			return nil, nil
		}
		for i := 0; i < len(v)/8; i += 2 {
			l := binary.LittleEndian.Uint64(v[i*8:])
			if l >= nlist {
				r.fail("sparse list size for list %d of %d", l, nlist)
				return nil, nil
			}
			sizes[l] = binary.LittleEndian.Uint64(v[i*8+8:])
		}
	default:
		if r.err == nil {
			r.fail("list size encoding %q", lt)
		}
		return nil, nil
	}
	codes = make([][]byte, nlist)
	ids = make([][]byte, nlist)
	for l, n := range sizes {
		if n == 0 {
			continue
		}
		if n > uint64(len(r.b)) {
			r.fail("list %d claims %d vectors", l, n)
			return nil, nil
		}
		codes[l] = r.take(n*codeSize, "list codes")
		ids[l] = r.take(n*8, "list ids")
		if r.err != nil {
			return nil, nil
		}
	}
	return codes, ids
}

// checkTotal fails unless the lists hold the header's ntotal vectors.
func (r *faissReader) checkTotal(ids [][]byte, ntotal int64) bool {
	var total uint64
	for _, b := range ids {
		total += uint64(len(b) / 8)
	}
	if total != uint64(ntotal) {
		r.fail("inverted lists hold %d vectors, header says %d", total, ntotal)
		return false
	}
	return true
}

func (r *faissReader) ivfFlat(depth int) *IVF {
	hd := r.ivfHead(depth, false)
	if hd == nil {
		return nil
	}
	h, nlist := hd.h, hd.nlist
	codeSize := uint64(h.d) * 4
	codes, ids := r.invLists(nlist, codeSize)
	if r.err != nil || !r.checkTotal(ids, h.ntotal) {
		return nil
	}
	ix := &IVF{d: h.d, nlist: int(nlist), metric: h.metric, enc: F32,
		nprobe: int(min(max(1, hd.nprobe), nlist)), quantizer: hd.q, ntotal: int(h.ntotal)}
	ix.kmeans.Metric = h.metric
	ix.kmeans.Spherical = h.metric == InnerProduct
	ix.lists = make([]ivfList, nlist)
	for l := range ix.lists {
		li := &ix.lists[l]
		li.codes = newVecCodes(F32, h.d)
		if len(ids[l]) == 0 {
			continue
		}
		li.codes.f32 = viewAs[float32](codes[l])
		li.codes.n = len(ids[l]) / 8
		li.ids = viewAs[int64](ids[l])
		if h.metric == L2 {
			li.norms = make([]float32, li.codes.n)
			tensor.SquaredNorms(li.norms, li.codes.f32, h.d)
		}
	}
	return ix
}

// ivfPQ reads an IndexIVFPQ: "IwPQ" (lists in "ilar") or the legacy
// "IvPQ" (per-list ids in the IVF header, per-list code vectors after the
// product quantizer), as faiss/impl/index_read.cpp's read_ivfpq. Only
// residual (by_residual) 8-bit codes are supported, FAISS's default.
func (r *faissReader) ivfPQ(depth int, legacy bool) *IVFPQ {
	hd := r.ivfHead(depth, legacy)
	if hd == nil {
		return nil
	}
	h, nlist := hd.h, hd.nlist
	byResidual := r.u8("by_residual")
	codeSize := r.u64("code size")
	pd, pm, nbits := r.u64("pq d"), r.u64("pq M"), r.u64("pq nbits")
	cent := r.vector(4, "pq centroids")
	if r.err != nil {
		return nil
	}
	switch {
	case byResidual != 1:
		r.fail("IndexIVFPQ with by_residual=%d is not supported (only residual codes, FAISS's default)", byResidual)
	case nbits != 8:
		r.fail("IndexIVFPQ with %d-bit codes is not supported (only 8)", nbits)
	case pd != uint64(h.d) || pm == 0 || pm > pd || pd%pm != 0 || codeSize != pm:
		r.fail("product quantizer of d %d, M %d, code size %d for an index of d %d", pd, pm, codeSize, h.d)
	case uint64(len(cent)/4) != pd*pqK:
		r.fail("product quantizer holds %d centroid floats, expected %d", len(cent)/4, pd*pqK)
	}
	if r.err != nil {
		return nil
	}
	var codes, ids [][]byte
	if legacy {
		ids = hd.legacyIDs
		codes = make([][]byte, nlist)
		for l := range codes {
			codes[l] = r.vector(1, "list codes")
			if r.err == nil && uint64(len(codes[l])) != uint64(len(ids[l])/8)*codeSize {
				r.fail("list %d: %d code bytes for %d ids", l, len(codes[l]), len(ids[l])/8)
			}
		}
	} else {
		codes, ids = r.invLists(nlist, codeSize)
	}
	if r.err != nil || !r.checkTotal(ids, h.ntotal) {
		return nil
	}
	pq, _ := newPQ(h.d, int(pm))
	pq.cent = viewAs[float32](cent)
	for i, v := range pq.cent {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			r.fail("pq centroid component %d is not finite", i)
			return nil
		}
	}
	ix := &IVFPQ{d: h.d, nlist: int(nlist), metric: h.metric, nprobe: int(min(max(1, hd.nprobe), nlist)),
		quantizer: hd.q, pq: pq, ntotal: int(h.ntotal), lists: make([]pqList, nlist)}
	ix.kmeans.Metric = h.metric
	ix.kmeans.Spherical = h.metric == InnerProduct
	for l := range ix.lists {
		c := codes[l]
		ix.lists[l] = pqList{codes: c[:len(c):len(c)], ids: viewAs[int64](ids[l])} // capped: Add copies, never writes the map
	}
	return ix
}

// WriteFAISS writes an F32 Flat index (as IndexFlatIP/IndexFlatL2, wrapped
// in an IndexIDMap when it has explicit ids), an F32 IVF index (as
// IndexIVFFlat) or an IVF-PQ index (as IndexIVFPQ, without its re-rank
// source) in FAISS's format, so FAISS can read what cas built.
func WriteFAISS(ix Index, path string) error {
	if !littleEndian {
		return errors.New("write FAISS index: big-endian hosts are not supported")
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { return writeFAISSIndex(w, ix) }); err != nil {
		return fmt.Errorf("write FAISS index: %w", err)
	}
	return nil
}

type faissWriter struct {
	w   io.Writer
	err error
}

func (fw *faissWriter) bytes(b []byte) {
	if fw.err == nil {
		_, fw.err = fw.w.Write(b)
	}
}
func (fw *faissWriter) u8(v uint8) { fw.bytes([]byte{v}) }
func (fw *faissWriter) u32(v uint32) {
	fw.bytes(binary.LittleEndian.AppendUint32(nil, v))
}
func (fw *faissWriter) u64(v uint64) {
	fw.bytes(binary.LittleEndian.AppendUint64(nil, v))
}

func (fw *faissWriter) header(d int, ntotal int, trained bool, m Metric) {
	fw.u32(uint32(d))
	fw.u64(uint64(ntotal))
	fw.u64(1 << 20)
	fw.u64(1 << 20)
	t := uint8(0)
	if trained {
		t = 1
	}
	fw.u8(t)
	fw.u32(uint32(m)) // InnerProduct = 0, L2 = 1, as METRIC_*
}

func (fw *faissWriter) flat(f *Flat) {
	if f.metric == L2 {
		fw.bytes([]byte("IxF2"))
	} else {
		fw.bytes([]byte("IxFI"))
	}
	fw.header(f.d, f.Len(), true, f.metric)
	fw.u64(uint64(len(f.codes.f32)))
	fw.bytes(bytesOf(f.codes.f32))
}

// ivfHead writes an IVF header (write_ivf_header) with no direct map.
func (fw *faissWriter) ivfHead(fourcc string, d, ntotal, nlist, nprobe int, m Metric, q *Flat) {
	fw.bytes([]byte(fourcc))
	fw.header(d, ntotal, true, m)
	fw.u64(uint64(nlist))
	fw.u64(uint64(nprobe))
	fw.flat(q)
	fw.u8(0) // no direct map
	fw.u64(0)
}

// invLists writes in-file inverted lists ("ilar", "full" sizes): each
// non-empty list's codes then its ids.
func (fw *faissWriter) invLists(codeSize uint64, codes, ids [][]byte) {
	fw.bytes([]byte("ilar"))
	fw.u64(uint64(len(ids)))
	fw.u64(codeSize)
	fw.bytes([]byte("full"))
	fw.u64(uint64(len(ids)))
	for _, b := range ids {
		fw.u64(uint64(len(b) / 8))
	}
	for l, b := range ids {
		if len(b) > 0 {
			fw.bytes(codes[l])
			fw.bytes(b)
		}
	}
}

func writeFAISSIndex(w io.Writer, ix Index) error {
	fw := &faissWriter{w: w}
	switch v := ix.(type) {
	case *Flat:
		if v.codes.enc != F32 {
			return fmt.Errorf("FAISS flat files hold float32 vectors; this index is %v", v.codes.enc)
		}
		if v.ids != nil {
			fw.bytes([]byte("IxMp"))
			fw.header(v.d, v.Len(), true, v.metric)
			fw.flat(v)
			fw.u64(uint64(len(v.ids)))
			fw.bytes(bytesOf(v.ids))
		} else {
			fw.flat(v)
		}
	case *IVF:
		if v.enc != F32 || v.residual {
			return fmt.Errorf("only F32 IVF indexes map to IndexIVFFlat; this index is %v", v.enc)
		}
		if !v.IsTrained() {
			return ErrNotTrained
		}
		fw.ivfHead("IwFl", v.d, v.ntotal, v.nlist, v.nprobe, v.metric, v.quantizer)
		codes, ids := make([][]byte, v.nlist), make([][]byte, v.nlist)
		for l := range v.lists {
			codes[l], ids[l] = bytesOf(v.lists[l].codes.f32), bytesOf(v.lists[l].ids)
		}
		fw.invLists(uint64(v.d*4), codes, ids)
	case *IVFPQ:
		if !v.IsTrained() {
			return ErrNotTrained
		}
		fw.ivfHead("IwPQ", v.d, v.ntotal, v.nlist, v.nprobe, v.metric, v.quantizer)
		fw.u8(1) // by_residual
		fw.u64(uint64(v.pq.m))
		fw.u64(uint64(v.d))
		fw.u64(uint64(v.pq.m))
		fw.u64(8)
		fw.u64(uint64(len(v.pq.cent)))
		fw.bytes(bytesOf(v.pq.cent))
		codes, ids := make([][]byte, v.nlist), make([][]byte, v.nlist)
		for l := range v.lists {
			codes[l], ids[l] = v.lists[l].codes, bytesOf(v.lists[l].ids)
		}
		fw.invLists(uint64(v.pq.m), codes, ids)
	default:
		return fmt.Errorf("cannot write a %T as a FAISS index", ix)
	}
	return fw.err
}
