package vector

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/internal/meter"
	"github.com/cas-engine/cas/internal/relpath"
)

// Converting imports. search.ImportFAISSFolder can re-encode the F32 vectors of a
// FAISS flat file while importing (F16: half the memory; SQ8: a quarter;
// IVF with nlist lists, SQ8 residual codes as FAISS's
// IndexIVFScalarQuantizer) into dir/vectors/index.cas. The conversion
// streams: the source stays memory-mapped and is read chunk by chunk, and
// the codes go straight to their place in the output file (pwrite into a
// pre-sized temporary file, renamed when complete), so the heap holds one
// chunk, the training sample, and for IVF one int32 list number per vector
// (84 MB for wiki-18's 21M) — never the index.

// casStreamHeader is the room reserved for the prefix and JSON header of a
// streamed cas file: the header is written last, padded with spaces (valid
// JSON whitespace) to fill it, so the data start is fixed before any
// section is written.
const casStreamHeader = 4096

// casStreamWriter writes a cas index file whose sections are filled in any
// order by offset, then checksummed and headed by finish.
type casStreamWriter struct {
	f    *atomicfile.File
	path string
	secs []casSection
}

func createCASStream(path string, names []string, lengths []int64) (*casStreamWriter, error) {
	tmp, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("write index: %w", err)
	}
	w := &casStreamWriter{f: tmp, path: path}
	var off int64
	for i, name := range names {
		w.secs = append(w.secs, casSection{Name: name, Offset: off, Length: lengths[i]})
		off = alignUp(off+lengths[i], casAlign)
	}
	if err := tmp.Truncate(casStreamHeader + off); err != nil {
		w.abort()
		return nil, fmt.Errorf("write index %s: %w", path, err)
	}
	return w, nil
}

// writeAt writes b at byte off of section sec.
func (w *casStreamWriter) writeAt(sec int, off int64, b []byte) error {
	s := w.secs[sec]
	if off < 0 || off+int64(len(b)) > s.Length {
		return fmt.Errorf("write index: %d bytes at %d overflow section %q of %d", len(b), off, s.Name, s.Length)
	}
	_, err := w.f.WriteAt(b, casStreamHeader+s.Offset+off)
	return err
}

