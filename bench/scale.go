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
	Sizes   []int // rows per set
	Dim     int   // 768
	Rank    int   // latent rank of the low-rank generator (64)
	Recall  int   // queries of the recall@10 and single-query sample (200)
	Batch   int   // queries of the timed batch (2,560: one GRPO step)
	Threads int   // search and conversion threads (≤ 0: all cores)
	NList   int   // IVF lists (0: √N rounded to a power of two)
	NProbe  int   // IVF lists searched (32)
	PQ      int   // IVF-PQ bytes per vector (64)
	Rerank  int   // IVF-PQ exact re-rank depth (100)
	Configs []string
	WorkDir string // sets are written here, one folder per size
	Keep    bool   // keep the sets (default: removed after their size)
	Exe     string
	// ChildArgs are the arguments before --scale-child (the subcommand
	// path and the options the child needs).
	ChildArgs []string
	Log       io.Writer
}

func (o *ScaleOptions) defaults() {
	if o.Dim <= 0 {
		o.Dim = 768
	}
	if o.Rank <= 0 {
		o.Rank = 64
	}
	if o.Recall <= 0 {
		o.Recall = 200
	}
	if o.Batch <= 0 {
		o.Batch = 2560
	}
	o.Batch = max(o.Batch, o.Recall)
	if o.NProbe <= 0 {
		o.NProbe = 64
	}
	if o.PQ <= 0 {
		o.PQ = 64
	}
	if o.Rerank <= 0 {
		o.Rerank = 100
	}
	if len(o.Configs) == 0 {
		o.Configs = ScaleConfigs
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

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

// WriteScaleSet writes n low-rank unit vectors of dimension d as a FAISS
// IndexFlatIP file (dir/base.faiss), a matching corpus (dir/corpus.jsonl,
// line i = row i, ids "doc<i>"), and nq queries from the same latent map
// (dir/query.f32, raw little-endian float32), streamed in chunks so the
// memory stays bounded whatever n is.
func WriteScaleSet(dir string, n, d, r, nq int, seed uint64, threads int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g := vectest.NewLowRankGen(d, r, seed, threads)
	f, err := os.Create(filepath.Join(dir, ScaleFAISS))
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	// IndexFlatIP: fourcc, d, ntotal, two dummies, is_trained, metric
	// (0 = inner product), then the codes vector (size, floats).
	hdr := []byte("IxFI")
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(d))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(n))
	hdr = binary.LittleEndian.AppendUint64(hdr, 1<<20)
	hdr = binary.LittleEndian.AppendUint64(hdr, 1<<20)
	hdr = append(hdr, 1)
	hdr = binary.LittleEndian.AppendUint32(hdr, 0)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(n)*uint64(d))
	w.Write(hdr)
	const chunk = 8192
	buf := make([]float32, chunk*d)
	for i := 0; i < n; i += chunk {
		m := min(chunk, n-i)
		g.Next(buf[:m*d])
		if err := writeF32(w, buf[:m*d]); err != nil {
			return fmt.Errorf("write %s: %w", f.Name(), err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	c, err := os.Create(filepath.Join(dir, ScaleCorpus))
	if err != nil {
		return err
	}
	defer c.Close()
	cw := bufio.NewWriterSize(c, 1<<20)
	for i := range n {
		fmt.Fprintf(cw, "{\"id\":\"doc%d\",\"contents\":\"synthetic passage %d\"}\n", i, i)
	}
	if err := cw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", c.Name(), err)
	}
	if err := c.Close(); err != nil {
		return err
	}
	q := make([]float32, nq*d)
	g.Next(q)
	qf, err := os.Create(filepath.Join(dir, ScaleQueries))
	if err != nil {
		return err
	}
	defer qf.Close()
	qw := bufio.NewWriter(qf)
	if err := writeF32(qw, q); err != nil {
		return err
	}
	if err := qw.Flush(); err != nil {
		return err
	}
	return qf.Close()
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

// ScaleChild builds configuration config over the set in dir and measures
// it (the body of one child process of RunScale).
func ScaleChild(ctx context.Context, dir, config string, opt ScaleOptions) (*ScaleRow, error) {
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
	row := &ScaleRow{N: n, Config: config}
	built := vector.Index(src)
	builtPath := faissPath
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
			spec.Encoding, spec.NList, spec.NProbe = vector.SQ8, nlist, opt.NProbe
		case "ivfpq-rerank":
			spec.NList, spec.NProbe, spec.PQ, spec.Rerank, spec.RefinePath = nlist, opt.NProbe, opt.PQ, opt.Rerank, faissPath
		default:
			src.Close()
			return nil, fmt.Errorf("unknown configuration %q (want one of %s)", config, strings.Join(ScaleConfigs, ", "))
		}
		builtPath = filepath.Join(dir, config+".cas")
		err := vector.Convert(ctx, src, builtPath, spec)
		src.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config, err)
		}
		defer os.Remove(builtPath)
		row.BuildS = time.Since(start).Seconds()
		row.BuildPeak = PeakRSS()
		row.ServeReset = resetPeakRSS()
		if built, err = vector.OpenIndex(builtPath, nil); err != nil {
			return nil, err
		}
	} else {
		row.BuildS = time.Since(start).Seconds()
		row.BuildPeak = PeakRSS()
		row.ServeReset = true // nothing built: the serve peak starts here
	}
	defer built.Close()
	if st, err := os.Stat(builtPath); err == nil {
		row.IndexBytes = st.Size()
	}
	p := &vector.SearchParams{Threads: opt.Threads}
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
	return row, nil
}

