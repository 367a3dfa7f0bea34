package qwen

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/backend/gocpu"
	"github.com/cas-engine/cas/internal/sharedtest"
)

// gocpuBackend is one gocpu backend for the host-step tests, whatever
// $GOMLX_BACKEND says (the host step exists only there).
var gocpuBackend = sync.OnceValues(func() (backends.Backend, error) { return backend.NewWithConfig(gocpu.BackendName) })

func hostTestBackend(t *testing.T) backends.Backend {
	t.Helper()
	b, err := gocpuBackend()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostCase is one model of the host-step tests.
type hostCase struct {
	name  string
	model func(t *testing.T) *Model
}

func hostRandom(cfg Config, opts LoadOptions) func(t *testing.T) *Model {
	return func(t *testing.T) *Model {
		m, err := NewRandomWith(&cfg, hostTestBackend(t), 3, opts)
		if err != nil {
			t.Fatal(err)
		}
		if opts.DType == PrecisionBF16 {
			SetComputeDType(m.Context(), PrecisionF32)
		}
		return m
	}
}

func hostGolden(name string) func(t *testing.T) *Model {
	return func(t *testing.T) *Model {
		dir := filepath.Dir(sharedtest.Path(t, "golden", name, "config.json"))
		m, err := Load(dir, hostTestBackend(t), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

var hostCases = []hostCase{
	{"qwen2-tiny", hostGolden("qwen2-tiny")},
	{"qwen3-tiny", hostGolden("qwen3-tiny")},
	// GQA 6:2 (three query heads per KV head), untied, q/k norm.
	{"qwen3 GQA 6:2", hostRandom(Config{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
		VocabSize: 200, HiddenSize: 96, IntermediateSize: 160, NumHiddenLayers: 2,
		NumAttentionHeads: 6, NumKeyValueHeads: 2, HeadDim: 16, HiddenAct: "silu",
		RMSNormEps: 1e-6, RopeTheta: 1e4, MaxPositionEmbeddings: 512,
	}, LoadOptions{})},
	// Odd head counts (5 query heads, one KV head), q/k/v biases, an odd
	// hidden size and a hidden size that is not heads × head_dim.
	{"qwen2 heads 5:1", hostRandom(Config{
		Architectures: []string{"Qwen2ForCausalLM"}, ModelType: "qwen2",
		VocabSize: 131, HiddenSize: 75, IntermediateSize: 97, NumHiddenLayers: 3,
		NumAttentionHeads: 5, NumKeyValueHeads: 1, HeadDim: 18, HiddenAct: "silu",
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, MaxPositionEmbeddings: 512,
	}, LoadOptions{})},
	// bfloat16 weights computing in float32 (the BF16 decode of cas bench
	// cpu), and float32 ones, in layers large enough for the multi-thread
	// GEMV phases (over 96 KiB).
	{"qwen3 bf16 weights", hostRandom(hostMidConfig, LoadOptions{DType: PrecisionBF16})},
	{"qwen3 f32 2 threads", hostRandom(hostMidConfig, LoadOptions{})},
}

var hostMidConfig = Config{
	Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
	VocabSize: 1024, HiddenSize: 256, IntermediateSize: 512, NumHiddenLayers: 2,
	NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 64, HiddenAct: "silu",
	RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, MaxPositionEmbeddings: 512,
}

// hostPair is a host-step session and a graph-step session of one model
// driven through the same calls.
type hostPair struct {
	t          *testing.T
	m          *Model
	host, ref  *Session
	worst      float64 // max over the checks of max |Δlogit| / max |logit|
	worstWhere string
}

func newHostPair(t *testing.T, m *Model, batch, capacity int, maxChunk int) *hostPair {
	p := &hostPair{t: t, m: m}
	var err error
	if p.host, err = m.newSession(batch, capacity, 5, true); err != nil {
		t.Fatal(err)
	}
	if p.ref, err = m.newSession(batch, capacity, 5, false); err != nil {
		t.Fatal(err)
	}
	if p.host.host == nil || p.ref.host != nil {
		t.Fatal("sessions do not run the paths asked for")
	}
	p.host.MaxChunk, p.ref.MaxChunk = maxChunk, maxChunk
	t.Cleanup(func() { p.host.Close(); p.ref.Close() })
	return p
}

// check compares the next-token logits of every row that has them.
func (p *hostPair) check(where string) {
	p.t.Helper()
	for b := range p.ref.Batch() {
		want, got := p.ref.NextLogits(b), p.host.NextLogits(b)
		if (want == nil) != (got == nil) {
			p.t.Fatalf("%s row %d: graph logits present %v, host %v", where, b, want != nil, got != nil)
		}
		if want == nil {
			continue
		}
		diff, scale := maxAbsDiff(got, want)
		if math.IsNaN(diff) || diff > 1e-4*scale {
			p.t.Fatalf("%s row %d: host logits differ from the graph's by %g (max |logit| %g)", where, b, diff, scale)
		}
		if rel := diff / scale; rel > p.worst {
			p.worst, p.worstWhere = rel, fmt.Sprintf("%s row %d", where, b)
		}
	}
}

func (p *hostPair) append(where string, tokens [][]int) {
	p.t.Helper()
	if err := p.ref.Append(tokens); err != nil {
		p.t.Fatal(err)
	}
	if err := p.host.Append(tokens); err != nil {
		p.t.Fatal(err)
	}
	p.check(where)
}

// generate samples greedily on both and requires the same tokens.
func (p *hostPair) generate(where string, n int, active []bool) {
	p.t.Helper()
	opts := GenerateOptions{MaxNewTokens: n, EOS: []int{}}
	want, err := p.ref.Generate(opts, active)
	if err != nil {
		p.t.Fatal(err)
	}
	got, err := p.host.Generate(opts, active)
	if err != nil {
		p.t.Fatal(err)
	}
	for b := range want {
		if !slices.Equal(got[b].IDs, want[b].IDs) {
			p.t.Fatalf("%s row %d: host generated %v, graph %v", where, b, got[b].IDs, want[b].IDs)
		}
		for i := range want[b].LogProbs {
			if d := math.Abs(float64(got[b].LogProbs[i] - want[b].LogProbs[i])); d > 1e-4*math.Max(1, math.Abs(float64(want[b].LogProbs[i]))) {
				p.t.Fatalf("%s row %d token %d: log-prob %g, graph %g", where, b, i, got[b].LogProbs[i], want[b].LogProbs[i])
			}
		}
	}
	p.check(where + ", after generation")
}

func (p *hostPair) keep(rows []int) {
	p.t.Helper()
	if err := p.ref.Keep(rows); err != nil {
		p.t.Fatal(err)
	}
	if err := p.host.Keep(rows); err != nil {
		p.t.Fatal(err)
	}
	p.check(fmt.Sprintf("keep %v", rows))
}

// prompt returns n token ids of row b.
func hostPrompt(m *Model, b, n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = (i*7919 + 13*b + 1) % m.Config.VocabSize
	}
	return p
}

// TestHostStepMatchesGraph drives a host-step session and a graph-step
// session of the same model through the same prefills (chunks of several
// widths, rows of different lengths right-aligned, an empty row), greedy
// generation, Keep, partial appends and cache growth past the capacity,
// and requires the logits to agree within 1e-4 of max |logit| after every
// call and the generated tokens to be identical.
func TestHostStepMatchesGraph(t *testing.T) {
	for _, mc := range hostCases {
		for _, sc := range []struct {
			name     string
			batch    int
			maxChunk int
			capacity int
			lens     []int // prompt lengths per row (0: empty row)
		}{
			{"batch 1, T = 1 chunks", 1, 1, 8, []int{5}},
			{"batch 1, one chunk", 1, 256, 64, []int{37}},
			{"batch 3, chunks of 4, ragged", 3, 4, 16, []int{11, 3, 7}},
			{"batch 4, chunks of 16, empty row, growth", 4, 16, 8, []int{40, 0, 9, 23}},
		} {
			t.Run(mc.name+"/"+sc.name, func(t *testing.T) {
				m := mc.model(t)
				p := newHostPair(t, m, sc.batch, sc.capacity, sc.maxChunk)
				prompts := make([][]int, sc.batch)
				for b, n := range sc.lens {
					prompts[b] = hostPrompt(m, b, n)
				}
				p.append("prefill", prompts)
				active := make([]bool, sc.batch)
				for b, n := range sc.lens {
					active[b] = n > 0
				}
				p.generate("generate", 30, active)
				if sc.batch > 1 {
					// Drop row 0, reverse the others; append to some rows only.
					rows := []int{}
					for b := sc.batch - 1; b >= 1; b-- {
						rows = append(rows, b)
					}
					p.keep(rows)
					more := make([][]int, len(rows))
					more[0] = hostPrompt(m, 9, 6)
					p.append("append after keep", more)
					all := make([]bool, len(rows))
					for i, r := range rows {
						all[i] = sc.lens[r] > 0 || i == 0
					}
					p.generate("generate after keep", 12, all)
				} else {
					p.append("append", [][]int{hostPrompt(m, 4, 19)})
					p.generate("generate after append", 12, nil)
				}
				if p.host.slots <= sc.capacity && sc.capacity < 64 {
					t.Errorf("cache did not grow past %d slots", sc.capacity)
				}
				t.Logf("worst max |Δlogit| / max |logit| = %.3g (%s)", p.worst, p.worstWhere)
			})
		}
	}
}

// TestHostStepWeightsUpdate: a session keeps decoding correctly after the
// model's variables get new tensors (as a training step gives them): the
// host views are rebuilt, and the logits follow the new weights as the
// graph step's do.
func TestHostStepWeightsUpdate(t *testing.T) {
	m := hostCases[5].model(t)
	p := newHostPair(t, m, 1, 64, 256)
	p.append("prefill", [][]int{hostPrompt(m, 0, 9)})
	before := m.host
	for _, v := range before.vars {
		old, err := v.Value()
		if err != nil {
			t.Fatal(err)
		}
		scaled := tensors.MustCopyFlatData[float32](old)
		for i := range scaled {
			scaled[i] *= 1.25
		}
		if err := v.SetValue(tensors.FromFlatDataAndDimensions(scaled, old.Shape().Dimensions...)); err != nil {
			t.Fatal(err)
		}
	}
	p.append("after the update", [][]int{hostPrompt(m, 1, 3)})
	p.generate("generate after the update", 5, nil)
	if m.host == before {
		t.Fatal("host views were not rebuilt after the variables changed")
	}
}

// TestHostSessionCleanup: a host-step session dropped without Close stops
// its helper threads once collected.
func TestHostSessionCleanup(t *testing.T) {
	m := hostCases[5].model(t)
	before := runtime.NumGoroutine()
	func() {
		s, err := m.newSession(1, 64, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append([][]int{hostPrompt(m, 0, 5)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Generate(GenerateOptions{MaxNewTokens: 3, EOS: []int{}}, nil); err != nil {
			t.Fatal(err)
		}
		if runtime.NumGoroutine() <= before {
			t.Fatalf("the session started no helper (%d goroutines)", runtime.NumGoroutine())
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the session was dropped, %d before", runtime.NumGoroutine(), before)
		}
		runtime.GC()
	}
}

// TestUseHostStep: which sessions run the host step.
func TestUseHostStep(t *testing.T) {
	cfg := hostMidConfig
	cfg.NumHiddenLayers = 1
	for _, tc := range []struct {
		name, backend string
		setup         func(t *testing.T, m *Model)
		want          bool
	}{
		{"gocpu", "gocpu", nil, true},
		{"gocpu, 1 worker", "gocpu:workers=1", nil, true},
		{"gocpu nofast", "gocpu:nofast", nil, false},
		{"pure Go", "go", nil, false},
		{"bf16 compute", "gocpu", func(t *testing.T, m *Model) { SetComputeDType(m.Context(), PrecisionBF16) }, false},
		{"SetGraphStep", "gocpu", func(t *testing.T, m *Model) { m.SetGraphStep(true) }, false},
		{"SetGraphStep undone", "gocpu", func(t *testing.T, m *Model) { m.SetGraphStep(true); m.SetGraphStep(false) }, true},
		{StepEnv + "=graph", "gocpu", func(t *testing.T, m *Model) { t.Setenv(StepEnv, "graph") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, err := backend.NewWithConfig(tc.backend)
			if err != nil {
				t.Fatal(err)
			}
			defer be.Finalize()
			m, err := NewRandom(&cfg, be, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if tc.setup != nil {
				tc.setup(t, m)
			}
			s, err := m.NewSession(1, 8, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.host != nil; got != tc.want {
				t.Fatalf("host step %v, want %v", got, tc.want)
			}
			if s.host != nil && s.host.team.workers() != be.(*gocpu.Backend).Workers() {
				t.Fatalf("%d workers, backend has %d", s.host.team.workers(), be.(*gocpu.Backend).Workers())
			}
		})
	}
}
