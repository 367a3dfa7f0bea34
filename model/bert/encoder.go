package bert

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cas-engine/cas/model/hfbind"
	"github.com/cas-engine/cas/model/safetensors"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Options tune how an Encoder batches its inputs.
type Options struct {
	// BatchSize is the largest number of sequences run in one graph call
	// (default 32). Smaller batches are padded up to a power of two.
	BatchSize int
	// MaxLen is the longest sequence, special tokens included (default 256,
	// what E5 uses in Search-R1; capped at max_position_embeddings).
	MaxLen int
}

// DefaultOptions returns BatchSize 32 and MaxLen 256.
func DefaultOptions() Options { return Options{BatchSize: 32, MaxLen: 256} }

// minBucketLen is the shortest padded length a batch is compiled for.
const minBucketLen = 8

// Encoder embeds token sequences with a BERT model. It is safe for concurrent
// use.
type Encoder struct {
	cfg     Config
	opts    Options
	backend backends.Backend
	ctx     *context.Context
	w       *Weights
	source  string

	mu         sync.Mutex
	embedExec  *context.Exec // (ids, mask) → embedding [b, h]
	hiddenExec *context.Exec // (ids, mask) → last hidden state [b, t, h]
}

// Load reads config.json and the weights (model.safetensors or a sharded
// index) from a Hugging Face BertModel folder, with DefaultOptions.
func Load(dir string, backend backends.Backend) (*Encoder, error) {
	return LoadWithOptions(dir, backend, DefaultOptions())
}

// LoadWithOptions is Load with explicit batching options.
func LoadWithOptions(dir string, backend backends.Backend, opts Options) (*Encoder, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	r, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return FromReader(cfg, r, dir, backend, opts)
}

// FromReader builds an Encoder from a validated config and an open weights
// reader; source names the weights in errors. Tensor names may carry a
// "bert." prefix (BertFor* checkpoints). Every missing, mis-shaped or unused
// tensor is reported in one *hfbind.BindError.
func FromReader(cfg Config, r safetensors.Reader, source string, backend backends.Backend, opts Options) (*Encoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if backend == nil {
		return nil, errors.New("bert: nil backend")
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultOptions().BatchSize
	}
	if opts.MaxLen <= 0 {
		opts.MaxLen = DefaultOptions().MaxLen
	}
	opts.MaxLen = min(opts.MaxLen, cfg.MaxPositionEmbeddings)
	if opts.MaxLen < 2 {
		return nil, fmt.Errorf("bert: max length %d leaves no room for [CLS] and [SEP]", opts.MaxLen)
	}
	prefix := ""
	if _, ok := r.Info("bert.embeddings.word_embeddings.weight"); ok {
		prefix = "bert."
	}
	ck := hfbind.Checkpoint{Tensors: r, Source: source, Prefix: prefix, Model: "BertModel", Ignore: ignoredTensor}
	// Before building anything per layer: the file must hold the layers.
	if err := ck.CheckLayers("encoder.layer.", cfg.NumHiddenLayers); err != nil {
		return nil, err
	}
	w := &Weights{}
	leaves, err := hfbind.Walk(w, env(cfg))
	if err != nil {
		return nil, fmt.Errorf("bert: weight tags: %w", err)
	}
	if err := ck.Check(leaves, env(cfg)); err != nil {
		return nil, err
	}
	ctx := context.New()
	if err := loadVariables(ctx, r, source, prefix, leaves); err != nil {
		return nil, err
	}
	return &Encoder{cfg: cfg, opts: opts, backend: backend, ctx: ctx, w: w, source: source}, nil
}

// Config returns the model configuration.
func (e *Encoder) Config() Config { return e.cfg }

// Options returns the batching options in effect.
func (e *Encoder) Options() Options { return e.opts }

// Dim returns the embedding dimension (hidden_size).
func (e *Encoder) Dim() int { return e.cfg.HiddenSize }

// MaxLen returns the longest accepted sequence.
func (e *Encoder) MaxLen() int { return e.opts.MaxLen }

