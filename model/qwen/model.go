package qwen

import (
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/schollz/progressbar/v3"

	"github.com/cas-engine/cas/model/hfbind"
	"github.com/cas-engine/cas/model/safetensors"
	"github.com/cas-engine/cas/tensor"
)

// Model is a Qwen causal LM whose weights are GoMLX context variables, one
// per Hugging Face tensor, under Scope() (see HFName for the naming). The
// graph functions of this package (Logits, HiddenStates, TokenLogProbs)
// read them from any context positioned at that scope, so a trainer can
// build them into its own training graph.
type Model struct {
	Config  *Config
	backend backends.Backend
	ctx     *context.Context
	// weightDType is the dtype the weights are stored in (LoadOptions.DType).
	weightDType dtypes.DType

	logitsExec *context.Exec
	stepExec   *context.Exec
	selectExec *graph.Exec
	mu         sync.Mutex // guards scoreExecs, host and graphStep
	scoreExecs map[ScoreOptions]*context.Exec
	host       *hostSnapshot // the host step's views of the weights (host.go)
	graphStep  bool          // SetGraphStep
}

// LoadOptions tune Load.
type LoadOptions struct {
	// Context receives the variables at its current scope; nil means a new
	// context (root scope).
	Context *context.Context
	// Progress, when set, shows a progress bar of the tensors converted.
	Progress io.Writer
	// DType is the dtype the weights are stored in on the backend: f32
	// (the default) or bf16 (half the memory, for inference; training
	// keeps f32 master weights and uses SetComputeDType instead).
	DType Precision
}

// Load reads a Hugging Face model folder: config.json (plus the EOS ids of
// generation_config.json) and model.safetensors or its sharded index. BF16,
// F16 and F32 tensors are converted to float32 one at a time straight into
// the backend's buffers, so host memory peaks at the float32 model plus one
// tensor (the file itself is memory-mapped, in the page cache).
func Load(dir string, b backends.Backend, opts LoadOptions) (*Model, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	r, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	defer r.Close()
	source := filepath.Join(dir, safetensors.SingleFileName)
	if r.Sharded() {
		source = filepath.Join(dir, safetensors.IndexFileName)
	}
	return FromReader(cfg, r, source, b, opts)
}

// FromReader binds the tensors of r (named source in errors) to a model with
// config cfg. Every missing, unused, mis-shaped or non-float tensor is
// reported at once by its Hugging Face name.
func FromReader(cfg *Config, r safetensors.Reader, source string, b backends.Backend, opts LoadOptions) (*Model, error) {
	if err := checkWeights(cfg, source, r); err != nil {
		return nil, err
	}
	var bar *progressbar.ProgressBar
	if opts.Progress != nil {
		bar = progressbar.NewOptions64(cfg.NumParameters()*4,
			progressbar.OptionSetWriter(opts.Progress), progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetDescription("loading "+source), progressbar.OptionClearOnFinish())
	}
	return newModel(cfg, b, opts, func(s hfbind.Leaf, dst []float32) error {
		if err := r.Float32Into(s.Name, dst); err != nil {
			return fmt.Errorf("%s: tensor %s: %w", source, s.Name, err)
		}
		if bar != nil {
			_ = bar.Add64(int64(4 * len(dst)))
		}
		return nil
	})
}

// NewRandom returns a model with config cfg and seeded random weights
// (normal, std 0.02; norm weights 1), for tests and benchmarks.
func NewRandom(cfg *Config, b backends.Backend, seed uint64) (*Model, error) {
	return NewRandomWith(cfg, b, seed, LoadOptions{})
}

// NewRandomWith is NewRandom with the context and weight dtype of opts.
func NewRandomWith(cfg *Config, b backends.Backend, seed uint64, opts LoadOptions) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	return newModel(cfg, b, opts, func(s hfbind.Leaf, dst []float32) error {
		if strings.HasSuffix(s.Name, "norm.weight") {
			for i := range dst {
				dst[i] = 1
			}
			return nil
		}
		for i := range dst {
			dst[i] = float32(rng.NormFloat64() * 0.02)
		}
		return nil
	})
}

// gcEvery is the tensor size (elements) after which loading forces a GC.
const gcEvery = 8 << 20

