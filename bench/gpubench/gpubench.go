// Package gpubench measures a backend the way the GPU check reports it
// (`cas bench gpu`, run by gpu/check.sh): prefill and batch-1/batch-64
// decode tokens/s of Qwen-shaped random models next to the memory-bandwidth
// bound of batch-1 decoding, and one GRPO+ACI training step (rollout with
// BM25 retrieval over the synthetic world, scoring, loss, backward, AdamW)
// with the time of each phase and the peak device memory.
//
// Batch-1 decoding streams every weight once per token, so its speed is
// bounded by bandwidth / weight bytes (the "HBM bound"); the fraction of it
// reached is the figure of merit of a decoder (vLLM: ≈ 66% on an H100).
//
// It sits at the end of the data flow (bench): it uses model/qwen, train,
// search and world, and nothing uses it.
package gpubench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomlx/gomlx/backends"

	"github.com/cas-engine/cas/bench"
	"github.com/cas-engine/cas/bench/cpubench"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
	"github.com/cas-engine/cas/train"
	"github.com/cas-engine/cas/world"
)

// qwen25 returns a Qwen2.5 (Qwen2ForCausalLM) config of the given sizes.
func qwen25(vocab, hidden, inter, layers, heads, kvHeads, headDim int, tied bool) *qwen.Config {
	return &qwen.Config{
		Architectures: []string{"Qwen2ForCausalLM"}, ModelType: "qwen2",
		VocabSize: vocab, HiddenSize: hidden, IntermediateSize: inter, NumHiddenLayers: layers,
		NumAttentionHeads: heads, NumKeyValueHeads: kvHeads, HeadDim: headDim, HiddenAct: "silu",
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: tied, MaxPositionEmbeddings: 32768,
	}
}

// Shapes are the model shapes the check measures, by name: the published
// configs of Qwen2.5-0.5B and Qwen2.5-3B (both tied; the Qwen vocabulary),
// and "tiny", the same layout at a size a CPU rehearsal runs in seconds,
// whose 1,024-entry vocabulary fits the synthetic world's tokenizer but not
// the Qwen one.
var Shapes = map[string]*qwen.Config{
	"tiny":         qwen25(1024, 64, 128, 2, 4, 2, 16, true),
	"qwen2.5-0.5b": qwen25(151936, 896, 4864, 24, 14, 2, 64, true),
	"qwen2.5-3b":   qwen25(151936, 2048, 11008, 36, 16, 2, 128, true),
}