func (e *Encoder) execs() (embed, hidden *context.Exec, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.embedExec == nil {
		embed, err := context.NewExec(e.backend, e.ctx, func(_ *context.Context, ids, mask *graph.Node) *graph.Node {
			return meanPoolNormalize(e.w.forward(e.cfg, ids, mask), mask)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("bert: %w", err)
		}
		hidden, err := context.NewExec(e.backend, e.ctx, func(_ *context.Context, ids, mask *graph.Node) *graph.Node {
			return e.w.forward(e.cfg, ids, mask)
		})
		if err != nil {
			embed.Finalize()
			return nil, nil, fmt.Errorf("bert: %w", err)
		}
		// Buckets bound the number of shapes: no eviction needed.
		e.embedExec, e.hiddenExec = embed.SetMaxCache(-1), hidden.SetMaxCache(-1)
	}
	return e.embedExec, e.hiddenExec, nil
}

// BucketLen is the padded length a batch whose longest sequence has n tokens
// is compiled for: the next power of two ≥ max(n, 8), capped at maxLen.
func BucketLen(n, maxLen int) int {
	b := minBucketLen
	for b < n {
		b *= 2
	}
	return min(b, maxLen)
}

// bucketBatch rounds a batch of n sequences up to a power of two, capped at
// the batch size.
func bucketBatch(n, batchSize int) int {
	b := 1
	for b < n {
		b *= 2
	}
	return min(b, batchSize)
}

func (e *Encoder) check(ids [][]int) error {
	for i, s := range ids {
		if len(s) == 0 {
			return fmt.Errorf("bert: sequence %d is empty", i)
		}
		if len(s) > e.opts.MaxLen {
			return fmt.Errorf("bert: sequence %d has %d tokens, more than the maximum %d (truncate first)", i, len(s), e.opts.MaxLen)
		}
		for j, id := range s {
			if id < 0 || id >= e.cfg.VocabSize {
				return fmt.Errorf("bert: sequence %d token %d: id %d outside the vocabulary [0, %d)", i, j, id, e.cfg.VocabSize)
			}
		}
	}
	return nil
}

// pack right-pads the sequences rows into a [b, t] batch of ids (pad_token_id)
// and a float mask.
func (e *Encoder) pack(rows [][]int, b, t int) (*tensors.Tensor, *tensors.Tensor) {
	idsFlat := make([]int32, b*t)
	maskFlat := make([]float32, b*t)
	for i := range idsFlat {
		idsFlat[i] = int32(e.cfg.PadTokenID)
	}
	for r, s := range rows {
		for j, id := range s {
			idsFlat[r*t+j] = int32(id)
			maskFlat[r*t+j] = 1
		}
	}
	return tensors.FromFlatDataAndDimensions(idsFlat, b, t), tensors.FromFlatDataAndDimensions(maskFlat, b, t)
}

// Embed returns the L2-normalised mean-pooled embeddings of the token
// sequences (each already carrying [CLS] … [SEP]), as a flat row-major
// [len(ids), Dim()] slice in input order.
func (e *Encoder) Embed(ids [][]int) ([]float32, error) {
	return e.EmbedProgress(ids, nil)
}

// EmbedProgress is Embed calling progress(done, total) after each batch.
// Sequences are sorted by length (longest first) so that each batch pads as
// little as possible; the output keeps the input order.
func (e *Encoder) EmbedProgress(ids [][]int, progress func(done, total int)) ([]float32, error) {
	if err := e.check(ids); err != nil {
		return nil, err
	}
	embed, _, err := e.execs()
	if err != nil {
		return nil, err
	}
	n, H := len(ids), e.cfg.HiddenSize
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(ids[b]), len(ids[a])) })
	out := make([]float32, n*H)
	for start := 0; start < n; start += e.opts.BatchSize {
		end := min(start+e.opts.BatchSize, n)
		rows := make([][]int, 0, end-start)
		for _, i := range order[start:end] {
			rows = append(rows, ids[i])
		}
		b := bucketBatch(len(rows), e.opts.BatchSize)
		t := BucketLen(len(rows[0]), e.opts.MaxLen)
		idsT, maskT := e.pack(rows, b, t)
		res, err := embed.Exec(idsT, maskT)
		if err != nil {
			return nil, fmt.Errorf("bert: embed batch [%d, %d]: %w", b, t, err)
		}
		err = tensors.ConstFlatData(res[0], func(flat []float32) {
			for r, i := range order[start:end] {
				copy(out[i*H:(i+1)*H], flat[r*H:(r+1)*H])
			}
		})
		for _, x := range res {
			x.FinalizeAll()
		}
		if err != nil {
			return nil, fmt.Errorf("bert: embed batch: %w", err)
		}
		if progress != nil {
			progress(end, n)
		}
	}
	return out, nil
}

// LastHiddenState runs the encoder on one right-padded batch and returns the
// last hidden state as a flat [len(ids), T, Dim()] slice, T the longest
// sequence. Positions past a sequence's end hold the model's output for
// pad_token_id (as Hugging Face computes them); mask them out.
func (e *Encoder) LastHiddenState(ids [][]int) ([]float32, []int, error) {
	if err := e.check(ids); err != nil {
		return nil, nil, err
	}
	if len(ids) == 0 {
		return nil, []int{0, 0, e.cfg.HiddenSize}, nil
	}
	_, hidden, err := e.execs()
	if err != nil {
		return nil, nil, err
	}
	n, H := len(ids), e.cfg.HiddenSize
	T := 0
	for _, s := range ids {
		T = max(T, len(s))
	}
	b, t := bucketBatch(n, max(n, e.opts.BatchSize)), BucketLen(T, e.opts.MaxLen)
	idsT, maskT := e.pack(ids, b, t)
	res, err := hidden.Exec(idsT, maskT)
	if err != nil {
		return nil, nil, fmt.Errorf("bert: forward [%d, %d]: %w", b, t, err)
	}
	defer res[0].FinalizeAll()
	out := make([]float32, n*T*H)
	err = tensors.ConstFlatData(res[0], func(flat []float32) {
		for r := 0; r < n; r++ {
			for j := 0; j < T; j++ {
				copy(out[(r*T+j)*H:(r*T+j+1)*H], flat[(r*t+j)*H:(r*t+j+1)*H])
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return out, []int{n, T, H}, nil
}

// Close releases the compiled graphs and the weights.
func (e *Encoder) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.embedExec != nil {
		e.embedExec.Finalize()
		e.hiddenExec.Finalize()
		e.embedExec, e.hiddenExec = nil, nil
	}
	e.ctx.Finalize()
}

// String describes the model.
func (e *Encoder) String() string {
	c := e.cfg
	return fmt.Sprintf("BertModel(%s: %d layers, hidden %d, heads %d, vocab %d, max len %d)",
		strings.TrimSuffix(e.source, "/"), c.NumHiddenLayers, c.HiddenSize, c.NumAttentionHeads, c.VocabSize, e.opts.MaxLen)
}
