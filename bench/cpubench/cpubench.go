// Package cpubench measures CPU execution speed (`cas bench cpu`): GEMM
// throughput of the tensor kernels against the measured FMA peak of the
// same cores, GoMLX's DotGeneral on the pure-Go and gocpu backends, and
// forward, training-step and decoding speed of Qwen-shaped models on both
// backends next to the same model in PyTorch on the same number of threads
// (../shared/bench/torch_qwen_peer.py).
//
// It sits at the end of the data flow (bench): it uses tensor, model/qwen
// and backend/gocpu and nothing uses it.
package cpubench

import (
	"bytes"
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
	"strconv"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
	"github.com/schollz/progressbar/v3"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/backend/gocpu"
	"github.com/cas-engine/cas/bench"
	"github.com/cas-engine/cas/internal/blascore"
	"github.com/cas-engine/cas/internal/cputime"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/tensor"
)

// ModelSpec names a model configuration to benchmark.
type ModelSpec struct {
	Name   string
	Config *qwen.Config
}

// Qwen3 configurations of about 4M and 25M parameters (tied embeddings,
// grouped-query attention), the sizes the issue benchmarks.
var (
	Qwen4M = &qwen.Config{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
		VocabSize: 4096, HiddenSize: 256, IntermediateSize: 704, NumHiddenLayers: 4,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 64, HiddenAct: "silu",
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, MaxPositionEmbeddings: 4096,
	}
	Qwen25M = &qwen.Config{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
		VocabSize: 16384, HiddenSize: 512, IntermediateSize: 1408, NumHiddenLayers: 6,
		NumAttentionHeads: 8, NumKeyValueHeads: 2, HeadDim: 64, HiddenAct: "silu",
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, MaxPositionEmbeddings: 4096,
	}
)

// DefaultModels are benchmarked when Options.Models is empty.
func DefaultModels() []ModelSpec {
	return []ModelSpec{{"qwen3-4M", Qwen4M}, {"qwen3-25M", Qwen25M}}
}

// LoadModelSpec reads a Hugging Face config.json (or a folder holding one).
func LoadModelSpec(path string) (ModelSpec, error) {
	dir := path
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir = filepath.Dir(path)
		if filepath.Base(path) != "config.json" {
			data, err := os.ReadFile(path)
			if err != nil {
				return ModelSpec{}, fmt.Errorf("load %s: %w", path, err)
			}
			cfg, err := qwen.ParseConfig(data)
			if err != nil {
				return ModelSpec{}, fmt.Errorf("load %s: %w", path, err)
			}
			return ModelSpec{Name: strings.TrimSuffix(filepath.Base(path), ".json"), Config: cfg}, nil
		}
	}
	cfg, err := qwen.LoadConfig(dir)
	if err != nil {
		return ModelSpec{}, err
	}
	return ModelSpec{Name: filepath.Base(dir), Config: cfg}, nil
}

// Options configure Run; zero fields take the defaults noted.
type Options struct {
	// Threads is GOMAXPROCS during the run and the PyTorch thread count
	// (default: GOMAXPROCS).
	Threads int
	// Sizes are the square GEMM sizes (default 256, 512, 1024, 2048).
	Sizes []int
	// MinTime is the least time spent per GEMM measurement (default 1 s).
	MinTime time.Duration
	// Models to run (default DefaultModels); none with SkipModels.
	Models     []ModelSpec
	SkipModels bool
	// Batch × SeqLen tokens per forward pass and training step (default
	// 8 × 256, the peer's defaults); Steps timed forward passes and
	// training steps, averaged after one warm-up each (default 3).
	Batch, SeqLen, Steps int
	// Rounds of gocpu's forward pass and training step, each followed by
	// the peer's, per model (default 1): the first round is the main
	// table's; with more, ModelRow.Rounds holds every round, so the
	// ratio's spread between alternated measurements is printed with it.
	Rounds int
	// DecodeTokens generated per decode measurement after a 64-token
	// prompt (default 32).
	DecodeTokens int
	// Plain also runs the models' forward pass on GoMLX's pure-Go backend
	// (decode always runs on both; its training step needs gigabytes, see
	// measureModel).
	Plain bool
	// PeerScript is torch_qwen_peer.py (empty: no peer); Python runs it
	// (default bench.DefaultPython).
	PeerScript, Python string
	// Profile also runs one forward pass, one training step and one
	// decode of each model on a profiling gocpu backend ("gocpu:profile")
	// and reports the time per op kind (ModelRow.ForwardProfile,
	// TrainProfile, DecodeProfile); ProfileShapes splits each kind by
	// output size ("gocpu:profile=shapes").
	Profile, ProfileShapes bool
	// DecodeOnly measures only batch-1 decoding against the streaming
	// bound (see RunDecode); Profile then profiles decoding alone.
	DecodeOnly bool
	// Log receives the progress bar and notes (nil: silent).
	Log io.Writer
}