// RunScale writes each size's set, computes the exact top-10 of the recall
// queries, then builds and measures every configuration in a child process.
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
		dir := filepath.Join(opt.WorkDir, fmt.Sprintf("n%d", n))
		if _, err := os.Stat(filepath.Join(dir, ScaleQueries)); err != nil {
			fmt.Fprintf(opt.Log, "scale: writing %d × %d FAISS flat file and corpus in %s\n", n, opt.Dim, dir)
			t := time.Now()
			if err := WriteScaleSet(dir, n, opt.Dim, opt.Rank, opt.Batch, uint64(n), rep.Threads); err != nil {
				return nil, fmt.Errorf("bench scale: %w", err)
			}
			rep.GenS[n] = time.Since(t).Seconds()
		}
		exact, err := exactTop10(dir, opt)
		if err != nil {
			return nil, err
		}
		for _, c := range opt.Configs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			fmt.Fprintf(opt.Log, "scale: N=%d %s (child process)\n", n, c)
			args := append(slices.Clone(opt.ChildArgs), "--scale-child", c, "--scale-set", dir)
			cmd := exec.CommandContext(ctx, opt.Exe, args...)
			cmd.Stderr = opt.Log
			out, err := cmd.Output()
			if err != nil {
				return nil, fmt.Errorf("bench scale: N=%d %s: %w", n, c, err)
			}
			var row ScaleRow
			if err := json.Unmarshal(out, &row); err != nil {
				return nil, fmt.Errorf("bench scale: N=%d %s output: %w", n, c, err)
			}
			row.Recall10 = vectest.RecallAt(row.IDs, exact, 10)
			row.IDs = nil
			rep.Rows = append(rep.Rows, row)
			fmt.Fprintf(opt.Log, "scale: N=%d %s: build %.1f s (peak %.2f GiB), serve peak %.2f GiB, single %.2f ms, batch %.0f q/s, recall@10 %.3f\n",
				n, c, row.BuildS, gib(float64(row.BuildPeak)), gib(float64(row.ServePeak)), row.SingleMs, row.BatchQPS, row.Recall10)
		}
		if !opt.Keep {
			os.RemoveAll(dir)
		}
	}
	return rep, nil
}

// exactTop10 is the exact inner-product top-10 of the recall queries by a
// flat F32 search of the FAISS file.
func exactTop10(dir string, opt ScaleOptions) ([][]int64, error) {
	q, err := readF32(filepath.Join(dir, ScaleQueries))
	if err != nil {
		return nil, err
	}
	ix, err := vector.OpenIndex(filepath.Join(dir, ScaleFAISS), nil)
	if err != nil {
		return nil, err
	}
	defer ix.Close()
	_, ids, err := ix.Search(q[:opt.Recall*opt.Dim], 10, &vector.SearchParams{Threads: opt.Threads})
	if err != nil {
		return nil, err
	}
	ref := make([][]int64, opt.Recall)
	for i := range ref {
		ref[i] = ids[i*10 : (i+1)*10]
	}
	return ref, nil
}
