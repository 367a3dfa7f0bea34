package bench

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cas-engine/cas/internal/blascore"
	"github.com/cas-engine/cas/internal/cputime"
	"github.com/cas-engine/cas/search/vector"
	"github.com/cas-engine/cas/tensor"
)

// IndexOptions configure RunIndex, the side-by-side benchmark of the cas
// vector index and FAISS on the files of `faiss_peer.py gen DIR`
// (base.f32, query.f32, gt_top10.i32).
type IndexOptions struct {
	DataDir string
	Dim     int   // vector dimension (768)
	NList   int   // IVF lists (1024)
	NProbes []int // IVF nprobe values (1, 8, 32, 64)
	Threads []int // thread counts to measure (1 and GOMAXPROCS)
	// SingleQueries is how many queries the one-at-a-time figures use
	// (200, as faiss_peer.py).
	SingleQueries int
	// FAISS figures: read from FAISSJSON (saved faiss_peer.py output) when
	// set, else measured by running FAISSScript with Python when that has
	// faiss; otherwise the report has no FAISS column.
	FAISSJSON   string
	FAISSScript string
	Python      string
	// Log receives progress lines (nil: silent).
	Log io.Writer
}

func (o *IndexOptions) defaults() {
	if o.Dim == 0 {
		o.Dim = 768
	}
	if o.NList == 0 {
		o.NList = 1024
	}
	if len(o.NProbes) == 0 {
		o.NProbes = []int{1, 8, 32, 64}
	}
	if len(o.Threads) == 0 {
		o.Threads = []int{1}
		if p := runtime.GOMAXPROCS(0); p > 1 {
			o.Threads = append(o.Threads, p)
		}
	}
	if o.SingleQueries == 0 {
		o.SingleQueries = 200
	}
	PeerDefaults(&o.Python, &o.Log)
}

// IndexReport holds everything RunIndex measured.
type IndexReport struct {
	Date, CPU, Go, Kernels string
	N, D, Q, K             int
	NList                  int
	FAISSSource            string
	Runs                   []*ThreadRun
}

// ThreadRun is the cas figures at one thread count, with FAISS's.
type ThreadRun struct {
	Threads      int
	BandwidthGBs float64 // streaming read of the base vectors
	StreamMs     float64 // mean time of one streaming read: the one-query bound
	FlatRecall   float64 // flat top-10 against the ground truth file

	FlatSingleMs, FlatBatch32QPS, FlatBatchAllQPS float64
	// GEMMGFLOPs is the tensor GEMM's rate on the flat batch's product (all
	// queries × every base vector × d, MatMulT in tiles of 4,096 rows,
	// timed between the batch's repetitions) at this thread count: the
	// roofline of a batched flat search, 2·N·d FLOPs a query.
	GEMMGFLOPs                  float64
	F16SingleMs, F16BatchAllQPS float64
	// F16Recall is the F16 batch's recall@10; F16Kernel names what scored
	// the batch ("AMX-BF16" tiles in bfloat16, else the F16 kernels).
	F16Recall float64
	F16Kernel string
	// F32Kernel names what scored the F32 batch (vector.Flat.BatchKernel);
	// F32Fallback is the share of its queries that the AMX screen could not
	// prove and the exact F32 path searched again (0 without the screen).
	F32Kernel   string
	F32Fallback float64
	// FlatBatchCPUQPS is the F32 batch of all queries per second of
	// process CPU time (best of 3), which other processes' load inflates
	// less than wall time.
	FlatBatchCPUQPS float64
	// IVFTrainCPUS is the IVF training's process CPU time.
	IVFTrainCPUS float64

	IVFTrainS, IVFAddS float64
	IVF                []IVFPoint

	FAISS *FAISSFigures
}

// IVFPoint is one nprobe of the cas IVF index.
type IVFPoint struct {
	NProbe              int
	Recall              float64
	SingleQPS, BatchQPS float64
}