func (o *Options) defaults() {
	bench.Default(&o.Threads, runtime.GOMAXPROCS(0))
	bench.DefaultList(&o.Sizes, []int{256, 512, 1024, 2048})
	bench.Default(&o.MinTime, time.Second)
	if len(o.Models) == 0 && !o.SkipModels {
		o.Models = DefaultModels()
	}
	if o.SkipModels {
		o.Models = nil
	}
	bench.Default(&o.Batch, 8)
	if o.SeqLen <= 1 {
		o.SeqLen = 256
	}
	bench.Default(&o.Steps, 3)
	bench.Default(&o.Rounds, 1)
	bench.Default(&o.DecodeTokens, 32)
	bench.PeerDefaults(&o.Python, &o.Log)
}

// Report holds everything one run measured.
type Report struct {
	Date       time.Time
	CPU        string
	Threads    int
	GoVersion  string
	Kernels    string
	LoadBefore float64 // 1-minute load average at the start and the end
	LoadAfter  float64
	// FMA peaks in GFLOP/s on all threads and on one: register-only FMAs
	// (the hardware limit) and vek32.Dot on L1-resident vectors.
	PeakFMA, PeakFMA1, PeakVek, PeakVek1 float64
	GEMM                                 []GEMMRow
	// GEMMRate is the measured GFLOP/s of the square x·Wᵀ product nearest
	// 1024³ on all threads: the rate of the models' roofline.
	GEMMRate float64
	// StreamBps is the measured read bandwidth (bytes/s) of all threads
	// over an array larger than the caches: decoding's streaming bound.
	StreamBps float64
	Models    []ModelRow
	// StreamCPUBps is the same read in bytes per process CPU-second
	// (Options.DecodeOnly): the bound of decoding's CPU time per token.
	StreamCPUBps float64 `json:",omitempty"`
	// DecodeOnly: only StreamBps and the models' decode figures were
	// measured (Options.DecodeOnly).
	DecodeOnly bool `json:",omitempty"`
}

// GEMMRow is one matrix product measurement.
type GEMMRow struct {
	Name    string
	M, N, K int
	GFLOPS  float64
	Threads int
}

// ModelRow is one model configuration.
type ModelRow struct {
	Name          string
	Params        int64
	Batch, SeqLen int
	Fast, Plain   ModelFigures
	Peer          *PeerFigures
	PeerErr       string
	// ForwardFLOPs and TrainFLOPs are the matrix work of a forward pass
	// and a training step (MatrixFLOPs, TrainFLOPs); DecodeBytes the bytes
	// a batch-1 decode step streams in float32 (StreamedBytes).
	ForwardFLOPs, TrainFLOPs float64
	DecodeBytes              int64
	// ForwardProfile, TrainProfile and DecodeProfile are the time per op
	// kind of one forward pass, one training step and one decode run
	// (Options.Profile).
	ForwardProfile, TrainProfile, DecodeProfile []gocpu.OpTime `json:",omitempty"`
	DecodeProfileTokens                         int            `json:",omitempty"`
	// Rounds are the alternated gocpu and peer measurements of the
	// forward pass and training step (Options.Rounds > 1; the first is
	// Fast's and Peer's).
	Rounds []Round `json:",omitempty"`
}

// Round is one alternated measurement: gocpu's forward pass and training
// step, then the peer's (zero where the peer did not run).
type Round struct {
	ForwardTokS, TrainStepS         float64
	PeerForwardTokS, PeerTrainStepS float64
}

