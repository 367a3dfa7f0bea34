package vector

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/internal/relpath"
	"github.com/cas-engine/cas/tensor"
)

// The cas index file (version 1), little-endian:
//
//	offset 0   magic "CASINDEX"
//	       8   uint32 version (1)
//	      12   uint32 header length H
//	      16   uint32 CRC-32C of the header
//	      20   uint32 reserved (0)
//	      24   header: H bytes of JSON (casHeader)
//	      …    zero padding to a multiple of 64: the data start
//	           sections, each at data start + its offset (a multiple of 64)
//
// The header names every section with its offset, length and CRC-32C
// (Castagnoli). Sections: "codes" (n·d components, F32/F16/SQ8), "ids"
// (int64, optional for flat), "norms" (float32 ‖x̂‖², L2 only), "sq_min"
// and "sq_scale" (float32 × d, SQ8 only) and, for IVF, "centroids"
// (float32 nlist × d) and "list_offsets" (uint64 × nlist+1: list l holds
// rows [off[l], off[l+1]) of codes, ids and norms). An IVF-PQ file (kind
// "ivfpq", encoding "pq8") has M-byte "codes" per vector, "ids",
// "centroids", "list_offsets" and "pq_centroids" (float32 M × 256 × d/M,
// FAISS's ProductQuantizer layout). Sections are 64-byte
// aligned so that opening maps the file and uses the vectors in place.
const (
	casMagic   = "CASINDEX"
	casVersion = 1
	casPrefix  = 24
	casAlign   = 64
	FileName   = "index.cas"
	maxHeader  = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type casHeader struct {
	Kind     string `json:"kind"` // "flat" | "ivf" | "ivfpq"
	Metric   string `json:"metric"`
	Encoding string `json:"encoding"`
	Dim      int    `json:"dim"`
	Count    int64  `json:"count"`
	NList    int    `json:"nlist,omitempty"`
	NProbe   int    `json:"nprobe,omitempty"`
	Residual bool   `json:"residual,omitempty"`
	// IVF-PQ: sub-quantizers, default re-rank depth, and the F32 vectors
	// the re-rank reads (relative to the file's folder when inside it).
	PQM      int          `json:"pq_m,omitempty"`
	Rerank   int          `json:"rerank,omitempty"`
	Refine   string       `json:"refine,omitempty"`
	Sections []casSection `json:"sections"`
}

type casSection struct {
	Name   string `json:"name"`
	Offset int64  `json:"offset"` // from the data start
	Length int64  `json:"length"`
	CRC32C uint32 `json:"crc32c"`
}

// sectionData is a section to write: its bytes in pieces.
type sectionData struct {
	name   string
	pieces [][]byte
}

// SaveIndex writes a Flat or IVF index to dir/index.cas (creating dir),
// through a temporary file renamed into place, so a failed save never
// leaves a half-written index.
func SaveIndex(ix Index, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save index: %w", err)
	}
	return WriteIndexFile(ix, filepath.Join(dir, FileName))
}

// WriteIndexFile writes a Flat or IVF index to one file (see SaveIndex).
func WriteIndexFile(ix Index, path string) error {
	if !littleEndian {
		return errors.New("save index: index files are little-endian; big-endian hosts are not supported")
	}
	h, secs, err := casSections(ix)
	if err != nil {
		return fmt.Errorf("save index %s: %w", path, err)
	}
	if v, ok := ix.(*IVFPQ); ok {
		if h.Refine, err = relpath.Store(filepath.Dir(path), "", v.refinePath); err != nil {
			return fmt.Errorf("save index %s: %w", path, err)
		}
	}
	var off int64
	for _, s := range secs {
		crc := uint32(0)
		var n int64
		for _, p := range s.pieces {
			crc = crc32.Update(crc, castagnoli, p)
			n += int64(len(p))
		}
		h.Sections = append(h.Sections, casSection{Name: s.name, Offset: off, Length: n, CRC32C: crc})
		off = alignUp(off+n, casAlign)
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("save index %s: %w", path, err)
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { return writeCAS(w, hj, secs, h.Sections) }); err != nil {
		return fmt.Errorf("save index: %w", err)
	}
	return nil
}