// newModel creates one variable per needed tensor, in dtype opts.DType,
// filled by fill (in float32). Each tensor is filled in host memory, moved
// to the backend (shared with it on CPU backends), and its host copy
// released before the next one.
func newModel(cfg *Config, b backends.Backend, opts LoadOptions, fill func(hfbind.Leaf, []float32) error) (*Model, error) {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.New()
	}
	p, err := ParsePrecision(string(opts.DType))
	if err != nil {
		return nil, err
	}
	for _, s := range weightSpecs(cfg) {
		if !s.Needed {
			continue
		}
		scope, name := hfbind.VariableScope(ctx.Scope(), s.Name)
		if ctx.GetVariableByScopeAndName(scope, name) != nil {
			return nil, fmt.Errorf("tensor %s: variable %s/%s already exists in the context", s.Name, scope, name)
		}
		t := tensors.FromShape(shapes.Make(dtypes.Float32, s.Shape...))
		var err error
		tensors.MustMutableFlatData(t, func(flat []float32) { err = fill(s, flat) })
		if err != nil {
			return nil, err
		}
		if p == PrecisionBF16 {
			t = toBF16(t)
		}
		if err := t.MaterializeOnDevice(b, true, 0); err != nil {
			return nil, fmt.Errorf("tensor %s: %w", s.Name, err)
		}
		if !t.IsShared() {
			t.FinalizeLocal()
		}
		ctx.InAbsPath(scope).VariableWithValue(name, t)
		if product(s.Shape) >= gcEvery {
			// The host buffer just copied to the backend is garbage now;
			// collect it before the next large tensor so that the heap never
			// holds a second copy of the model (the GC's default growth
			// target would allow up to twice the live heap).
			runtime.GC()
		}
	}
	m := &Model{Config: cfg, backend: b, ctx: ctx, weightDType: p.DType()}
	if err := m.initExecs(); err != nil {
		return nil, err
	}
	return m, nil
}

// Context returns the context positioned at the model's scope.
func (m *Model) Context() *context.Context { return m.ctx }

// SetTrainable marks every weight of the model trainable or frozen (the
// reference model of GRPO's KL term is frozen), so optimizers and
// BuildTrainableVariablesGradientsGraph include or skip them.
func (m *Model) SetTrainable(trainable bool) {
	for _, s := range weightSpecs(m.Config) {
		if !s.Needed {
			continue
		}
		scope, name := hfbind.VariableScope(m.ctx.Scope(), s.Name)
		if v := m.ctx.GetVariableByScopeAndName(scope, name); v != nil {
			v.SetTrainable(trainable)
		}
	}
}

// Backend returns the backend the weights live on.
func (m *Model) Backend() backends.Backend { return m.backend }

// ForEachWeight calls fn with every weight's Hugging Face name, shape and
// float32 values (valid only during the call), in checkpoint order.
func (m *Model) ForEachWeight(fn func(name string, shape []int, values []float32) error) error {
	for _, s := range weightSpecs(m.Config) {
		if !s.Needed {
			continue
		}
		if err := m.visitWeight(s, fn); err != nil {
			return err
		}
	}
	return nil
}

// visitWeight calls fn with one weight's float32 values.
func (m *Model) visitWeight(s hfbind.Leaf, fn func(name string, shape []int, values []float32) error) error {
	scope, name := hfbind.VariableScope(m.ctx.Scope(), s.Name)
	v := m.ctx.GetVariableByScopeAndName(scope, name)
	if v == nil {
		return fmt.Errorf("model variable for %s is missing", s.Name)
	}
	t, err := v.Value()
	if err != nil {
		return err
	}
	if t.DType() == dtypes.BFloat16 {
		t = toF32(t)
		defer t.FinalizeAll()
	}
	err = tensors.ConstFlatData(t, func(flat []float32) { err = fn(s.Name, s.Shape, flat) })
	return err
}