// ModelFigures are one backend's measurements (zero: not measured).
type ModelFigures struct {
	ForwardS, ForwardTokS float64
	TrainStepS            float64
	DecodeTokS            float64
	// DecodeBF16TokS is batch-1 decode with the weights stored in
	// bfloat16 and the graph computing in float32 (NewBF16WeightModel).
	DecodeBF16TokS float64
	// DecodeCPUs and DecodeBF16CPUs are the process CPU seconds per token
	// of the same decodes (the least of the runs; Options.DecodeOnly),
	// which other processes on a shared machine inflate less than wall
	// time.
	DecodeCPUs, DecodeBF16CPUs float64 `json:",omitempty"`
}

// PeerFigures is the JSON line of torch_qwen_peer.py.
type PeerFigures struct {
	Peer string `json:"peer"`
	// BLAS names the BLAS the peer loaded (peer_env.blas()); "reference:"
	// marks the netlib reference BLAS, against which no ratio is printed.
	BLAS        string  `json:"blas"`
	Threads     int     `json:"threads"`
	Params      int64   `json:"params"`
	Batch       int     `json:"batch"`
	SeqLen      int     `json:"seqlen"`
	ForwardS    float64 `json:"forward_s"`
	ForwardTokS float64 `json:"forward_tokens_per_s"`
	TrainStepS  float64 `json:"train_step_s"`
	TrainTokS   float64 `json:"train_tokens_per_s"`
}

// Run performs every measurement of opt.
func Run(opt Options) (*Report, error) {
	opt.defaults()
	prev := runtime.GOMAXPROCS(opt.Threads)
	defer runtime.GOMAXPROCS(prev)
	r := &Report{
		Date: time.Now(), CPU: cpuModel(), Threads: opt.Threads, GoVersion: runtime.Version(),
		Kernels: tensor.GemmKernelName(), LoadBefore: loadAverage(),
	}
	if opt.DecodeOnly {
		return r, runDecode(&opt, r)
	}
	total := 2 + len(opt.Sizes) + len(decodeShapes) + 2 + len(opt.Models)*(4+2*(opt.Rounds-1))
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(opt.Log), progressbar.OptionSetDescription("bench cpu"),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	defer bar.Finish()
	step := func(what string) {
		bar.Describe(what)
		bar.Add(1)
	}

	r.PeakFMA = tensor.FMAPeak(opt.Threads, opt.MinTime)
	r.PeakFMA1 = tensor.FMAPeak(1, opt.MinTime/2)
	step("FMA peak")
	r.PeakVek = tensor.VekDotPeak(opt.Threads, opt.MinTime)
	r.PeakVek1 = tensor.VekDotPeak(1, opt.MinTime/2)
	step("vek peak")

	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range opt.Sizes {
		g := measureGEMM(rng, fmt.Sprintf("%d³ x·Wᵀ", n), n, n, n, opt.Threads, opt.MinTime)
		r.GEMM = append(r.GEMM, g)
		step(g.Name)
	}
	// The one-thread and GoMLX rows use 1024³ or the largest size below.
	dg := 0
	for _, n := range opt.Sizes {
		if n <= 1024 {
			dg = max(dg, n)
		}
	}
	if dg > 0 && opt.Threads > 1 {
		r.GEMM = append(r.GEMM, measureGEMM(rng, fmt.Sprintf("%d³ x·Wᵀ, 1 thread", dg), dg, dg, dg, 1, opt.MinTime))
	}
	for _, g := range r.GEMM {
		if g.Name == fmt.Sprintf("%d³ x·Wᵀ", dg) && g.Threads == opt.Threads {
			r.GEMMRate = g.GFLOPS
		}
	}
	r.StreamBps = measureStream(opt.Threads, opt.MinTime)
	for _, s := range decodeShapes {
		g := measureGEMM(rng, fmt.Sprintf("decode M=%d, %d×%d", s[0], s[1], s[2]), s[0], s[1], s[2], opt.Threads, opt.MinTime)
		r.GEMM = append(r.GEMM, g)
		step(g.Name)
	}
	for _, name := range []string{"go", gocpu.BackendName} {
		if dg > 0 {
			g, err := measureDotGeneral(rng, name, dg, opt.MinTime)
			if err != nil {
				return nil, fmt.Errorf("DotGeneral on %s: %w", name, err)
			}
			r.GEMM = append(r.GEMM, g)
		}
		step("GoMLX DotGeneral " + name)
	}

	for _, ms := range opt.Models {
		row, err := measureModel(ms, &opt, step)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", ms.Name, err)
		}
		r.Models = append(r.Models, *row)
	}
	// The bound uses the higher of two bandwidth measurements, as
	// runDecode's does.
	r.StreamBps = max(r.StreamBps, measureStream(opt.Threads, opt.MinTime))
	r.LoadAfter = loadAverage()
	return r, nil
}