func writeCAS(f io.Writer, hj []byte, secs []sectionData, meta []casSection) error {
	w := bufio.NewWriterSize(f, 1<<20)
	var pre [casPrefix]byte
	copy(pre[:], casMagic)
	binary.LittleEndian.PutUint32(pre[8:], casVersion)
	binary.LittleEndian.PutUint32(pre[12:], uint32(len(hj)))
	binary.LittleEndian.PutUint32(pre[16:], crc32.Checksum(hj, castagnoli))
	w.Write(pre[:])
	w.Write(hj)
	pos := int64(casPrefix + len(hj))
	start := alignUp(pos, casAlign)
	pad := make([]byte, casAlign)
	w.Write(pad[:start-pos])
	pos = 0
	for i, s := range secs {
		w.Write(pad[:meta[i].Offset-pos])
		for _, p := range s.pieces {
			if _, err := w.Write(p); err != nil {
				return err
			}
		}
		pos = meta[i].Offset + meta[i].Length
	}
	return w.Flush()
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// casSections lays out an index as header fields and sections.
func casSections(ix Index) (*casHeader, []sectionData, error) {
	switch v := ix.(type) {
	case *Flat:
		h := &casHeader{Kind: "flat", Metric: v.metric.String(), Encoding: v.codes.enc.String(), Dim: v.d, Count: int64(v.Len())}
		secs := []sectionData{{"codes", [][]byte{codesBytes(&v.codes)}}}
		if v.ids != nil {
			secs = append(secs, sectionData{"ids", [][]byte{bytesOf(v.ids)}})
		}
		if v.metric == L2 {
			secs = append(secs, sectionData{"norms", [][]byte{bytesOf(v.norms)}})
		}
		if v.codes.enc == SQ8 {
			if v.sq == nil {
				return nil, nil, ErrNotTrained
			}
			secs = append(secs, sectionData{"sq_min", [][]byte{bytesOf(v.sq.Min)}}, sectionData{"sq_scale", [][]byte{bytesOf(v.sq.Scale)}})
		}
		return h, secs, nil
	case *IVF:
		if !v.IsTrained() {
			return nil, nil, ErrNotTrained
		}
		h := &casHeader{Kind: "ivf", Metric: v.metric.String(), Encoding: v.enc.String(), Dim: v.d, Count: int64(v.ntotal),
			NList: v.nlist, NProbe: v.nprobe, Residual: v.residual}
		offs := make([]uint64, v.nlist+1)
		var codes, ids, norms [][]byte
		for l := range v.lists {
			li := &v.lists[l]
			offs[l+1] = offs[l] + uint64(li.codes.n)
			codes = append(codes, codesBytes(&li.codes))
			ids = append(ids, bytesOf(li.ids))
			norms = append(norms, bytesOf(li.norms))
		}
		secs := []sectionData{
			{"codes", codes}, {"ids", ids},
			{"centroids", [][]byte{bytesOf(v.quantizer.codes.f32)}},
			{"list_offsets", [][]byte{bytesOf(offs)}},
		}
		if v.metric == L2 {
			secs = append(secs, sectionData{"norms", norms})
		}
		if v.enc == SQ8 {
			secs = append(secs, sectionData{"sq_min", [][]byte{bytesOf(v.sq.Min)}}, sectionData{"sq_scale", [][]byte{bytesOf(v.sq.Scale)}})
		}
		return h, secs, nil
	case *IVFPQ:
		if !v.IsTrained() {
			return nil, nil, ErrNotTrained
		}
		h := &casHeader{Kind: "ivfpq", Metric: v.metric.String(), Encoding: pqEncoding, Dim: v.d, Count: int64(v.ntotal),
			NList: v.nlist, NProbe: v.nprobe, Residual: true, PQM: v.pq.m, Rerank: v.rerank}
		offs := make([]uint64, v.nlist+1)
		var codes, ids [][]byte
		for l := range v.lists {
			li := &v.lists[l]
			offs[l+1] = offs[l] + uint64(len(li.ids))
			codes = append(codes, li.codes)
			ids = append(ids, bytesOf(li.ids))
		}
		return h, []sectionData{
			{"codes", codes}, {"ids", ids},
			{"centroids", [][]byte{bytesOf(v.quantizer.codes.f32)}},
			{"list_offsets", [][]byte{bytesOf(offs)}},
			{"pq_centroids", [][]byte{bytesOf(v.pq.cent)}},
		}, nil
	}
	return nil, nil, fmt.Errorf("cannot save a %T (only *Flat, *IVF and *IVFPQ)", ix)
}

func codesBytes(c *vecCodes) []byte {
	switch c.enc {
	case F16:
		return bytesOf(c.f16)
	case SQ8:
		return bytesOf(c.u8)
	}
	return bytesOf(c.f32)
}

// IndexLoadOptions tune OpenIndex. A nil *IndexLoadOptions verifies
// everything.
type IndexLoadOptions struct {
	// SkipPayloadChecksum skips the CRC of the large sections (codes, ids,
	// norms) of a cas index file, so that opening a very large index does
	// not read it all. The header and small sections are always verified,
	// and all sizes and offsets are always checked.
	SkipPayloadChecksum bool

	// ignoreChecksums skips every CRC (fuzz tests use it to reach the
	// structural checks behind them).
	ignoreChecksums bool
}

// OpenIndex opens an index for searching: a cas index directory (or its
// index.cas file), or a FAISS index file (IndexFlatIP, IndexFlatL2,
// IndexIVFFlat, or IndexIDMap around a flat index). The file is
// memory-mapped and its vectors are used in place; Close unmaps it. A
// truncated or corrupt file is an error, never a panic.
func OpenIndex(path string, opt *IndexLoadOptions) (Index, error) {
	if opt == nil {
		opt = &IndexLoadOptions{}
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	if st.IsDir() {
		path = filepath.Join(path, FileName)
	}
	if !littleEndian {
		return nil, fmt.Errorf("open index %s: index files are little-endian; big-endian hosts are not supported", path)
	}
	ix, _, err := openMapped(path, opt)
	if err != nil {
		return nil, err
	}
	if v, ok := ix.(*IVFPQ); ok && v.refinePath != "" {
		if err := v.openRefine(filepath.Dir(path)); err != nil {
			ix.Close()
			return nil, fmt.Errorf("open index %s: %w", path, err)
		}
	}
	return ix, nil
}

// openMapped maps the index file at path and decodes it in place; it
// returns the index (whose Close unmaps the file) and the mapped bytes.
func openMapped(path string, opt *IndexLoadOptions) (Index, []byte, error) {
	b, release, err := mapFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open index: %w", err)
	}
	var ix Index
	switch {
	case bytes.HasPrefix(b, []byte(casMagic)):
		ix, err = decodeCAS(b, opt)
	case isFAISS(b):
		ix, err = decodeFAISS(b)
	default:
		err = errors.New("neither a cas index nor a supported FAISS index")
	}
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("open index %s: %w", path, err)
	}
	setCloser(ix, release)
	return ix, b, nil
}

