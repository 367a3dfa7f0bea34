package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/cas-engine/cas/internal/vectest"
	"github.com/cas-engine/cas/search/vector"
	"github.com/cas-engine/cas/tensor"
)

// ScaleConfigs are the index configurations of the cost-growth table, in
// order: the FAISS flat file used in place, its F16 and SQ8 flat
// conversions, IVF with SQ8 codes, and IVF-PQ with an exact re-rank from
// the F32 file.
var ScaleConfigs = []string{"flat-f32", "flat-f16", "flat-sq8", "ivf-sq8", "ivfpq-rerank"}

// ScaleOptions configure RunScale. Each configuration is built and
// searched in a child process (Exe ChildArgs… --scale-child CONFIG
// --scale-set DIR), so that its peak resident memory is its own.
type ScaleOptions struct {
	Sizes   []int  // rows per set
	Dim     int    // 768
	Gen     string // vector generator (vectest.Gens: e5mix, lowrank)
	Rank    int    // latent rank of the low-rank generator (64)
	Recall  int    // queries of the recall@10 and single-query sample (200)
	Batch   int    // queries of the timed batch (2,560: one GRPO step)
	Threads int    // search and conversion threads (≤ 0: all cores)
	NList   int    // IVF lists (0: √N rounded to a power of two)
	// NProbes are the IVF lists searched (ScaleNProbe); each value is
	// measured on the same built index (a sweep), as are Reranks for
	// IVF-PQ (ScaleRerank).
	NProbes []int
	PQs     []int // IVF-PQ bytes per vector (ScalePQ): one IVF-PQ build each
	Reranks []int // IVF-PQ exact re-rank depths
	// RAMBytes is the memory a flat index must fit in to be searched as
	// usual (≤ 0: MemAvailable when the child starts); a larger one is
	// timed on one query read from disk, without its batch and recall.
	RAMBytes int64
	Configs  []string
	WorkDir  string // sets are written here, one folder per size
	Keep     bool   // keep the sets (default: removed after their size)
	Exe      string
	// ChildArgs are the arguments before --scale-child (the subcommand
	// path and the options the child needs).
	ChildArgs []string
	Log       io.Writer
}