// runDecode is Run's decode section alone: the read bandwidth, then for
// each model batch-1 decoding on gocpu with float32 and with bfloat16
// weights (measureDecode), then the bandwidth again (the bound uses the
// higher, the stricter, of the two bandwidth measurements: other
// processes slow both alike).
func runDecode(opt *Options, r *Report) error {
	r.DecodeOnly = true
	r.Kernels += ", GEMV " + tensor.GemvKernelName()
	r.StreamBps, r.StreamCPUBps = measureStreamCPU(opt.Threads, opt.MinTime)
	fast, err := backend.NewWithConfig(gocpu.BackendName)
	if err != nil {
		return err
	}
	defer fast.Finalize()
	for _, ms := range opt.Models {
		row := ModelRow{Name: ms.Name, Params: ms.Config.NumParameters(), DecodeBytes: StreamedBytes(ms.Config, 4)}
		if err := measureDecode(ms, fast, opt, &row.Fast); err != nil {
			return err
		}
		if opt.Profile || opt.ProfileShapes {
			if err := profileModel(ms.Config, opt, &row); err != nil {
				return fmt.Errorf("model %s: profile: %w", ms.Name, err)
			}
		}
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, "bench cpu: %s decode %.1f tok/s (bf16 weights %.1f)\n", ms.Name, row.Fast.DecodeTokS, row.Fast.DecodeBF16TokS)
		}
		r.Models = append(r.Models, row)
	}
	bps, cpuBps := measureStreamCPU(opt.Threads, opt.MinTime)
	r.StreamBps, r.StreamCPUBps = max(r.StreamBps, bps), max(r.StreamCPUBps, cpuBps)
	r.LoadAfter = loadAverage()
	return nil
}

// measureDecode measures batch-1 decoding of a random model of ms on be
// with float32 weights and with bfloat16 weights (NewBF16WeightModel),
// alternating the two (so both see the same machine) until each has run
// for opt.MinTime and at least three times, and keeps the fastest run of
// each, as the read bandwidth of the bound is the fastest of its runs
// (timeIt), with the least CPU time per token.
func measureDecode(ms ModelSpec, be backends.Backend, opt *Options, f *ModelFigures) error {
	m32, err := qwen.NewRandom(ms.Config, be, 1)
	if err != nil {
		return fmt.Errorf("model %s: %w", ms.Name, err)
	}
	m16, err := NewBF16WeightModel(ms.Config, be, 1)
	if err != nil {
		return fmt.Errorf("model %s, bf16 weights: %w", ms.Name, err)
	}
	arms := []struct {
		m        *qwen.Model
		what     string
		spent    time.Duration
		tps, cpu *float64
	}{
		{m: m32, what: "", tps: &f.DecodeTokS, cpu: &f.DecodeCPUs},
		{m: m16, what: ", bf16 weights", tps: &f.DecodeBF16TokS, cpu: &f.DecodeBF16CPUs},
	}
	for round := 0; round < 3 || arms[0].spent < opt.MinTime || arms[1].spent < opt.MinTime; round++ {
		for i := range arms {
			a := &arms[i]
			t0 := time.Now()
			tps, cpu, err := decodeCPU(a.m, opt.DecodeTokens)
			if err != nil {
				return fmt.Errorf("model %s%s: decode: %w", ms.Name, a.what, err)
			}
			a.spent += time.Since(t0)
			*a.tps, *a.cpu = max(*a.tps, tps), minPositive(*a.cpu, cpu)
		}
	}
	return nil
}