func setCloser(ix Index, c func() error) {
	switch v := ix.(type) {
	case *Flat:
		v.closer = c
	case *IVF:
		v.closer = c
	case *IVFPQ:
		v.closer = c
	}
}

// decodeCAS builds an index over the bytes of a cas index file, without
// copying the vectors.
func decodeCAS(b []byte, opt *IndexLoadOptions) (Index, error) {
	if len(b) < casPrefix {
		return nil, fmt.Errorf("truncated: %d bytes, the prefix alone is %d", len(b), casPrefix)
	}
	if string(b[:8]) != casMagic {
		return nil, errors.New("bad magic")
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != casVersion {
		return nil, fmt.Errorf("format version %d, this build reads version %d", v, casVersion)
	}
	if binary.LittleEndian.Uint32(b[20:]) != 0 {
		return nil, errors.New("reserved prefix field is not zero (corrupt file)")
	}
	hlen := int64(binary.LittleEndian.Uint32(b[12:]))
	if hlen > maxHeader || casPrefix+hlen > int64(len(b)) {
		return nil, fmt.Errorf("truncated or corrupt: header of %d bytes in a %d-byte file", hlen, len(b))
	}
	hj := b[casPrefix : casPrefix+hlen]
	if !opt.ignoreChecksums && crc32.Checksum(hj, castagnoli) != binary.LittleEndian.Uint32(b[16:]) {
		return nil, errors.New("header checksum mismatch (corrupt file)")
	}
	var h casHeader
	dec := json.NewDecoder(bytes.NewReader(hj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	start := alignUp(casPrefix+hlen, casAlign)
	metric, err := ParseMetric(h.Metric)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	var enc Encoding // F32 for ivfpq, whose codes are PQ bytes
	if h.Kind == "ivfpq" {
		if h.Encoding != pqEncoding {
			return nil, fmt.Errorf("header: an ivfpq index has encoding %q, want %q", h.Encoding, pqEncoding)
		}
	} else if enc, err = ParseEncoding(h.Encoding); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	d := h.Dim
	if d <= 0 || d > maxDim {
		return nil, fmt.Errorf("header: dimension %d outside 1…%d", d, maxDim)
	}
	if h.Count < 0 || h.Count > int64(len(b)) {
		return nil, fmt.Errorf("header: count %d impossible in a %d-byte file", h.Count, len(b))
	}
	n := int(h.Count)

	// Locate, size-check and checksum every section.
	want := map[string]int64{"codes": h.Count * int64(d) * int64(enc.bytesPer())}
	optional := map[string]bool{}
	big := map[string]bool{"codes": true, "ids": true, "norms": true}
	switch h.Kind {
	case "flat":
		want["ids"] = h.Count * 8
		optional["ids"] = true
		if h.Residual {
			return nil, errors.New("header: a flat index has no residual codes")
		}
	case "ivf":
		if h.NList <= 0 || h.NList > 1<<24 {
			return nil, fmt.Errorf("header: nlist %d outside 1…%d", h.NList, 1<<24)
		}
		if h.Residual != (enc == SQ8) {
			return nil, fmt.Errorf("header: residual=%v with encoding %v", h.Residual, enc)
		}
		want["ids"] = h.Count * 8
		want["centroids"] = int64(h.NList) * int64(d) * 4
		want["list_offsets"] = int64(h.NList+1) * 8
	case "ivfpq":
		if h.NList <= 0 || h.NList > 1<<24 {
			return nil, fmt.Errorf("header: nlist %d outside 1…%d", h.NList, 1<<24)
		}
		if h.PQM <= 0 || d%h.PQM != 0 || !h.Residual {
			return nil, fmt.Errorf("header: ivfpq with %d sub-quantizers for d %d (residual %v)", h.PQM, d, h.Residual)
		}
		want["codes"] = h.Count * int64(h.PQM)
		want["ids"] = h.Count * 8
		want["centroids"] = int64(h.NList) * int64(d) * 4
		want["list_offsets"] = int64(h.NList+1) * 8
		want["pq_centroids"] = int64(d) * pqK * 4
	default:
		return nil, fmt.Errorf("header: unknown kind %q", h.Kind)
	}
	if h.Kind != "ivfpq" && (h.PQM != 0 || h.Rerank != 0 || h.Refine != "") {
		return nil, fmt.Errorf("header: pq_m, rerank and refine belong to an ivfpq index, not %q", h.Kind)
	}
	if metric == L2 && h.Kind != "ivfpq" {
		want["norms"] = h.Count * 4
	}
	if enc == SQ8 {
		want["sq_min"] = int64(d) * 4
		want["sq_scale"] = int64(d) * 4
	}
	sec := map[string][]byte{}
	for _, s := range h.Sections {
		w, ok := want[s.Name]
		if !ok {
			return nil, fmt.Errorf("header: unexpected section %q", s.Name)
		}
		if _, dup := sec[s.Name]; dup {
			return nil, fmt.Errorf("header: section %q twice", s.Name)
		}
		if s.Length != w {
			return nil, fmt.Errorf("section %q: %d bytes, expected %d", s.Name, s.Length, w)
		}
		if s.Offset < 0 || s.Offset%casAlign != 0 || s.Offset > int64(len(b)) || start+s.Offset > int64(len(b))-s.Length {
			return nil, fmt.Errorf("section %q at %d (+%d bytes) lies outside the %d-byte file (truncated?)", s.Name, s.Offset, s.Length, len(b))
		}
		data := b[start+s.Offset : start+s.Offset+s.Length]
		if !opt.ignoreChecksums && !(opt.SkipPayloadChecksum && big[s.Name]) && crc32.Checksum(data, castagnoli) != s.CRC32C {
			return nil, fmt.Errorf("section %q: checksum mismatch (corrupt file)", s.Name)
		}
		sec[s.Name] = data
	}
	for name := range want {
		if _, ok := sec[name]; !ok && !optional[name] {
			return nil, fmt.Errorf("missing section %q", name)
		}
	}

	if h.Kind == "ivfpq" {
		return decodeIVFPQ(&h, sec, metric)
	}
	codes := vecCodes{enc: enc, d: d, n: n}
	switch enc {
	case F32:
		codes.f32 = viewAs[float32](sec["codes"])
	case F16:
		codes.f16 = viewAs[uint16](sec["codes"])
	case SQ8:
		codes.u8 = viewAs[uint8](sec["codes"])
	}
	var sq *tensor.SQ8
	if enc == SQ8 {
		sq = &tensor.SQ8{Min: viewAs[float32](sec["sq_min"]), Scale: viewAs[float32](sec["sq_scale"])}
		if err := sq.Validate(); err != nil {
			return nil, err
		}
	}
	var ids []int64
	if s, ok := sec["ids"]; ok {
		ids = viewAs[int64](s)
		if ids == nil {
			ids = []int64{}
		}
	}
	var norms []float32
	if metric == L2 {
		norms = viewAs[float32](sec["norms"])
	}

	if h.Kind == "flat" {
		return &Flat{d: d, metric: metric, codes: codes, sq: sq, ids: ids, norms: norms}, nil
	}
	offs, q, err := casLists(&h, sec, metric)
	if err != nil {
		return nil, err
	}
	ix := &IVF{d: d, nlist: h.NList, metric: metric, enc: enc, residual: h.Residual,
		nprobe: min(max(1, h.NProbe), h.NList), quantizer: q, sq: sq, ntotal: n}
	ix.kmeans.Metric = metric
	ix.kmeans.Spherical = metric == InnerProduct
	ix.lists = make([]ivfList, h.NList)
	for l := range ix.lists {
		lo, hi := int(offs[l]), int(offs[l+1])
		li := &ix.lists[l]
		li.codes = codes.view(lo, hi)
		li.ids = ids[lo:hi:hi]
		if norms != nil {
			li.norms = norms[lo:hi:hi]
		}
	}
	return ix, nil
}

// casLists checks the list offsets of an IVF or IVF-PQ file (rising from 0
// to the count) and builds its coarse quantizer over the centroids.
func casLists(h *casHeader, sec map[string][]byte, metric Metric) ([]uint64, *Flat, error) {
	d, n := h.Dim, uint64(h.Count)
	offs := viewAs[uint64](sec["list_offsets"])
	if offs[0] != 0 || offs[h.NList] != n {
		return nil, nil, fmt.Errorf("list offsets run from %d to %d, expected 0 to %d", offs[0], offs[h.NList], n)
	}
	for l := range h.NList {
		if offs[l+1] < offs[l] {
			return nil, nil, fmt.Errorf("list offsets decrease at list %d", l)
		}
	}
	q := &Flat{d: d, metric: metric, codes: vecCodes{enc: F32, d: d, n: h.NList, f32: viewAs[float32](sec["centroids"])}}
	if metric == L2 {
		q.norms = make([]float32, h.NList)
		tensor.SquaredNorms(q.norms, q.codes.f32, d)
	}
	return offs, q, nil
}

// decodeIVFPQ builds an IVF-PQ index over the sections of a cas file.
func decodeIVFPQ(h *casHeader, sec map[string][]byte, metric Metric) (*IVFPQ, error) {
	offs, q, err := casLists(h, sec, metric)
	if err != nil {
		return nil, err
	}
	pq, err := newPQ(h.Dim, h.PQM)
	if err != nil {
		return nil, err
	}
	pq.cent = viewAs[float32](sec["pq_centroids"])
	for i, v := range pq.cent {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("pq centroid component %d is not finite", i)
		}
	}
	if h.Rerank < 0 {
		return nil, fmt.Errorf("header: rerank %d", h.Rerank)
	}
	ix := &IVFPQ{d: h.Dim, nlist: h.NList, metric: metric, nprobe: min(max(1, h.NProbe), h.NList), rerank: h.Rerank,
		quantizer: q, pq: pq, ntotal: int(h.Count), refinePath: h.Refine, lists: make([]pqList, h.NList)}
	ix.kmeans.Metric = metric
	ix.kmeans.Spherical = metric == InnerProduct
	codes := sec["codes"]
	ids := viewAs[int64](sec["ids"])
	for l := range ix.lists {
		lo, hi := int(offs[l]), int(offs[l+1])
		ix.lists[l] = pqList{codes: codes[lo*h.PQM : hi*h.PQM : hi*h.PQM], ids: ids[lo:hi:hi]}
	}
	return ix, nil
}