// ShapeNames lists Shapes' names, sorted.
func ShapeNames() []string {
	var n []string
	for k := range Shapes {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// LookupShape returns the named shape or an error listing the names.
func LookupShape(name string) (*qwen.Config, error) {
	c, ok := Shapes[strings.ToLower(name)]
	if !ok {
		return nil, fmt.Errorf("unknown model shape %q (known: %s)", name, strings.Join(ShapeNames(), ", "))
	}
	return c, nil
}

// DecodeOptions configure Decode.
type DecodeOptions struct {
	Shape     string
	Precision qwen.Precision // weight storage and compute dtype
	PromptLen int            // prefill length (one row, one chunk); 0: 512
	// Batches are the decode batch sizes (nil: 1 and 64); NewTokens the
	// tokens timed per row (0: 64) after a 64-token prompt.
	Batches   []int
	NewTokens int
	Seed      uint64
}

// DecodeRow is one shape's inference figures.
type DecodeRow struct {
	Shape       string  `json:"shape"`
	Precision   string  `json:"precision"`
	Parameters  int64   `json:"parameters"`
	WeightBytes int64   `json:"weight_bytes"`
	InitS       float64 `json:"init_s"`
	PromptLen   int     `json:"prompt_len"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	// Decode maps "batchN" to tokens/s over all rows.
	Decode map[string]float64 `json:"decode_tok_s"`
	// HBMBoundTokS is bandwidth / weight bytes (0 when the bandwidth is
	// unknown); OfBound the batch-1 decode speed's fraction of it.
	HBMBoundTokS float64 `json:"hbm_bound_tok_s,omitempty"`
	OfBound      float64 `json:"batch1_of_bound,omitempty"`
}

// Decode builds a random model of the shape and measures prefill and
// decode speed on b. bandwidth (bytes/s; 0 unknown) gives the bound.
func Decode(b backends.Backend, opt DecodeOptions, bandwidth float64) (*DecodeRow, error) {
	cfg, err := LookupShape(opt.Shape)
	if err != nil {
		return nil, err
	}
	bench.Default(&opt.PromptLen, 512)
	bench.Default(&opt.NewTokens, 64)
	bench.DefaultList(&opt.Batches, []int{1, 64})
	t0 := time.Now()
	m, err := qwen.NewRandomWith(cfg, b, opt.Seed+1, qwen.LoadOptions{DType: opt.Precision})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opt.Shape, err)
	}
	defer m.Close()
	bytesPer := int64(4)
	if opt.Precision == qwen.PrecisionBF16 {
		bytesPer = 2
	}
	row := &DecodeRow{Shape: opt.Shape, Precision: string(opt.Precision), Parameters: cfg.NumParameters(),
		WeightBytes: cfg.NumParameters() * bytesPer, InitS: time.Since(t0).Seconds(), PromptLen: opt.PromptLen,
		Decode: map[string]float64{}}
	if row.PrefillTokS, err = Prefill(m, opt.PromptLen); err != nil {
		return nil, fmt.Errorf("%s prefill: %w", opt.Shape, err)
	}
	for _, batch := range opt.Batches {
		tps, err := cpubench.DecodeSpeed(m, batch, 64, opt.NewTokens)
		if err != nil {
			return nil, fmt.Errorf("%s decode batch %d: %w", opt.Shape, batch, err)
		}
		row.Decode["batch"+strconv.Itoa(batch)] = tps
	}
	if bandwidth > 0 {
		row.HBMBoundTokS = bandwidth / float64(row.WeightBytes)
		if tps, ok := row.Decode["batch1"]; ok {
			row.OfBound = tps / row.HBMBoundTokS
		}
	}
	return row, nil
}

// Prefill returns the tokens/s of processing one promptLen-token row in a
// single chunk through the KV-cache step graph (timed after a first,
// compiling, run; the best of three).
func Prefill(m *qwen.Model, promptLen int) (float64, error) {
	prompt := make([]int, promptLen)
	for i := range prompt {
		prompt[i] = (i*7919 + 13) % m.Config.VocabSize
	}
	run := func() (time.Duration, error) {
		s, err := m.NewSession(1, promptLen+1, 0)
		if err != nil {
			return 0, err
		}
		defer s.Close()
		s.MaxChunk = promptLen
		t0 := time.Now()
		if err := s.Append([][]int{prompt}); err != nil {
			return 0, err
		}
		_ = s.NextLogits(0) // the logits are on the host: the step is done
		return time.Since(t0), nil
	}
	if _, err := run(); err != nil {
		return 0, err
	}
	best := time.Duration(1<<63 - 1)
	for range 3 {
		d, err := run()
		if err != nil {
			return 0, err
		}
		best = min(best, d)
	}
	return float64(promptLen) / best.Seconds(), nil
}

// GRPOOptions configure GRPOStep.
type GRPOOptions struct {
	Shape     string
	Precision qwen.Precision // "bf16": mixed precision (f32 master weights)
	// Tokenizer is a tokenizer.json (the Qwen one for the real shapes);
	// empty trains the synthetic world's small BPE tokenizer.
	Tokenizer string
	Prompts   int // prompts per step (0: 8)
	Group     int // trajectories per prompt (0: 5)
	// MaxTurnTokens and MaxTurns bound each generation (0: the paper's).
	MaxTurnTokens, MaxTurns int
	// MicroBatch is the trajectories per forward/backward (0: 8).
	MicroBatch int
	Seed       uint64
	// WorkDir holds the world's corpus and BM25 index (a temporary folder
	// when empty).
	WorkDir string
}

// GRPORow is the figures of one GRPO+ACI step.
type GRPORow struct {
	Shape          string  `json:"shape"`
	Precision      string  `json:"precision"`
	Parameters     int64   `json:"parameters"`
	Prompts        int     `json:"prompts"`
	Group          int     `json:"group"`
	InitS          float64 `json:"init_s"`
	RolloutS       float64 `json:"rollout_s"`
	ScoreS         float64 `json:"score_s"`
	UpdateS        float64 `json:"update_s"`
	StepS          float64 `json:"step_s"`
	ResponseTokens float64 `json:"response_tokens_mean"` // generated + retrieved
	PolicyTokens   float64 `json:"policy_tokens_mean"`   // generated
	RolloutTokS    float64 `json:"rollout_tok_s"`
	Loss           float64 `json:"loss"`
	GradNorm       float64 `json:"grad_norm"`
	Reward         float64 `json:"reward_mean"`
	SearchCalls    float64 `json:"search_calls_mean"`
	// PeakMemBytes is the peak device memory during the step (PeakMemSource
	// says how it was measured: nvidia-smi, or the process's peak RSS).
	PeakMemBytes  int64  `json:"peak_mem_bytes"`
	PeakMemSource string `json:"peak_mem_source"`
}

// GRPOStep runs one GRPO+ACI training step (train.BenchStep) of a random
// policy of the shape on the synthetic world's train questions, retrieving
// with BM25 over its corpus (top-3 passages per search; APS needs a
// calibrated threshold, which a random policy has no use for). The ACI
// window is preloaded with 64 scores spread over [4, 8] nats.
func GRPOStep(ctx context.Context, b backends.Backend, opt GRPOOptions, mem *MemSampler) (*GRPORow, error) {
	cfg, err := LookupShape(opt.Shape)
	if err != nil {
		return nil, err
	}
	bench.Default(&opt.Prompts, 8)
	bench.Default(&opt.Group, 5)
	dir := opt.WorkDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cas-gpubench-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	w, retriever, prompts, err := worldRetriever(ctx, dir, opt.Seed)
	if err != nil {
		return nil, err
	}
	defer retriever.Close()
	tokPath := opt.Tokenizer
	if tokPath == "" {
		if tokPath, err = worldTokenizer(w, dir); err != nil {
			return nil, err
		}
	}
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", tokPath, err)
	}
	if tok.VocabSize() > cfg.VocabSize {
		return nil, fmt.Errorf("tokenizer %s has %d ids, more than the %d of shape %s", tokPath, tok.VocabSize(), cfg.VocabSize, opt.Shape)
	}

	tc := train.DefaultConfig()
	tc.Name, tc.Seed, tc.Steps = "bench-"+opt.Shape, opt.Seed, 1
	tc.Model.Precision = string(opt.Precision)
	tc.APS.Enabled = false
	tc.GRPO.PromptsPerStep, tc.GRPO.MiniBatchPrompts = opt.Prompts, opt.Prompts
	tc.Rollout.GroupSize = opt.Group
	if opt.MicroBatch > 0 {
		tc.GRPO.MicroBatch = opt.MicroBatch
	}
	if opt.MaxTurnTokens > 0 {
		tc.Rollout.MaxTurnTokens = opt.MaxTurnTokens
	}
	if opt.MaxTurns > 0 {
		tc.Rollout.MaxTurns = opt.MaxTurns
	}
	t0 := time.Now()
	in := train.BenchInput{Tokenizer: tok, Retriever: retriever, Prompts: prompts}
	if in.Policy, in.Reference, err = train.BenchModels(cfg, b, qwen.Precision(tc.Model.Precision), opt.Seed+1); err != nil {
		return nil, fmt.Errorf("%s: %w", opt.Shape, err)
	}
	defer in.Policy.Close()
	defer in.Reference.Close()
	for i := range 64 {
		in.Bootstrap = append(in.Bootstrap, 4+4*float64(i)/63)
	}
	row := &GRPORow{Shape: opt.Shape, Precision: tc.Model.Precision, Parameters: cfg.NumParameters(),
		Prompts: opt.Prompts, Group: opt.Group, InitS: time.Since(t0).Seconds()}
	if row.Precision == "" {
		row.Precision = string(qwen.PrecisionF32)
	}
	mem.Reset()
	m, err := train.BenchStep(ctx, &tc, in)
	if err != nil {
		return nil, fmt.Errorf("grpo step of %s: %w", opt.Shape, err)
	}
	row.PeakMemBytes, row.PeakMemSource = mem.Peak()
	row.RolloutS, row.ScoreS, row.UpdateS, row.StepS = m.RolloutTime, m.ScoreTime, m.UpdateTime, m.StepTime
	row.ResponseTokens, row.PolicyTokens, row.RolloutTokS = m.ResponseLen, m.PolicyTokens, m.TokensPerSec
	row.Loss, row.GradNorm, row.Reward, row.SearchCalls = m.Loss, m.GradNorm, m.Reward, m.SearchCalls
	return row, nil
}

// worldTokenizer trains the world's BPE tokenizer and writes it to
// dir/tokenizer.json.
func worldTokenizer(w *world.World, dir string) (string, error) {
	bm, err := w.TrainTokenizer()
	if err != nil {
		return "", fmt.Errorf("world tokenizer: %w", err)
	}
	path := filepath.Join(dir, world.TokenizerFile)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := bm.WriteJSON(f); err != nil {
		f.Close()
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return path, f.Close()
}

// worldRetriever writes the small synthetic world's corpus under dir,
// builds its BM25 index, and returns the world, the retriever and the
// train split's questions as prompts.
func worldRetriever(ctx context.Context, dir string, seed uint64) (*world.World, search.ClosableRetriever, []qa.Record, error) {
	w, err := world.Generate(world.SmallConfig(seed))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("world: %w", err)
	}
	corpus := filepath.Join(dir, world.CorpusFile)
	f, err := os.Create(corpus)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := world.WriteCorpus(f, w.Passages); err != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("%s: %w", corpus, err)
	}
	if err := f.Close(); err != nil {
		return nil, nil, nil, err
	}
	index := filepath.Join(dir, "index")
	if _, err := search.BuildBM25Folder(ctx, corpus, index, search.DefaultBM25BuildOptions()); err != nil {
		return nil, nil, nil, fmt.Errorf("bm25 index of %s: %w", corpus, err)
	}
	r, _, err := search.OpenRetriever(index, search.OpenOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open %s: %w", index, err)
	}
	var prompts []qa.Record
	for _, q := range w.Splits[world.Train] {
		prompts = append(prompts, qa.Record{ID: q.ID, Question: q.Question, Answers: q.GoldenAnswers})
	}
	return w, r, prompts, nil
}

// MemSampler follows the device memory in use: nvidia-smi's memory.used of
// the first GPU sampled every 50 ms when nvidia-smi runs, else the
// process's peak resident set (VmHWM; it cannot be reset, so on CPU the
// peak covers the whole process so far).
type MemSampler struct {
	mu     sync.Mutex
	peak   int64
	cmd    *exec.Cmd
	gpu    bool
	cancel context.CancelFunc
}

// NewMemSampler starts sampling (Close stops it).
func NewMemSampler() *MemSampler {
	s := &MemSampler{}
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0", "-lms", "50")
	out, err := cmd.StdoutPipe()
	if err != nil || cmd.Start() != nil {
		cancel()
		return s
	}
	s.cmd, s.cancel, s.gpu = cmd, cancel, true
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if mib, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64); err == nil {
				s.mu.Lock()
				s.peak = max(s.peak, mib<<20)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// Reset starts a new peak.
func (s *MemSampler) Reset() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.peak = 0
	s.mu.Unlock()
}

// Peak returns the peak bytes since Reset and how they were measured.
func (s *MemSampler) Peak() (int64, string) {
	if s == nil {
		return 0, ""
	}
	if !s.gpu {
		return bench.PeakRSS(), "process peak RSS (VmHWM)"
	}
	time.Sleep(120 * time.Millisecond) // one more sample
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, "nvidia-smi memory.used (GPU 0, 50 ms samples)"
}

// Close stops the sampler.
func (s *MemSampler) Close() {
	if s != nil && s.cancel != nil {
		s.cancel()
		_ = s.cmd.Wait()
	}
}

// Report is everything one `cas bench gpu` run measured.
type Report struct {
	Backend   string       `json:"backend"`
	Device    string       `json:"device"`
	HBMGBps   float64      `json:"hbm_gb_s,omitempty"`
	Decode    []*DecodeRow `json:"decode,omitempty"`
	GRPO      []*GRPORow   `json:"grpo,omitempty"`
	Errors    []string     `json:"errors,omitempty"`
	StartedAt string       `json:"started_at"`
	WallS     float64      `json:"wall_s"`
}

// WriteJSON writes r indented.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