// decodeCPU is DecodeSpeed of one row after a 64-token prompt, with the
// process CPU seconds per generated token.
func decodeCPU(m *qwen.Model, n int) (tps, cpuPerToken float64, err error) {
	var c0 time.Duration
	tps, err = decodeSpeed(m, 1, 64, n, func() { c0 = cputime.Process() })
	return tps, (cputime.Process() - c0).Seconds() / float64(n), err
}

// minPositive is the smaller of a and b, ignoring a when it is not
// positive (not yet measured).
func minPositive(a, b float64) float64 {
	if !(a > 0) {
		return b
	}
	return min(a, b)
}

// decodeShapes are (M, N, K) products of decoding: Qwen2.5-0.5B's MLP
// projections for 1 and 8 rows.
var decodeShapes = [][3]int{{1, 4864, 896}, {1, 896, 4864}, {8, 4864, 896}, {8, 896, 4864}}

// timeIt runs f once to warm up, then repeatedly until minTime has passed
// (at least once more), and returns the fastest run.
func timeIt(minTime time.Duration, f func() error) (time.Duration, error) {
	if err := f(); err != nil {
		return 0, err
	}
	best := time.Duration(math.MaxInt64)
	start := time.Now()
	for time.Since(start) < minTime || best == time.Duration(math.MaxInt64) {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		best = min(best, time.Since(t0))
	}
	return best, nil
}

func randF32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func measureGEMM(rng *rand.Rand, name string, m, n, k, threads int, minTime time.Duration) GEMMRow {
	a, w := randF32(rng, m*k), randF32(rng, n*k)
	out := make([]float32, m*n)
	d, _ := timeIt(minTime, func() error {
		tensor.MatMulT(out, a, w, m, n, k, threads)
		return nil
	})
	return GEMMRow{Name: name, M: m, N: n, K: k, Threads: threads, GFLOPS: 2 * float64(m) * float64(n) * float64(k) / d.Seconds() / 1e9}
}

// measureDotGeneral times GoMLX's x·Wᵀ (DotGeneral contracting the last
// axes) of size n³ on the named backend.
func measureDotGeneral(rng *rand.Rand, name string, n int, minTime time.Duration) (GEMMRow, error) {
	be, err := backend.NewWithConfig(name)
	if err != nil {
		return GEMMRow{}, err
	}
	defer be.Finalize()
	exec, err := graph.NewExec(be, func(x, w *graph.Node) *graph.Node {
		return graph.DotGeneral(x, []int{1}, nil, w, []int{1}, nil)
	})
	if err != nil {
		return GEMMRow{}, err
	}
	x := tensors.FromFlatDataAndDimensions(randF32(rng, n*n), n, n)
	w := tensors.FromFlatDataAndDimensions(randF32(rng, n*n), n, n)
	d, err := timeIt(minTime, func() error {
		out, err := exec.Exec(x, w)
		if err != nil {
			return err
		}
		out[0].FinalizeAll()
		return nil
	})
	if err != nil {
		return GEMMRow{}, err
	}
	return GEMMRow{Name: fmt.Sprintf("GoMLX DotGeneral %d³, backend %s", n, name), M: n, N: n, K: n,
		Threads: runtime.GOMAXPROCS(0), GFLOPS: 2 * float64(n) * float64(n) * float64(n) / d.Seconds() / 1e9}, nil
}