func (o *ScaleOptions) defaults() {
	Default(&o.Dim, 768)
	if o.Gen == "" {
		o.Gen = vectest.GenE5Mix
	}
	Default(&o.Rank, 64)
	Default(&o.Recall, 200)
	Default(&o.Batch, 2560)
	o.Batch = max(o.Batch, o.Recall)
	DefaultList(&o.NProbes, []int{ScaleNProbe})
	DefaultList(&o.PQs, []int{ScalePQ})
	DefaultList(&o.Reranks, []int{ScaleRerank})
	DefaultList(&o.Configs, ScaleConfigs)
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// The IVF and IVF-PQ settings of `cas bench scale` by default: IVF-PQ's
// defaults (vector.DefaultPQNProbe, vector.DefaultPQRerank; see the
// README's sweep) and 96-byte codes (at 1M they reach recall@10 0.971 /
// 0.999 with re-ranks of 200 / 500, 64-byte codes 0.914 / 0.992; 21M × 96
// bytes is 1.9 GiB).
const (
	ScaleNProbe = vector.DefaultPQNProbe
	ScalePQ     = 96
	ScaleRerank = vector.DefaultPQRerank
)

// ScaleNList is the default IVF list count for n rows: √n rounded to a
// power of two (1M → 1,024), at most n/39 so every list trains on ≥ 39
// points, at least 1.
func ScaleNList(n int) int {
	target := math.Sqrt(float64(n))
	p := 1 << int(math.Round(math.Log2(target)))
	for p > 1 && p*39 > n {
		p /= 2
	}
	return max(p, 1)
}

// ScaleRow is one measured (N, configuration) cell.
type ScaleRow struct {
	N      int    `json:"n"`
	Config string `json:"config"`
	// Settings are the IVF / IVF-PQ search settings of the row ("nprobe
	// 64, PQ64, re-rank 100"; empty for flat indexes).
	Settings string `json:"settings,omitempty"`
	// DiskS, for a flat index larger than memory, is the time of one
	// query read from disk (its batch and recall are not run).
	DiskS float64 `json:"disk_s,omitempty"`
	// BuildS is the import (opening the FAISS file in place) or
	// conversion time; BuildPeak the peak resident bytes while building.
	BuildS     float64 `json:"build_s"`
	BuildPeak  int64   `json:"build_peak_bytes"`
	IndexBytes int64   `json:"index_bytes"`
	// ServePeak is the peak resident bytes of opening the built index and
	// running the searches below (the build's peak reset first where
	// /proc/self/clear_refs allows; ServeReset says whether it did).
	ServePeak  int64   `json:"serve_peak_bytes"`
	ServeReset bool    `json:"serve_reset"`
	SingleMs   float64 `json:"single_ms"`
	BatchQPS   float64 `json:"batch_qps"`
	Recall10   float64 `json:"recall10"`
	// IDs are the top-10 ids of the recall queries (the parent computes
	// recall against its exact search).
	IDs []int64 `json:"ids,omitempty"`
}

// ScaleReport is the cost-growth table and its projection.
type ScaleReport struct {
	Opt     ScaleOptions
	Rows    []ScaleRow
	GenS    map[int]float64
	Threads int
}

// Set file names inside a size's folder.
const (
	ScaleFAISS   = "base.faiss"
	ScaleCorpus  = "corpus.jsonl"
	ScaleQueries = "query.f32"
)

// faissFlatIPHeader is the header of a FAISS IndexFlatIP file of n × d:
// fourcc, d, ntotal, two dummies, is_trained, metric (0 = inner product),
// then the codes vector's size; the n·d floats follow.
func faissFlatIPHeader(n, d int) []byte {
	hdr := []byte("IxFI")
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(d))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(n))
	hdr = binary.LittleEndian.AppendUint64(hdr, 1<<20)
	hdr = binary.LittleEndian.AppendUint64(hdr, 1<<20)
	hdr = append(hdr, 1)
	hdr = binary.LittleEndian.AppendUint32(hdr, 0)
	return binary.LittleEndian.AppendUint64(hdr, uint64(n)*uint64(d))
}