// RunIndex measures the cas index on the data set, and FAISS on the same
// vectors and thread counts (see IndexOptions).
func RunIndex(opt IndexOptions) (*IndexReport, error) {
	opt.defaults()
	d := opt.Dim
	base, err := vector.ReadVectorFile(filepath.Join(opt.DataDir, "base.f32"), d)
	if err != nil {
		return nil, err
	}
	queries, err := vector.ReadVectorFile(filepath.Join(opt.DataDir, "query.f32"), d)
	if err != nil {
		return nil, err
	}
	gt, err := readGroundTruth(filepath.Join(opt.DataDir, "gt_top10.i32"), len(queries)/d)
	if err != nil {
		return nil, err
	}
	rep := &IndexReport{
		Date: time.Now().Format("2006-01-02"), CPU: cpuModel(), Go: runtime.Version(),
		N: len(base) / d, D: d, Q: len(queries) / d, K: 10, NList: opt.NList,
		Kernels: tensor.KernelName() + ", GEMM " + tensor.GemmKernelName(),
	}
	faiss, src, err := loadFAISS(&opt)
	if err != nil {
		return nil, err
	}
	rep.FAISSSource = src
	for _, t := range opt.Threads {
		fmt.Fprintf(opt.Log, "cas: %d thread(s)\n", t)
		run, err := measureThreads(&opt, t, base, queries, gt)
		if err != nil {
			return nil, err
		}
		run.FAISS = faiss[t]
		if run.FAISS == nil && faiss != nil && src != "" && opt.FAISSJSON == "" {
			fmt.Fprintf(opt.Log, "faiss: %d thread(s)\n", t)
			f, err := RunFAISSPeer(opt.Python, opt.FAISSScript, opt.DataDir, t, opt.NList, opt.NProbes, opt.Log)
			if err != nil {
				return nil, err
			}
			run.FAISS = f
		}
		rep.Runs = append(rep.Runs, run)
	}
	return rep, nil
}

// loadFAISS returns saved FAISS figures, or an empty map and a source
// description when the peer will be run per thread count, or nil.
func loadFAISS(opt *IndexOptions) (map[int]*FAISSFigures, string, error) {
	if opt.FAISSJSON != "" {
		f, err := ReadFAISSPeerFile(opt.FAISSJSON)
		if err != nil {
			return nil, "", err
		}
		return f, "faiss_peer.py output read from " + opt.FAISSJSON, nil
	}
	if opt.FAISSScript == "" {
		return nil, "", errors.New("bench index: no FAISS peer: give --faiss-script (faiss_peer.py) or --faiss-json FILE")
	}
	if _, err := os.Stat(opt.FAISSScript); err != nil {
		return nil, "", fmt.Errorf("bench index: FAISS peer script: %w (give --faiss-script PATH/faiss_peer.py)", err)
	}
	if !FAISSAvailable(opt.Python) {
		return nil, "", fmt.Errorf("bench index: %s has no faiss: install the fair peer with `apt-get install -y python3-faiss python3-numpy libopenblas0-pthread` (or give --faiss-json FILE of saved faiss_peer.py output)", opt.Python)
	}
	return map[int]*FAISSFigures{}, "faiss_peer.py run in this process (" + opt.Python + ", through peer_env.py: BLAS threads pinned to each thread count)", nil
}

func readGroundTruth(path string, nq int) ([][]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) != nq*10*4 {
		return nil, fmt.Errorf("%s: %d bytes, expected %d queries × 10 int32", path, len(b), nq)
	}
	gt := make([][]int64, nq)
	for i := range gt {
		for j := range 10 {
			gt[i] = append(gt[i], int64(int32(binary.LittleEndian.Uint32(b[(i*10+j)*4:]))))
		}
	}
	return gt, nil
}

// recall10 is the mean fraction of the true top-10 in each result row.
func recall10(ids []int64, gt [][]int64, k int) float64 {
	var hit int
	for i, g := range gt {
		row := ids[i*k : (i+1)*k]
		for _, id := range g {
			if slices.Contains(row, id) {
				hit++
			}
		}
	}
	return float64(hit) / float64(10*len(gt))
}

// best runs f reps times and returns the shortest duration.
func best(reps int, f func() error) (time.Duration, error) {
	b := time.Duration(math.MaxInt64)
	for range reps {
		s := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		b = min(b, time.Since(s))
	}
	return b, nil
}

// streamOnce times one streaming read of x (tensor.StreamSum: four
// sequential streams, as the single-query scan reads its rows) split over
// threads goroutines: the memory-bandwidth bound of a scan.
func streamOnce(x []float32, threads int) time.Duration {
	var mu sync.Mutex
	var sink float32
	s := time.Now()
	tensor.ParallelFor(len(x), threads, 1<<16, func(w, lo, hi int) {
		v := tensor.StreamSum(x[lo:hi])
		mu.Lock()
		sink += v
		mu.Unlock()
	})
	t := time.Since(s)
	runtime.KeepAlive(sink)
	return t
}