func measureModel(ms ModelSpec, opt *Options, step func(string)) (*ModelRow, error) {
	row := &ModelRow{Name: ms.Name, Params: ms.Config.NumParameters(), Batch: opt.Batch, SeqLen: opt.SeqLen,
		ForwardFLOPs: MatrixFLOPs(ms.Config, opt.Batch, opt.SeqLen), TrainFLOPs: TrainFLOPs(ms.Config, opt.Batch, opt.SeqLen),
		DecodeBytes: StreamedBytes(ms.Config, 4)}
	// Created as training creates them (backend.New), so the training step
	// measured here runs the same graph rewrites as cas train and the demo
	// (among them the one fix of GoMLX's DotGeneral gradient, in gocpu).
	fast, err := backend.NewWithConfig(gocpu.BackendName)
	if err != nil {
		return nil, err
	}
	plain, err := backend.NewWithConfig("go")
	if err != nil {
		return nil, err
	}
	defer fast.Finalize()
	defer plain.Finalize()

	// Decoding first, on fresh models: after the training step the heap
	// holds its garbage and a collection may run during the short decode
	// runs.
	if err := measureDecode(ms, fast, opt, &row.Fast); err != nil {
		return nil, fmt.Errorf("%s backend: %w", gocpu.BackendName, err)
	}
	if err := modelFigures(ms.Config, fast, opt, true, true, false, &row.Fast); err != nil {
		return nil, fmt.Errorf("%s backend: %w", gocpu.BackendName, err)
	}
	step(ms.Name + " gocpu")
	if opt.Profile || opt.ProfileShapes {
		if err := profileModel(ms.Config, opt, row); err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
	}
	// No training step on the pure-Go backend: GoMLX v0.26 builds the
	// gradient of DotGeneral as a broadcast product, [8·255, 4096, 256]
	// floats (8.5 GB) for the 4M model's output layer alone (gocpu rewrites
	// it into products; docs/upstream/gomlx-dotgeneral-grad.md).
	if err := modelFigures(ms.Config, plain, opt, opt.Plain, false, true, &row.Plain); err != nil {
		return nil, fmt.Errorf("go backend: %w", err)
	}
	step(ms.Name + " go")
	if opt.PeerScript != "" {
		row.Peer, err = RunPeer(opt.Python, opt.PeerScript, ms.Config, opt.Batch, opt.SeqLen, opt.Threads, opt.Steps)
		if err != nil {
			row.PeerErr = err.Error()
			fmt.Fprintf(opt.Log, "\nbench cpu: PyTorch peer for %s: %v\n", ms.Name, err)
		}
	}
	step(ms.Name + " peer")
	if opt.Rounds > 1 {
		if err := measureRounds(ms.Config, fast, opt, row, step); err != nil {
			return nil, err
		}
	}
	step(ms.Name)
	return row, nil
}

// measureRounds adds opt.Rounds − 1 rounds of gocpu's forward pass and
// training step, each followed by the peer's, to row.Rounds after the
// first (row.Fast, row.Peer), so that both sides see the machine's drift
// alike and the report can print the ratio's spread.
func measureRounds(cfg *qwen.Config, fast backends.Backend, opt *Options, row *ModelRow, step func(string)) error {
	first := Round{ForwardTokS: row.Fast.ForwardTokS, TrainStepS: row.Fast.TrainStepS}
	if row.Peer != nil {
		first.PeerForwardTokS, first.PeerTrainStepS = row.Peer.ForwardTokS, row.Peer.TrainStepS
	}
	row.Rounds = append(row.Rounds, first)
	for i := 2; i <= opt.Rounds; i++ {
		var f ModelFigures
		if err := modelFigures(cfg, fast, opt, true, true, false, &f); err != nil {
			return fmt.Errorf("%s backend, round %d: %w", gocpu.BackendName, i, err)
		}
		rd := Round{ForwardTokS: f.ForwardTokS, TrainStepS: f.TrainStepS}
		step(fmt.Sprintf("%s gocpu, round %d", row.Name, i))
		if row.Peer != nil {
			p, err := RunPeer(opt.Python, opt.PeerScript, cfg, opt.Batch, opt.SeqLen, opt.Threads, opt.Steps)
			if err != nil {
				return fmt.Errorf("peer, round %d: %w", i, err)
			}
			rd.PeerForwardTokS, rd.PeerTrainStepS = p.ForwardTokS, p.TrainStepS
		}
		step(fmt.Sprintf("%s peer, round %d", row.Name, i))
		row.Rounds = append(row.Rounds, rd)
	}
	return nil
}