// finish checksums every section (reading the file back sequentially),
// writes the prefix and header, syncs and renames the file into place.
func (w *casStreamWriter) finish(h *casHeader) error {
	buf := make([]byte, 1<<20)
	for i := range w.secs {
		s := &w.secs[i]
		r := io.NewSectionReader(w.f, casStreamHeader+s.Offset, s.Length)
		crc := uint32(0)
		for {
			n, err := r.Read(buf)
			crc = crc32.Update(crc, castagnoli, buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				w.abort()
				return fmt.Errorf("write index %s: %w", w.path, err)
			}
		}
		s.CRC32C = crc
	}
	h.Sections = w.secs
	hj, err := json.Marshal(h)
	if err == nil && casPrefix+len(hj) > casStreamHeader {
		err = fmt.Errorf("header of %d bytes exceeds the %d reserved", len(hj), casStreamHeader-casPrefix)
	}
	if err != nil {
		w.abort()
		return fmt.Errorf("write index %s: %w", w.path, err)
	}
	hj = append(hj, bytes.Repeat([]byte{' '}, casStreamHeader-casPrefix-len(hj))...)
	var pre [casPrefix]byte
	copy(pre[:], casMagic)
	binary.LittleEndian.PutUint32(pre[8:], casVersion)
	binary.LittleEndian.PutUint32(pre[12:], uint32(len(hj)))
	binary.LittleEndian.PutUint32(pre[16:], crc32.Checksum(hj, castagnoli))
	if _, err = w.f.WriteAt(append(pre[:], hj...), 0); err != nil {
		w.abort()
		return fmt.Errorf("write index %s: %w", w.path, err)
	}
	if err := w.f.Commit(); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

func (w *casStreamWriter) abort() { w.f.Abort() }

// ConvertOptions say what Convert builds: Encoding F16 or SQ8 codes of a
// flat index, or NList > 0 lists of an IVF index (NProbe searched by
// default). TrainSize caps the training sample (SQ8: 65,536; IVF: 256·NList
// vectors); Chunk is the vectors per streamed chunk (default 16,384).
type ConvertOptions struct {
	Encoding  Encoding
	NList     int // > 0: IVF
	NProbe    int
	TrainSize int
	KMeans    KMeansOptions
	Chunk     int
	// PQ > 0 makes the IVF an IVF-PQ of PQ sub-quantizers (bytes per
	// vector; Encoding is then ignored), trained on TrainSize vectors
	// (default max(256·NList, 65,536)). Rerank is its default exact
	// re-rank depth and RefinePath the F32 file the re-rank reads
	// (recorded in the header; normally the source FAISS file).
	PQ         int
	Rerank     int
	RefinePath string
	Progress   io.Writer // progress bars (nil: silent)
	// Release drops the source's pages once read (ReleaseMapped for an
	// index memory-mapped by OpenIndex; nil: keep them).
	Release func([]float32)
}

// Convert streams the F32 flat index src into a cas index file at path,
// re-encoded per spec; on any error (or ctx's end) nothing is left at path.
func Convert(ctx context.Context, src *Flat, path string, spec ConvertOptions) error {
	if src.codes.enc != F32 {
		return fmt.Errorf("convert: source is %v, want f32", src.codes.enc)
	}
	if spec.Chunk <= 0 {
		spec.Chunk = 16384
	}
	if spec.PQ > 0 && spec.NList <= 0 {
		return errors.New("convert: product quantization needs inverted lists (--pq with --ivf NLIST)")
	}
	if spec.RefinePath != "" && src.ids != nil {
		return errors.New("convert: the re-rank reads vector i at row i; this flat index has its own ids (an IndexIDMap)")
	}
	if spec.Release == nil {
		spec.Release = func([]float32) {}
	}
	if spec.NList > 0 {
		return convertIVF(ctx, src, path, spec)
	}
	return convertFlat(ctx, src, path, spec)
}

// trainingSample copies m evenly spaced rows of src (all when m ≥ n),
// releasing the source pages behind it as it goes (readahead would
// otherwise bring most of the file into the resident set).
func trainingSample(src *Flat, m int, release func([]float32)) []float32 {
	n, d := src.Len(), src.d
	m = min(max(m, 1), n)
	x := make([]float32, 0, m*d)
	done := 0 // rows [0, done) released
	for i := range m {
		j := int(int64(i) * int64(n) / int64(m))
		x = append(x, src.codes.f32[j*d:(j+1)*d]...)
		if j+1-done >= 1<<14 {
			release(src.codes.f32[done*d : (j+1)*d])
			done = j + 1
		}
	}
	release(src.codes.f32[done*d:])
	return x
}

func convertFlat(ctx context.Context, src *Flat, path string, spec ConvertOptions) error {
	n, d := src.Len(), src.d
	dst, err := NewFlat(d, src.metric, spec.Encoding)
	if err != nil {
		return err
	}
	if spec.Encoding == SQ8 {
		sample := trainingSample(src, TrainSize(spec.TrainSize, 0), spec.Release)
		if err := dst.Train(sample); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
	}
	names := []string{"codes"}
	lengths := []int64{int64(n) * int64(d) * int64(spec.Encoding.bytesPer())}
	if src.ids != nil {
		names, lengths = append(names, "ids"), append(lengths, int64(n)*8)
	}
	if spec.Encoding == SQ8 {
		names, lengths = append(names, "sq_min", "sq_scale"), append(lengths, int64(d)*4, int64(d)*4)
	}
	w, err := createCASStream(path, names, lengths)
	if err != nil {
		return err
	}
	bar := meter.NewCount(spec.Progress, int64(n), "convert to "+spec.Encoding.String())
	defer bar.Finish()
	codes := newVecCodes(spec.Encoding, d)
	bp := int64(d) * int64(spec.Encoding.bytesPer())
	for lo := 0; lo < n; lo += spec.Chunk {
		if err := ctx.Err(); err != nil {
			w.abort()
			return err
		}
		hi := min(n, lo+spec.Chunk)
		codes.n, codes.f32, codes.f16, codes.u8 = 0, codes.f32[:0], codes.f16[:0], codes.u8[:0]
		codes.appendVectors(src.codes.f32[lo*d:hi*d], dst.sq)
		if err := w.writeAt(0, int64(lo)*bp, codesBytes(&codes)); err != nil {
			w.abort()
			return err
		}
		spec.Release(src.codes.f32[lo*d : hi*d])
		bar.Add(hi - lo)
	}
	sec := 1
	if src.ids != nil {
		if err := w.writeAt(sec, 0, bytesOf(src.ids)); err != nil {
			w.abort()
			return err
		}
		sec++
	}
	if spec.Encoding == SQ8 {
		if err := errors.Join(w.writeAt(sec, 0, bytesOf(dst.sq.Min)), w.writeAt(sec+1, 0, bytesOf(dst.sq.Scale))); err != nil {
			w.abort()
			return err
		}
	}
	return w.finish(&casHeader{Kind: "flat", Metric: src.metric.String(), Encoding: spec.Encoding.String(), Dim: d, Count: int64(n)})
}

// convertIVF trains the coarse quantizer (and SQ8 ranges of the residuals)
// on an evenly spaced sample, assigns every vector to its list (pass 1),
// then writes each vector's code and id at its place in its list (pass 2).
func convertIVF(ctx context.Context, src *Flat, path string, spec ConvertOptions) error {
	n, d := src.Len(), src.d
	if spec.NList > n {
		return fmt.Errorf("convert: --ivf %d lists for %d vectors (at most one list per vector)", spec.NList, n)
	}
	m := TrainSize(spec.TrainSize, spec.NList)
	if spec.TrainSize <= 0 && spec.PQ > 0 {
		m = max(m, pqTrainSample)
	}
	var (
		ix  *IVF
		pqx *IVFPQ
		q   *Flat
		bp  int64 // code bytes per vector
	)
	if spec.PQ > 0 {
		var err error
		if pqx, err = NewIVFPQ(d, spec.NList, IVFPQOptions{Metric: src.metric, M: spec.PQ, NProbe: spec.NProbe, Rerank: spec.Rerank, KMeans: spec.KMeans, Progress: spec.Progress}); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		if err := pqx.Train(trainingSample(src, max(m, spec.NList, pqK), spec.Release)); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		q, bp = pqx.quantizer, int64(spec.PQ)
	} else {
		var err error
		if ix, err = NewIVF(d, spec.NList, IVFOptions{Metric: src.metric, Encoding: spec.Encoding, NProbe: spec.NProbe, KMeans: spec.KMeans, Progress: spec.Progress}); err != nil {
			return err
		}
		if err := ix.Train(trainingSample(src, max(m, spec.NList), spec.Release)); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		q, bp = ix.quantizer, int64(d)*int64(spec.Encoding.bytesPer())
	}
	assign := make([]int32, n)
	sizes := make([]uint64, spec.NList)
	bar := meter.NewCount(spec.Progress, int64(n), "assign lists")
	for lo := 0; lo < n; lo += spec.Chunk {
		if err := ctx.Err(); err != nil {
			bar.Finish()
			return err
		}
		hi := min(n, lo+spec.Chunk)
		lists, err := assignLists(q, src.codes.f32[lo*d:hi*d], spec.KMeans.Threads)
		if err != nil {
			bar.Finish()
			return fmt.Errorf("convert: %w", err)
		}
		for i, l := range lists {
			assign[lo+i] = int32(l)
			sizes[l]++
		}
		spec.Release(src.codes.f32[lo*d : hi*d])
		bar.Add(hi - lo)
	}
	bar.Finish()
	offs := make([]uint64, spec.NList+1)
	for l, s := range sizes {
		offs[l+1] = offs[l] + s
	}
	names := []string{"codes", "ids", "centroids", "list_offsets"}
	lengths := []int64{int64(n) * bp, int64(n) * 8, int64(spec.NList) * int64(d) * 4, int64(spec.NList+1) * 8}
	switch {
	case pqx != nil:
		names, lengths = append(names, "pq_centroids"), append(lengths, int64(d)*pqK*4)
	case spec.Encoding == SQ8:
		names, lengths = append(names, "sq_min", "sq_scale"), append(lengths, int64(d)*4, int64(d)*4)
	}
	w, err := createCASStream(path, names, lengths)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		w.abort()
		return err
	}
	cursor := append([]uint64(nil), offs[:spec.NList]...)
	res := make([]float32, d)
	codes := newVecCodes(spec.Encoding, d)
	var ids []byte
	var pqRes []float32 // PQ: the chunk's residuals, then their codes
	var pqCodes []uint8
	order := make([]int, 0, spec.Chunk)
	desc := "write lists (" + spec.Encoding.String() + ")"
	if pqx != nil {
		desc = fmt.Sprintf("write lists (pq%d)", spec.PQ)
	}
	bar = meter.NewCount(spec.Progress, int64(n), desc)
	defer bar.Finish()
	for lo := 0; lo < n; lo += spec.Chunk {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		hi := min(n, lo+spec.Chunk)
		// Rows of the chunk grouped by list (in row order within a list, as
		// the in-memory Add appends them): one write per list run.
		order = order[:0]
		for j := lo; j < hi; j++ {
			order = append(order, j)
		}
		slices.SortStableFunc(order, func(a, b int) int { return int(assign[a]) - int(assign[b]) })
		if pqx != nil {
			// PQ codes of the residuals, in list order, one GEMM per
			// sub-space for the whole chunk.
			pqRes = growFloats(pqRes, len(order)*d)
			for a, j := range order {
				l := int(assign[j])
				subtract(pqRes[a*d:(a+1)*d], src.codes.f32[j*d:(j+1)*d], q.codes.f32[l*d:(l+1)*d])
			}
			pqCodes = slices.Grow(pqCodes[:0], len(order)*spec.PQ)[:len(order)*spec.PQ]
			pqx.pq.encode(pqCodes, pqRes[:len(order)*d], spec.KMeans.Threads)
		}
		for a := 0; a < len(order); {
			l := assign[order[a]]
			b := a
			codes.n, codes.f32, codes.f16, codes.u8 = 0, codes.f32[:0], codes.f16[:0], codes.u8[:0]
			ids = ids[:0]
			for ; b < len(order) && assign[order[b]] == l; b++ {
				j := order[b]
				ids = binary.LittleEndian.AppendUint64(ids, uint64(src.ID(j)))
				if pqx != nil {
					continue
				}
				v := src.codes.f32[j*d : (j+1)*d]
				if ix.residual {
					subtract(res, v, q.codes.f32[int(l)*d:(int(l)+1)*d])
					v = res
				}
				codes.appendVectors(v, ix.sq)
			}
			cb := codesBytes(&codes)
			if pqx != nil {
				cb = pqCodes[a*spec.PQ : b*spec.PQ]
			}
			pos := cursor[l]
			cursor[l] += uint64(b - a)
			if err := errors.Join(w.writeAt(0, int64(pos)*bp, cb), w.writeAt(1, int64(pos)*8, ids)); err != nil {
				return fail(err)
			}
			a = b
		}
		spec.Release(src.codes.f32[lo*d : hi*d])
		bar.Add(hi - lo)
	}
	if err := errors.Join(w.writeAt(2, 0, bytesOf(q.codes.f32)), w.writeAt(3, 0, bytesOf(offs))); err != nil {
		return fail(err)
	}
	if pqx != nil {
		if err := w.writeAt(4, 0, bytesOf(pqx.pq.cent)); err != nil {
			return fail(err)
		}
		refine, err := relpath.Store(filepath.Dir(path), "", spec.RefinePath)
		if err != nil {
			return fail(err)
		}
		return w.finish(&casHeader{Kind: "ivfpq", Metric: src.metric.String(), Encoding: pqEncoding, Dim: d, Count: int64(n),
			NList: spec.NList, NProbe: pqx.nprobe, Residual: true, PQM: spec.PQ, Rerank: pqx.rerank, Refine: refine})
	}
	if spec.Encoding == SQ8 {
		if err := errors.Join(w.writeAt(4, 0, bytesOf(ix.sq.Min)), w.writeAt(5, 0, bytesOf(ix.sq.Scale))); err != nil {
			return fail(err)
		}
	}
	return w.finish(&casHeader{Kind: "ivf", Metric: src.metric.String(), Encoding: spec.Encoding.String(), Dim: d, Count: int64(n),
		NList: spec.NList, NProbe: ix.nprobe, Residual: ix.residual})
}