// Bandwidth measures streaming read bandwidth over x with the given
// goroutines (the best of reps passes), in bytes/s.
func Bandwidth(x []float32, threads, reps int) float64 {
	t := time.Duration(math.MaxInt64)
	for range reps {
		t = min(t, streamOnce(x, threads))
	}
	return float64(4*len(x)) / t.Seconds()
}

// gemmPass runs the flat batch's product without the selection:
// tensor.MatMulT of all queries against every base vector, in tiles of
// 4,096 rows (out holds nq × 4,096), on threads goroutines. Its time is the
// GEMM roofline of the batch: 2·nq·N·d FLOPs at the GEMM's own rate.
func gemmPass(out, queries, base []float32, d, threads int) {
	nq, n := len(queries)/d, len(base)/d
	for r0 := 0; r0 < n; r0 += 4096 {
		r1 := min(n, r0+4096)
		tensor.MatMulT(out[:nq*(r1-r0)], queries, base[r0*d:r1*d], nq, r1-r0, d, threads)
	}
}

func measureThreads(opt *IndexOptions, threads int, base, queries []float32, gt [][]int64) (*ThreadRun, error) {
	d := opt.Dim
	nq := len(queries) / d
	run := &ThreadRun{Threads: threads}
	p := &vector.SearchParams{Threads: threads}

	flat := func(enc vector.Encoding) (single, batch32, batchAll float64, recall float64, err error) {
		roof := enc == vector.F32
		f, err := vector.NewFlat(d, vector.InnerProduct, enc)
		if err != nil {
			return
		}
		f.Add(nil, base)
		// One query at a time, interleaved with streaming passes over the
		// same vectors so both see the same machine: means of each.
		ns := min(opt.SingleQueries, nq)
		const rounds = 10
		var tq, ts time.Duration
		done := 0
		for r := range rounds {
			ts += streamOnce(base, threads)
			s := time.Now()
			for ; done < ns*(r+1)/rounds; done++ {
				if _, _, err = f.Search(queries[done*d:(done+1)*d], 10, p); err != nil {
					return
				}
			}
			tq += time.Since(s)
		}
		single = tq.Seconds() * 1e3 / float64(ns)
		if enc == vector.F32 {
			run.StreamMs = ts.Seconds() * 1e3 / rounds
			run.BandwidthGBs = float64(4*len(base)) / (run.StreamMs / 1e3) / 1e9
		}
		t, err := best(3, func() error {
			for lo := 0; lo < nq; lo += 32 {
				hi := min(nq, lo+32)
				if _, _, err := f.Search(queries[lo*d:hi*d], 10, p); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return
		}
		batch32 = float64(nq) / t.Seconds()
		// The whole batch, best of 3; for F32 each repetition follows a
		// GEMM pass over the same product (gemmPass), so the roofline and
		// the search are timed on the same machine state.
		var ids []int64
		var out []float32
		if roof {
			out = make([]float32, nq*min(4096, len(base)/d))
		}
		tb, tg, tc := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
		st0 := f.ScreenStats()
		for range 3 {
			if roof {
				s := time.Now()
				gemmPass(out, queries, base, d, threads)
				tg = min(tg, time.Since(s))
			}
			s, c := time.Now(), cputime.Process()
			if _, ids, err = f.Search(queries, 10, p); err != nil {
				return
			}
			tb, tc = min(tb, time.Since(s)), min(tc, cputime.Process()-c)
		}
		if roof {
			run.GEMMGFLOPs = 2 * float64(nq) * float64(len(base)/d) * float64(d) / tg.Seconds() / 1e9
			run.F32Kernel = f.BatchKernel()
			run.FlatBatchCPUQPS = float64(nq) / tc.Seconds()
			if st := f.ScreenStats(); st.Queries > st0.Queries {
				run.F32Fallback = float64(st.Fallbacks-st0.Fallbacks) / float64(st.Queries-st0.Queries)
			}
		}
		batchAll = float64(nq) / tb.Seconds()
		recall = recall10(ids, gt, 10)
		return
	}
	fmt.Fprintln(opt.Log, "  flat f32 (and its GEMM roofline)")
	var err error
	if run.FlatSingleMs, run.FlatBatch32QPS, run.FlatBatchAllQPS, run.FlatRecall, err = flat(vector.F32); err != nil {
		return nil, err
	}
	fmt.Fprintln(opt.Log, "  flat f16")
	if run.F16SingleMs, _, run.F16BatchAllQPS, run.F16Recall, err = flat(vector.F16); err != nil {
		return nil, err
	}
	run.F16Kernel = "F16 kernels"
	if tensor.HasAMXBF16() {
		run.F16Kernel = "AMX-BF16"
	}

	fmt.Fprintf(opt.Log, "  ivf%d train\n", opt.NList)
	ivf, err := vector.NewIVF(d, opt.NList, vector.IVFOptions{Metric: vector.InnerProduct, KMeans: vector.KMeansOptions{Threads: threads, Seed: 1234}})
	if err != nil {
		return nil, err
	}
	c0 := cputime.Process()
	t, err := best(1, func() error { return ivf.Train(base) })
	if err != nil {
		return nil, err
	}
	run.IVFTrainS, run.IVFTrainCPUS = t.Seconds(), (cputime.Process() - c0).Seconds()
	t, err = best(1, func() error { return ivf.Add(nil, base) })
	if err != nil {
		return nil, err
	}
	run.IVFAddS = t.Seconds()
	for _, np := range opt.NProbes {
		fmt.Fprintf(opt.Log, "  ivf nprobe %d\n", np)
		pp := &vector.SearchParams{NProbe: np, Threads: threads}
		var ids []int64
		tb, err := best(2, func() (err error) {
			_, ids, err = ivf.Search(queries, 10, pp)
			return err
		})
		if err != nil {
			return nil, err
		}
		ns := min(opt.SingleQueries, nq)
		ts, err := best(1, func() error {
			for i := range ns {
				if _, _, err := ivf.Search(queries[i*d:(i+1)*d], 10, pp); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		run.IVF = append(run.IVF, IVFPoint{NProbe: np, Recall: recall10(ids, gt, 10),
			BatchQPS: float64(nq) / tb.Seconds(), SingleQPS: float64(ns) / ts.Seconds()})
	}
	return run, nil
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":")) + fmt.Sprintf(", %d cores", runtime.NumCPU())
			}
		}
	}
	return fmt.Sprintf("%s/%s, %d cores", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
}

// ratioOf is ratio for figures of cas's own (never withheld).
func ratioOf(a, b float64) string { return ratio(a, b) }

// ratio formats a/b as "1.23×", or "–" when either is missing.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return "–"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}

func num(v float64, prec int) string {
	if v <= 0 {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// percentOf formats a share 0…1 as "0.3%".
func percentOf(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

func percent(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

// blasWarning flags a peer that ran on the netlib reference BLAS.
func blasWarning(blas string) string {
	if strings.HasPrefix(blas, "reference:") {
		return " **Not a fair peer: the netlib reference BLAS is ~10× slower than OpenBLAS (apt-get install -y libopenblas0-pthread); no speed-up printed.**"
	}
	if core := blascore.GenericIn(blas); core != "" {
		return " **Not a fair peer: OpenBLAS did not recognise this CPU and runs its " + core + " (pre-AVX) kernels, about 5× slower than its AVX-512 ones, and cas could not force a better set (see the BLAS note); no speed-up printed.**"
	}
	return ""
}

// WriteMarkdown prints the report as the README's performance tables.
func (r *IndexReport) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s; %s; kernels %s; %s.\n", r.CPU, r.Go, r.Kernels, r.Date)
	fmt.Fprintf(w, "Data: %d × %d low-rank unit vectors, %d queries (faiss_peer.py gen), top-%d by inner product.\n", r.N, r.D, r.Q, r.K)
	if r.FAISSSource != "" {
		fmt.Fprintf(w, "Peer: %s.\n", r.FAISSSource)
	} else {
		fmt.Fprintln(w, "Peer: FAISS not available (no python3 with faiss, no --faiss-json); cas figures only.")
	}
	for _, run := range r.Runs {
		f := run.FAISS
		if f == nil {
			f = &FAISSFigures{IVF: map[int]FAISSIVF{}}
		} else {
			fmt.Fprintf(w, "\nPeer at %d thread(s): %s, BLAS %s, %d thread(s).%s\n", run.Threads, f.Peer, orDash(f.BLAS), f.Threads, blasWarning(f.BLAS))
		}
		// Speed-ups only against a fair peer: a pre-AVX or reference
		// BLAS makes FAISS several times slower than its users see it.
		ratio := ratio
		if blasWarning(f.BLAS) != "" {
			ratio = func(a, b float64) string { return "–" }
		}
		fmt.Fprintf(w, "\n#### Flat, F32, %d thread(s)\n\n", run.Threads)
		fmt.Fprintln(w, "| measure | cas | FAISS | cas speed-up | target |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---|")
		fmt.Fprintf(w, "| one query (ms) | %s | %s | %s | ≤ 1.2 × stream bound: %s of it |\n",
			num(run.FlatSingleMs, 2), num(f.FlatSingleMs, 2), ratio(f.FlatSingleMs, run.FlatSingleMs), ratioOf(run.FlatSingleMs, run.StreamMs))
		fmt.Fprintf(w, "| stream bound (ms): %.0f MB at %.1f GB/s | %s | | | |\n", float64(4*r.N*r.D)/1e6, run.BandwidthGBs, num(run.StreamMs, 2))
		fmt.Fprintf(w, "| batch of 32 (q/s) | %s | %s¹ | %s | ≥ 1.5× |\n", num(run.FlatBatch32QPS, 0), num(f.FlatBatchQPS, 1), ratio(run.FlatBatch32QPS, f.FlatBatchQPS))
		fmt.Fprintf(w, "| batch of %d (q/s; %s, %s of queries fell back) | %s | %s | %s | ≥ 1.2× (1 thread), ≥ 1.5× (2) |\n", r.Q, orDash(run.F32Kernel), percentOf(run.F32Fallback),
			num(run.FlatBatchAllQPS, 0), num(f.FlatBatchQPS, 1), ratio(run.FlatBatchAllQPS, f.FlatBatchQPS))
		fmt.Fprintf(w, "| batch of %d (q per CPU-second) | %s | | | |\n", r.Q, num(run.FlatBatchCPUQPS, 0))
		flops := 2 * float64(r.N) * float64(r.D) / 1e9 // GFLOP a query
		fmt.Fprintf(w, "| batch of %d (GFLOP/s) vs GEMM roofline %s GFLOP/s | %s (%s of it) | %s | | ≥ 90%% of roofline |\n", r.Q,
			num(run.GEMMGFLOPs, 0), num(run.FlatBatchAllQPS*flops, 0), percent(run.FlatBatchAllQPS*flops, run.GEMMGFLOPs), num(f.FlatBatchQPS*flops, 0))
		fmt.Fprintf(w, "| F16 one query (ms) | %s | | | |\n", num(run.F16SingleMs, 2))
		fmt.Fprintf(w, "| F16 batch of %d (q/s; %s), recall@10 %.4f | %s | %s (F32) | %s | ≥ 1.5×, recall ≥ 0.99 |\n", r.Q, run.F16Kernel, run.F16Recall,
			num(run.F16BatchAllQPS, 0), num(f.FlatBatchQPS, 1), ratio(run.F16BatchAllQPS, f.FlatBatchQPS))
		fmt.Fprintf(w, "| recall@10 vs FAISS's exact top-10 | %.4f | | | 1 |\n", run.FlatRecall)

		fmt.Fprintf(w, "\n#### IVF%d, F32, %d thread(s)\n\n", r.NList, run.Threads)
		fmt.Fprintf(w, "Training: cas %s s (%s CPU-s), FAISS %s s (%s faster); adding: cas %s s, FAISS %s s.\n\n",
			num(run.IVFTrainS, 2), num(run.IVFTrainCPUS, 2), num(f.TrainS, 2), ratio(f.TrainS, run.IVFTrainS), num(run.IVFAddS, 2), num(f.AddS, 2))
		fmt.Fprintln(w, "| nprobe | recall cas | recall FAISS | Δ | one-query q/s cas | FAISS | speed-up | batch q/s cas | FAISS | speed-up |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, pt := range run.IVF {
			fp, ok := f.IVF[pt.NProbe]
			delta := "–"
			if ok {
				delta = fmt.Sprintf("%+.3f", pt.Recall-fp.Recall)
			}
			fmt.Fprintf(w, "| %d | %.3f | %s | %s | %s | %s | %s | %s | %s | %s |\n", pt.NProbe, pt.Recall, num(fp.Recall, 3), delta,
				num(pt.SingleQPS, 0), num(fp.SingleQPS, 0), ratio(pt.SingleQPS, fp.SingleQPS),
				num(pt.BatchQPS, 0), num(fp.BatchQPS, 0), ratio(pt.BatchQPS, fp.BatchQPS))
		}
	}
	fmt.Fprintln(w, "\n¹ faiss_peer.py times one batch of all queries; FAISS takes the same BLAS path for every batch of ≥ 20 queries.")
}

// MemoryReport is the outcome of MemoryCheck.
type MemoryReport struct {
	Rows, Dim       int
	BuildS          float64
	SingleMs        float64
	Batch32Ms       float64
	IndexBytes      int64
	PeakRSSBytes    int64
	TargetRSSBytes  int64
	RecallSelfCheck float64 // fraction of 32 stored vectors that find themselves first
}

// MemoryCheck builds an F16 flat index of rows random unit vectors of
// dimension dim, generated chunk by chunk as a streaming build reads a
// file, then searches it (one query, a batch of 32), and reports the peak
// resident set size of the process. Run it in a fresh process
// (RunMemoryChild) so that nothing else counts.
func MemoryCheck(rows, dim int) (*MemoryReport, error) {
	f, err := vector.NewFlat(dim, vector.InnerProduct, vector.F16)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	f.Reserve(rows)
	const chunk = 16384
	buf := make([]float32, chunk*dim)
	rng := rand.New(rand.NewPCG(1, 2))
	keep := make([]float32, 32*dim)
	for lo := 0; lo < rows; lo += chunk {
		hi := min(rows, lo+chunk)
		x := buf[:(hi-lo)*dim]
		for i := range x {
			x[i] = float32(rng.Uint32()>>8)/(1<<24) - 0.5
		}
		tensor.L2Normalize(x, dim)
		if lo == 0 {
			copy(keep, x)
		}
		if err := f.Add(nil, x); err != nil {
			return nil, err
		}
	}
	rep := &MemoryReport{Rows: rows, Dim: dim, BuildS: time.Since(start).Seconds(), IndexBytes: int64(rows) * int64(dim) * 2, TargetRSSBytes: 2 << 30}
	s := time.Now()
	if _, _, err := f.Search(keep[:dim], 10, nil); err != nil {
		return nil, err
	}
	rep.SingleMs = time.Since(s).Seconds() * 1e3
	s = time.Now()
	_, ids, err := f.Search(keep, 10, nil)
	if err != nil {
		return nil, err
	}
	rep.Batch32Ms = time.Since(s).Seconds() * 1e3
	hits := 0
	for i := range 32 {
		if ids[i*10] == int64(i) {
			hits++
		}
	}
	rep.RecallSelfCheck = float64(hits) / 32
	runtime.KeepAlive(f)
	rep.PeakRSSBytes = PeakRSS()
	return rep, nil
}

// RunMemoryChild runs `exe args...` (a cas binary in memory-child mode),
// which prints a MemoryReport as JSON, and decodes it.
func RunMemoryChild(exe string, args []string, log io.Writer) (*MemoryReport, error) {
	cmd := exec.Command(exe, args...)
	cmd.Stderr = log
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("memory check (%s %s): %w", exe, strings.Join(args, " "), err)
	}
	var r MemoryReport
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("memory check output: %w", err)
	}
	return &r, nil
}

// WriteMarkdown prints the memory table.
func (m *MemoryReport) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "\n#### Memory: F16 flat, %d × %d\n\n", m.Rows, m.Dim)
	fmt.Fprintln(w, "| vectors (F16) | build | one query | batch of 32 | peak RSS | target |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---|")
	fmt.Fprintf(w, "| %.2f GiB | %.1f s | %.0f ms | %.0f ms | %.2f GiB | < %.0f GiB |\n",
		float64(m.IndexBytes)/(1<<30), m.BuildS, m.SingleMs, m.Batch32Ms, float64(m.PeakRSSBytes)/(1<<30), float64(m.TargetRSSBytes)/(1<<30))
}