// modelFigures measures, as asked, the forward pass, the training step
// and the decode speed (best of three runs) of a random model of cfg on
// backend be.
func modelFigures(cfg *qwen.Config, be backends.Backend, opt *Options, forward, train, decode bool, f *ModelFigures) error {
	m, err := qwen.NewRandom(cfg, be, 1)
	if err != nil {
		return err
	}
	tokens := opt.Batch * opt.SeqLen
	rng := rand.New(rand.NewPCG(3, 4))
	ids := make([]int32, tokens)
	mask := make([]int32, tokens)
	for i := range ids {
		ids[i], mask[i] = int32(rng.IntN(cfg.VocabSize)), 1
	}
	if forward {
		// Mean over Steps passes after one warm-up, as the peer does.
		if err := ForwardPass(m, ids, mask, opt.Batch, opt.SeqLen); err != nil {
			return err
		}
		t0 := time.Now()
		for range opt.Steps {
			if err := ForwardPass(m, ids, mask, opt.Batch, opt.SeqLen); err != nil {
				return err
			}
		}
		d := time.Since(t0) / time.Duration(opt.Steps)
		f.ForwardS, f.ForwardTokS = d.Seconds(), float64(tokens)/d.Seconds()
	}
	if train {
		tr, err := NewTrainer(m, 1e-4)
		if err != nil {
			return err
		}
		if _, err := tr.Step(ids, opt.Batch, opt.SeqLen); err != nil { // compile + first step
			return fmt.Errorf("train step: %w", err)
		}
		t0 := time.Now()
		for range opt.Steps {
			if _, err := tr.Step(ids, opt.Batch, opt.SeqLen); err != nil {
				return fmt.Errorf("train step: %w", err)
			}
		}
		f.TrainStepS = time.Since(t0).Seconds() / float64(opt.Steps)
	}
	if !decode {
		return nil
	}
	for range 3 { // best of three: decoding runs are short
		tps, err := DecodeSpeed(m, 1, 64, opt.DecodeTokens)
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		f.DecodeTokS = max(f.DecodeTokS, tps)
	}
	return nil
}

// ForwardPass is the timed forward pass: the logits of ids and mask
// [batch, seqLen] come back as the executor's output tensor, are read in
// place (the last logit checked to be finite) and released, the way the
// peer's forward returns its logits as a torch tensor that nothing copies
// out. A caller wanting its own slice pays a 134 MB copy on the 25M shape
// (Model.LogitsInto), ≈ 0.8% of the pass in an alternated A/B, that the
// peer does not.
func ForwardPass(m *qwen.Model, ids, mask []int32, batch, seqLen int) error {
	out, err := m.LogitsTensor(ids, mask, batch, seqLen)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	defer out.FinalizeAll()
	var last float32
	if err := tensors.ConstFlatData(out, func(flat []float32) { last = flat[len(flat)-1] }); err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	if math.IsNaN(float64(last)) || math.IsInf(float64(last), 0) {
		return fmt.Errorf("forward: last logit %v", last)
	}
	return nil
}

// DecodeSpeed returns the tokens/s of greedy decoding: batch rows with a
// prompt of promptLen tokens, then n new tokens per row (timed after a
// first Generate call that compiles the decode graph).
func DecodeSpeed(m *qwen.Model, batch, promptLen, n int) (float64, error) {
	return decodeSpeed(m, batch, promptLen, n, nil)
}

// decodeSpeed is DecodeSpeed calling beforeTimed (when not nil) just
// before the timed generation.
func decodeSpeed(m *qwen.Model, batch, promptLen, n int, beforeTimed func()) (float64, error) {
	prompts := make([][]int, batch)
	for b := range prompts {
		prompts[b] = make([]int, promptLen)
		for i := range prompts[b] {
			prompts[b][i] = (i*7919 + 13 + b) % m.Config.VocabSize
		}
	}
	s, err := m.NewSession(batch, promptLen+n+8, 0)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	if err := s.Append(prompts); err != nil {
		return 0, err
	}
	opts := qwen.GenerateOptions{MaxNewTokens: 1, EOS: []int{}}
	if _, err := s.Generate(opts, nil); err != nil { // compile
		return 0, err
	}
	opts.MaxNewTokens = n
	if beforeTimed != nil {
		beforeTimed()
	}
	t0 := time.Now()
	if _, err := s.Generate(opts, nil); err != nil {
		return 0, err
	}
	return float64(batch*n) / time.Since(t0).Seconds(), nil
}

// Trainer runs next-token cross-entropy training steps with AdamW on a
// model, the step torch_qwen_peer.py times (mean cross-entropy of ids[:, 1:]
// given ids[:, :-1], backward, one AdamW update), built the way training
// builds it: the per-token log-probabilities come from qwen.TokenLogProbs,
// the function of cas train's GRPO loss and warm start (hidden state · the
// target's lm_head row − logsumexp; no [B, T, V] one-hot), so the step
// timed here runs the graph training runs.
type Trainer struct {
	m    *qwen.Model
	exec *context.Exec
}