// Save writes the weights as a Hugging Face safetensors file (atomically),
// in dtype F32 or BF16, so that Load can read the folder back.
func (m *Model) Save(path string, dtype safetensors.DType) error {
	var ts []safetensors.Tensor
	err := m.ForEachWeight(func(name string, shape []int, values []float32) error {
		switch dtype {
		case safetensors.F32:
			ts = append(ts, safetensors.F32Tensor(name, shape, values))
		case safetensors.BF16:
			ts = append(ts, safetensors.BF16Tensor(name, shape, values))
		default:
			return fmt.Errorf("save %s: unsupported dtype %s (want F32 or BF16)", path, dtype)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return safetensors.Write(path, ts, map[string]string{"format": "pt"})
}

// stepGraphCache bounds the compiled graphs (one per input shape) that the
// step and row-selection executables of a model keep.
const stepGraphCache = 512

// initExecs compiles nothing yet: GoMLX compiles each graph on first use,
// once per distinct input shapes.
func (m *Model) initExecs() error {
	var err error
	c := m.Config
	m.logitsExec, err = context.NewExec(m.backend, m.ctx, func(ctx *context.Context, ids, mask *graph.Node) *graph.Node {
		return Logits(ctx, c, ids, mask)
	})
	if err != nil {
		return err
	}
	m.stepExec, err = context.NewExec(m.backend, m.ctx, func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		return stepGraph(ctx, c, in)
	})
	if err != nil {
		return err
	}
	// A step graph is compiled per (rows, chunk width, slots): rows fall
	// one by one as Session.Keep drops finished ones and chunk widths run
	// through the powers of two, so one evaluation of 200 questions in
	// batches of 64 can need more than GoMLX's default of 32 graphs, past
	// which Exec fails.
	m.stepExec.SetMaxCache(stepGraphCache)
	m.selectExec, err = graph.NewExec(m.backend, selectRowsGraph)
	if err != nil {
		return err
	}
	m.selectExec.SetMaxCache(stepGraphCache)
	return nil
}

// Logits runs the full forward pass for ids and mask, both [batch, seqLen]
// row-major (mask 1 for real tokens, left or right padding), and returns the
// logits [batch, seqLen, vocab] row-major in a new slice.
func (m *Model) Logits(ids, mask []int32, batch, seqLen int) ([]float32, error) {
	if batch <= 0 || seqLen <= 0 {
		return nil, fmt.Errorf("logits: want a positive batch and length, got %d×%d", batch, seqLen)
	}
	out := make([]float32, batch*seqLen*m.Config.VocabSize)
	if err := m.LogitsInto(out, ids, mask, batch, seqLen); err != nil {
		return nil, err
	}
	return out, nil
}

// LogitsInto is Logits writing into dst (length batch·seqLen·vocab), so
// that a caller running many passes reuses one buffer: on the CPU backend
// the logits are read straight from the executor's output (no
// intermediate copy), and a reused dst is not faulted in afresh each pass
// (a 8×256×16384 float32 result is 134 MB).
func (m *Model) LogitsInto(dst []float32, ids, mask []int32, batch, seqLen int) error {
	if want := batch * seqLen * m.Config.VocabSize; batch > 0 && seqLen > 0 && len(dst) != want {
		return fmt.Errorf("logits: output buffer holds %d floats, want %d×%d×%d = %d", len(dst), batch, seqLen, m.Config.VocabSize, want)
	}
	out, err := m.LogitsTensor(ids, mask, batch, seqLen)
	if err != nil {
		return err
	}
	defer out.FinalizeAll()
	return tensors.ConstFlatData(out, func(flat []float32) { tensor.Copy(dst, flat, 0) })
}

// LogitsTensor is Logits returning the executor's output itself: a float32
// tensor [batch, seqLen, vocab] that the caller reads (on the CPU backends
// tensors.ConstFlatData reads the backend's buffer in place, nothing is
// copied) and must release with FinalizeAll, which hands its buffer back
// to the backend for the next pass.
func (m *Model) LogitsTensor(ids, mask []int32, batch, seqLen int) (*tensors.Tensor, error) {
	if batch <= 0 || seqLen <= 0 || len(ids) != batch*seqLen || len(mask) != batch*seqLen {
		return nil, fmt.Errorf("logits: want %d×%d ids and mask, got %d and %d", batch, seqLen, len(ids), len(mask))
	}
	if err := m.checkIDs(ids); err != nil {
		return nil, fmt.Errorf("logits: %w", err)
	}
	out, err := m.logitsExec.Exec1(
		tensors.FromFlatDataAndDimensions(ids, batch, seqLen),
		tensors.FromFlatDataAndDimensions(mask, batch, seqLen))
	if err != nil {
		return nil, fmt.Errorf("logits: %w", err)
	}
	return out, nil
}

// checkIDs rejects token ids outside the vocabulary (Gather would clamp
// them silently).
func (m *Model) checkIDs(ids []int32) error {
	for i, id := range ids {
		if id < 0 || int(id) >= m.Config.VocabSize {
			return fmt.Errorf("token id %d at index %d outside the vocabulary [0, %d)", id, i, m.Config.VocabSize)
		}
	}
	return nil
}

// logSoftmaxAt returns log softmax(logits)[i] = logits[i] − log Σⱼ
// exp(logitsⱼ), the sum from tensor.LogSumExp (float32 exponentials summed
// in float64: within a few float32 ulps of the all-float64 value).
func logSoftmaxAt(logits []float32, i int) float32 {
	return float32(float64(logits[i]) - tensor.LogSumExp(logits))
}