// WriteScaleSet writes n synthetic unit vectors of dimension d from the
// generator gen (vectest.NewGen; r is the low-rank generator's rank) as a
// FAISS IndexFlatIP file (dir/base.faiss), a matching corpus
// (dir/corpus.jsonl, line i = row i, ids "doc<i>"), and nq queries drawn
// next from the same generator (dir/query.f32, raw little-endian float32),
// streamed in chunks so the memory stays bounded whatever n is.
func WriteScaleSet(dir, gen string, n, d, r, nq int, seed uint64, threads int) error {
	g, err := vectest.NewGen(gen, d, r, seed, threads)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	err = writeBuffered(filepath.Join(dir, ScaleFAISS), func(w *bufio.Writer) error {
		w.Write(faissFlatIPHeader(n, d))
		const chunk = 8192
		buf := make([]float32, chunk*d)
		for i := 0; i < n; i += chunk {
			m := min(chunk, n-i)
			g.Next(buf[:m*d])
			if err := writeF32(w, buf[:m*d]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = writeBuffered(filepath.Join(dir, ScaleCorpus), func(w *bufio.Writer) error {
		for i := range n {
			fmt.Fprintf(w, "{\"id\":\"doc%d\",\"contents\":\"synthetic passage %d\"}\n", i, i)
		}
		return nil
	})
	if err != nil {
		return err
	}
	q := make([]float32, nq*d)
	g.Next(q)
	return writeBuffered(filepath.Join(dir, ScaleQueries), func(w *bufio.Writer) error { return writeF32(w, q) })
}

// writeBuffered creates path and writes it through a 1 MiB buffer with
// fill, then flushes and closes it; write errors name the file.
func writeBuffered(path string, fill func(w *bufio.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	if err := fill(w); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func writeF32(w io.Writer, x []float32) error {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	_, err := w.Write(b)
	return err
}

func readF32(path string) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a float32 array", path, len(b))
	}
	x := make([]float32, len(b)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x, nil
}

// resetPeakRSS resets the process's VmHWM (writing 5 to
// /proc/self/clear_refs) after returning freed heap to the OS; false
// where the kernel does not allow it.
func resetPeakRSS() bool {
	runtime.GC()
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// memAvailable is MemAvailable from /proc/meminfo in bytes (0 where
// unknown).
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				var kb int64
				fmt.Sscan(f[0], &kb)
				return kb << 10
			}
		}
	}
	return 0
}

// scaleSetting is one search setting of a sweep over a built index.
type scaleSetting struct {
	nprobe, rerank int
}

// ScaleChild builds configuration config over the set in dir and measures
// it (the body of one child process of RunScale): one row per search
// setting (opt.NProbes for IVF, × opt.Reranks for IVF-PQ, whose code size
// is opt.PQs[0]; one row for a flat index).
func ScaleChild(ctx context.Context, dir, config string, opt ScaleOptions) ([]ScaleRow, error) {
	opt.defaults()
	faissPath := filepath.Join(dir, ScaleFAISS)
	q, err := readF32(filepath.Join(dir, ScaleQueries))
	if err != nil {
		return nil, err
	}
	d := opt.Dim
	if len(q) < opt.Batch*d {
		return nil, fmt.Errorf("%s: %d queries, want --batch %d", ScaleQueries, len(q)/d, opt.Batch)
	}
	ram := opt.RAMBytes
	if ram <= 0 {
		ram = memAvailable()
	}
	start := time.Now()
	ix, err := vector.OpenIndex(faissPath, nil)
	if err != nil {
		return nil, err
	}
	src, ok := ix.(*vector.Flat)
	if !ok || src.Encoding() != vector.F32 {
		ix.Close()
		return nil, fmt.Errorf("%s: not a flat float32 index", faissPath)
	}
	n := src.Len()
	base := ScaleRow{N: n, Config: config}
	built := vector.Index(src)
	builtPath := faissPath
	pq := opt.PQs[0]
	var settings []scaleSetting
	if config != "flat-f32" {
		nlist := opt.NList
		if nlist <= 0 {
			nlist = ScaleNList(n)
		}
		spec := vector.ConvertOptions{Release: vector.ReleaseMapped}
		spec.KMeans.Threads = opt.Threads
		switch config {
		case "flat-f16":
			spec.Encoding = vector.F16
		case "flat-sq8":
			spec.Encoding = vector.SQ8
		case "ivf-sq8":
			spec.Encoding, spec.NList, spec.NProbe = vector.SQ8, nlist, opt.NProbes[0]
			for _, np := range opt.NProbes {
				settings = append(settings, scaleSetting{nprobe: np})
			}
		case "ivfpq-rerank":
			spec.NList, spec.NProbe, spec.PQ, spec.Rerank, spec.RefinePath = nlist, opt.NProbes[0], pq, opt.Reranks[0], faissPath
			for _, np := range opt.NProbes {
				for _, rr := range opt.Reranks {
					settings = append(settings, scaleSetting{nprobe: np, rerank: rr})
				}
			}
		default:
			src.Close()
			return nil, fmt.Errorf("unknown configuration %q (want one of %s)", config, strings.Join(ScaleConfigs, ", "))
		}
		builtPath = filepath.Join(dir, config+".cas")
		err := vector.Convert(ctx, src, builtPath, spec)
		src.Close()
		if err != nil {
			os.Remove(builtPath)
			return nil, fmt.Errorf("%s: %w", config, err)
		}
		// The configuration's files go as soon as it is measured: an 8M
		// run must not hold every conversion of a 25 GB set at once.
		defer os.Remove(builtPath)
		base.BuildS = time.Since(start).Seconds()
		base.BuildPeak = PeakRSS()
		base.ServeReset = resetPeakRSS()
		if built, err = vector.OpenIndex(builtPath, nil); err != nil {
			return nil, err
		}
	} else {
		base.BuildS = time.Since(start).Seconds()
		base.BuildPeak = PeakRSS()
		base.ServeReset = true // nothing built: the serve peak starts here
	}
	defer built.Close()
	if st, err := os.Stat(builtPath); err == nil {
		base.IndexBytes = st.Size()
	}
	if len(settings) == 0 {
		settings = []scaleSetting{{}}
	}
	var rows []ScaleRow
	for _, set := range settings {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		row := base
		p := &vector.SearchParams{Threads: opt.Threads, NProbe: set.nprobe, Rerank: set.rerank}
		switch config {
		case "ivf-sq8":
			row.Settings = fmt.Sprintf("nprobe %d", set.nprobe)
		case "ivfpq-rerank":
			row.Settings = fmt.Sprintf("nprobe %d, PQ%d, re-rank %d", set.nprobe, pq, set.rerank)
		}
		if len(rows) > 0 {
			row.ServeReset = resetPeakRSS() && row.ServeReset
		}
		if strings.HasPrefix(config, "flat-") && row.IndexBytes > ram {
			// Larger than memory: a scan reads the file from disk. One
			// query shows the cost; a batch and 200 more would take hours
			// and evict everyone's page cache for nothing new.
			t := time.Now()
			if _, _, err := built.Search(q[:d], 10, p); err != nil {
				return nil, err
			}
			row.DiskS = time.Since(t).Seconds()
			row.SingleMs = row.DiskS * 1000 // no batch: BatchQPS stays 0
			row.ServePeak = PeakRSS()
			rows = append(rows, row)
			continue
		}
		// Warm up: one query brings the pages a search touches in.
		if _, _, err := built.Search(q[:d], 10, p); err != nil {
			return nil, err
		}
		t := time.Now()
		if _, _, err := built.Search(q[:opt.Batch*d], 10, p); err != nil {
			return nil, err
		}
		row.BatchQPS = float64(opt.Batch) / time.Since(t).Seconds()
		t = time.Now()
		for i := range opt.Recall {
			_, ids, err := built.Search(q[i*d:(i+1)*d], 10, p)
			if err != nil {
				return nil, err
			}
			row.IDs = append(row.IDs, ids...)
		}
		row.SingleMs = time.Since(t).Seconds() * 1000 / float64(opt.Recall)
		row.ServePeak = PeakRSS()
		rows = append(rows, row)
	}
	return rows, nil
}

// ScaleSetDir is the folder of the n-row set of generator gen under work.
func ScaleSetDir(work, gen string, n int) string {
	return filepath.Join(work, fmt.Sprintf("%s-n%d", gen, n))
}

// RunScale writes each size's set, computes the exact top-10 of the recall
// queries, then builds and measures every configuration in a child process
// (IVF-PQ once per code size of opt.PQs).
func RunScale(ctx context.Context, opt ScaleOptions) (*ScaleReport, error) {
	opt.defaults()
	if len(opt.Sizes) == 0 {
		return nil, errors.New("bench scale: no --sizes")
	}
	if opt.WorkDir == "" {
		return nil, errors.New("bench scale: no work folder")
	}
	rep := &ScaleReport{Opt: opt, GenS: map[int]float64{}, Threads: opt.Threads}
	if rep.Threads <= 0 {
		rep.Threads = runtime.GOMAXPROCS(0)
	}
	for _, n := range opt.Sizes {
		dir := ScaleSetDir(opt.WorkDir, opt.Gen, n)
		if _, err := os.Stat(filepath.Join(dir, ScaleQueries)); err != nil {
			fmt.Fprintf(opt.Log, "scale: writing %d × %d %s vectors as a FAISS flat file and corpus in %s\n", n, opt.Dim, opt.Gen, dir)
			t := time.Now()
			if err := WriteScaleSet(dir, opt.Gen, n, opt.Dim, opt.Rank, opt.Batch, uint64(n), rep.Threads); err != nil {
				return nil, fmt.Errorf("bench scale: %w", err)
			}
			rep.GenS[n] = time.Since(t).Seconds()
		}
		exact, err := exactTop10(dir, opt, rep.Threads)
		if err != nil {
			return nil, fmt.Errorf("bench scale: exact top-10: %w", err)
		}
		for _, c := range opt.Configs {
			pqs := opt.PQs[:1]
			if c == "ivfpq-rerank" {
				pqs = opt.PQs
			}
			for _, pq := range pqs {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				fmt.Fprintf(opt.Log, "scale: N=%d %s (child process)\n", n, c)
				args := append(slices.Clone(opt.ChildArgs), "--pq", fmt.Sprint(pq), "--scale-child", c, "--scale-set", dir)
				cmd := exec.CommandContext(ctx, opt.Exe, args...)
				cmd.Stderr = opt.Log
				out, err := cmd.Output()
				if err != nil {
					return nil, fmt.Errorf("bench scale: N=%d %s: %w", n, c, err)
				}
				var rows []ScaleRow
				if err := json.Unmarshal(out, &rows); err != nil {
					return nil, fmt.Errorf("bench scale: N=%d %s output: %w", n, c, err)
				}
				for _, row := range rows {
					row.Recall10 = math.NaN()
					if row.IDs != nil {
						row.Recall10 = vectest.RecallAt(row.IDs, exact, 10)
					}
					row.IDs = nil
					rep.Rows = append(rep.Rows, row)
					fmt.Fprintf(opt.Log, "scale: N=%d %s: build %.1f s (peak %.2f GiB), serve peak %.2f GiB, single %.2f ms, batch %.0f q/s, recall@10 %.3f\n",
						n, row.Label(), row.BuildS, gib(float64(row.BuildPeak)), gib(float64(row.ServePeak)), row.SingleMs, row.BatchQPS, row.Recall10)
				}
			}
		}
		if !opt.Keep {
			os.RemoveAll(dir)
		}
	}
	return rep, nil
}

// Label names the row's configuration and settings.
func (r ScaleRow) Label() string {
	if r.Settings == "" {
		return r.Config
	}
	return r.Config + " (" + r.Settings + ")"
}

// exactTop10 is the exact inner-product top-10 of the recall queries,
// streamed through the FAISS file by plain reads in chunks of rows (one
// GEMM a chunk), so that the parent's memory stays bounded when the set
// is larger than memory.
func exactTop10(dir string, opt ScaleOptions, threads int) ([][]int64, error) {
	q, err := readF32(filepath.Join(dir, ScaleQueries))
	if err != nil {
		return nil, err
	}
	d, nq := opt.Dim, opt.Recall
	q = q[:nq*d]
	path := filepath.Join(dir, ScaleFAISS)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hdr [45]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	n := int(binary.LittleEndian.Uint64(hdr[8:]))
	if string(hdr[:4]) != "IxFI" || int(binary.LittleEndian.Uint32(hdr[4:])) != d || string(faissFlatIPHeader(n, d)) != string(hdr[:]) {
		return nil, fmt.Errorf("%s: not the IndexFlatIP file of d %d that bench scale writes", path, d)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	const chunk = 8192
	buf := make([]byte, chunk*d*4)
	x := make([]float32, chunk*d)
	scores := make([]float32, nq*chunk)
	tops := make([]*tensor.TopK, nq)
	for i := range tops {
		tops[i] = tensor.NewTopK(10)
	}
	for r0 := 0; r0 < n; r0 += chunk {
		m := min(chunk, n-r0)
		if _, err := io.ReadFull(r, buf[:m*d*4]); err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", path, r0, err)
		}
		for i := range x[:m*d] {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		tensor.MatMulT(scores[:nq*m], q, x[:m*d], nq, m, d, threads)
		for i, t := range tops {
			t.PushRows(scores[i*m:(i+1)*m], int64(r0))
		}
	}
	ref := make([][]int64, nq)
	s := make([]float32, 10)
	for i, t := range tops {
		ref[i] = make([]int64, 10)
		t.Sorted(s, ref[i])
	}
	return ref, nil
}