// NewTrainer builds the training step of m (learning rate lr, PyTorch's
// AdamW defaults otherwise: β = (0.9, 0.999), ε = 1e-8, weight decay 0.01).
func NewTrainer(m *qwen.Model, lr float64) (*Trainer, error) {
	cfg := m.Config
	opt := optimizers.Adam().LearningRate(lr).Betas(0.9, 0.999).Epsilon(1e-8).WeightDecay(0.01).Done()
	exec, err := context.NewExec(m.Backend(), m.Context(), func(ctx *context.Context, ids, mask *graph.Node) *graph.Node {
		logp, _ := qwen.TokenLogProbs(ctx, cfg, ids, mask, nil, qwen.ScoreOptions{}) // [B, T], 0 at t = 0
		b, t := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
		loss := graph.DivScalar(graph.Neg(graph.ReduceAllSum(logp)), float64(b*(t-1)))
		opt.UpdateGraph(ctx, logp.Graph(), loss)
		return loss
	})
	if err != nil {
		return nil, err
	}
	return &Trainer{m: m, exec: exec}, nil
}

// Step trains on ids [batch, seqLen] (the loss predicts ids[:, 1:] from
// their prefixes) and returns the mean cross-entropy before the update.
func (t *Trainer) Step(ids []int32, batch, seqLen int) (float32, error) {
	if len(ids) != batch*seqLen || seqLen < 2 {
		return 0, fmt.Errorf("train step: %d ids for %d×%d", len(ids), batch, seqLen)
	}
	mask := make([]int32, batch*seqLen)
	for i := range mask {
		mask[i] = 1
	}
	out, err := t.exec.Exec(
		tensors.FromFlatDataAndDimensions(ids, batch, seqLen),
		tensors.FromFlatDataAndDimensions(mask, batch, seqLen))
	if err != nil {
		return 0, err
	}
	loss := out[0].Value().(float32)
	for _, o := range out {
		o.FinalizeAll()
	}
	if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
		return loss, fmt.Errorf("train step: loss %v", loss)
	}
	return loss, nil
}

// RunPeer runs torch_qwen_peer.py on cfg and parses its JSON line.
func RunPeer(python, script string, cfg *qwen.Config, batch, seqLen, threads, steps int) (*PeerFigures, error) {
	if _, err := os.Stat(python); err != nil {
		return nil, fmt.Errorf("peer: %s: %w", python, err)
	}
	dir, err := os.MkdirTemp("", "cas-bench-cpu-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfgPath := filepath.Join(dir, "config.json")
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		return nil, err
	}
	// A peer on OpenBLAS's pre-AVX fallback runs with the kernel set the
	// CPU supports forced (blascore.Prepare); its BLAS says so.
	setup := blascore.Prepare(python, blascore.HostFeatures())
	defer setup.Close()
	cmd := exec.Command(python, script, "--config", cfgPath, "--batch", strconv.Itoa(batch),
		"--seqlen", strconv.Itoa(seqLen), "--threads", strconv.Itoa(threads), "--steps", strconv.Itoa(steps))
	cmd.Env = setup.Env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return nil, fmt.Errorf("peer %s: %w (%s)", script, err, msg)
	}
	p, err := ParsePeer(stdout.Bytes())
	if err != nil {
		return nil, err
	}
	p.BLAS = setup.Describe(p.BLAS)
	return p, nil
}

// ParsePeer reads the last JSON line of torch_qwen_peer.py's output.
func ParsePeer(out []byte) (*PeerFigures, error) {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimSpace(lines[i])
		if len(l) == 0 || l[0] != '{' {
			continue
		}
		var p PeerFigures
		if err := json.Unmarshal(l, &p); err != nil {
			return nil, fmt.Errorf("peer output line %d: %w", i+1, err)
		}
		if p.ForwardS <= 0 || p.TrainStepS <= 0 {
			return nil, fmt.Errorf("peer output line %d: missing forward_s or train_step_s", i+1)
		}
		return &p, nil
	}
	return nil, errors.New("peer output has no JSON line")
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

// loadAverage is the 1-minute load average (0 when unknown): the machine
// is shared, so reports carry it next to the timings.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
