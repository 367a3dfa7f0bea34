package train

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/model/qwen"
)

// SFT is the supervised warm start of `cas demo`: it minimises
// WeightedNextTokenLoss,
//
//	L = −(1/W) Σ_{b,t} w_{b,t} · log π_θ(y_{b,t} | y_{b,<t}),   W = Σ w,
//
// with w = 1 on the tokens the policy writes and w = λ on the others
// (question and <information> tokens; λ = 0 masks them out as the paper's
// warm start does, and is then WarmStart's objective), with
// AdamW — but shaped for a tiny model on two cores, where the
// vocabulary projection and padding dominate the cost:
//
//   - with λ = 0 the next-token distribution is computed only at the N
//     loss positions (28% of the tokens of a scripted trajectory): the
//     final hidden states are gathered at those positions before the
//     [N, V] projection, instead of projecting all B·T positions;
//   - batches are drawn from length-sorted pools and padded to a multiple
//     of 64 tokens, not to the next power of two;
//   - one optimiser carries its moments across the whole warm start (the
//     learning rate can still change between steps).
//
// The reported cross-entropy is always the policy tokens' (w = 1). Each
// (T, N) shape compiles one graph; T and N are rounded up to limit the
// shapes to a few dozen (with λ > 0, N = B·T: one graph per length).
//
// Estimating the λ term by sampling instead — a fraction λ of the
// environment tokens in the loss at weight 1, the same expected gradient
// with less than half the [N, V] rows — ran the default preset's warm start
// at 18.1k tokens/s against 15.9k, but ended at a policy cross-entropy of
// 0.42 after 3,000 steps against 0.03 after 2,400 with the weights, and at
// test EM 0.31 against 0.655 (one run each, seed 1).
type SFT struct {
	m     *qwen.Model
	head  *context.Variable
	cfg   OptimConfig
	execs map[float64]*context.Exec
	batch int
	src   *rand.PCG // rng's source, saved with every warm-start save
	rng   *rand.Rand
	order [][]int // batches of the current epoch
	pos   int
	// envWeight λ weighs the next-token loss on the tokens the policy does
	// not write (the question and the information blocks); 0 leaves them
	// out, as WarmStart does.
	envWeight float64
}

// padLen rounds a sequence length up to a multiple of 64.
func padLen(n int) int { return (n + 63) / 64 * 64 }

// padN rounds a loss-token count up to a multiple of 256.
func padN(n int) int { return max(256, (n+255)/256*256) }

// NewSFT prepares the supervised trainer of m: batches of batch examples
// drawn with seed, AdamW with cfg (its LR is replaced by each Step's), the
// environment tokens at weight envWeight λ ∈ [0, 1].
func NewSFT(m *qwen.Model, cfg OptimConfig, batch int, seed uint64, envWeight float64) (*SFT, error) {
	if batch < 1 {
		return nil, fmt.Errorf("sft: batch %d < 1", batch)
	}
	if !(envWeight >= 0 && envWeight <= 1) {
		return nil, fmt.Errorf("sft: environment weight λ = %g outside [0, 1]", envWeight)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	src := rand.NewPCG(seed, 0x5f7)
	s := &SFT{m: m, cfg: cfg, execs: map[float64]*context.Exec{}, batch: batch, src: src, rng: rand.New(src), envWeight: envWeight}
	want := "lm_head.weight"
	if m.Config.TieWordEmbeddings {
		want = "model.embed_tokens.weight"
	}
	base := m.Context().Scope()
	for v := range m.Context().IterVariables() {
		if name, ok := qwen.HFName(base, v); ok && name == want {
			s.head = v
		}
	}
	if s.head == nil {
		return nil, fmt.Errorf("sft: the policy has no %s", want)
	}
	return s, nil
}

// exec returns the training step at learning rate lr (the optimiser's
// moments and step counter live in the policy's context, shared by every
// learning rate).
func (s *SFT) exec(lr float64) (*context.Exec, error) {
	if e, ok := s.execs[lr]; ok {
		return e, nil
	}
	oc := s.cfg
	oc.LR = lr
	opt, err := NewAdamW(oc)
	if err != nil {
		return nil, err
	}
	c := s.m.Config
	e, err := context.NewExec(s.m.Backend(), s.m.Context(), func(ctx *context.Context, ids, attn, pos, tgt, w, pm *graph.Node) []*graph.Node {
		loss, policyCE := WeightedNextTokenLoss(ctx, c, s.head.ValueGraph(ids.Graph()), ids, attn, pos, tgt, w, pm)
		opt.UpdateGraph(ctx, ids.Graph(), loss)
		return []*graph.Node{policyCE}
	})
	if err != nil {
		return nil, err
	}
	s.execs[lr] = e
	return e, nil
}

// WeightedNextTokenLoss is the warm start's objective on a batch (SFT):
//
//	L = Σ_n w_n · NLL_n / max(Σ_n w_n, 1),   NLL_n = −log softmax(h_{pos_n} · Eᵀ)[tgt_n],
//
// over N loss entries, each the hidden state at flat position pos_n of
// ids [B, T] (attention mask attn) predicting token tgt_n with weight w_n
// (1 for a token the policy writes, λ for a question or passage token, 0
// for padding), head E [V, D] the output projection. policyCE is the
// cross-entropy of the policy tokens alone (pm_n = 1), without gradient,
// the number reported. Only the N selected states are projected onto the
// vocabulary.
func WeightedNextTokenLoss(ctx *context.Context, c *qwen.Config, head, ids, attn, pos, tgt, w, pm *graph.Node) (loss, policyCE *graph.Node) {
	g := ids.Graph()
	b, t := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
	hidden := qwen.HiddenStates(ctx, c, ids, attn)       // [B, T, D]
	flat := graph.Reshape(hidden, b*t, c.HiddenSize)     // [B·T, D]
	sel := graph.Gather(flat, graph.ExpandAxes(pos, -1)) // [N, D]: the states predicting the targets
	logits := graph.DotGeneral(sel, []int{1}, nil, head, []int{1}, nil)
	mx := graph.StopGradient(graph.ReduceAndKeep(logits, graph.ReduceMax, -1))
	lse := graph.Add(graph.Log(graph.ReduceSum(graph.Exp(graph.Sub(logits, mx)), -1)), graph.Reshape(mx, -1))
	rows := graph.Gather(head, graph.ExpandAxes(tgt, -1)) // [N, D]
	target := graph.Einsum("nd,nd->n", sel, rows)
	nll := graph.Sub(lse, target)
	one := graph.ScalarOne(g, dtypes.Float32)
	loss = graph.Div(graph.ReduceAllSum(graph.Mul(nll, w)), graph.Max(graph.ReduceAllSum(w), one))
	policyCE = graph.Div(graph.ReduceAllSum(graph.Mul(graph.StopGradient(nll), pm)), graph.Max(graph.ReduceAllSum(pm), one))
	return loss, policyCE
}

// epoch draws the batches of one pass: examples shuffled, cut into pools of
// 16 batches, each pool sorted by length and cut into batches, the batches
// shuffled.
func (s *SFT) epoch(ex []*agent.Trajectory) {
	perm := s.rng.Perm(len(ex))
	pool := 16 * s.batch
	s.order = s.order[:0]
	for off := 0; off+s.batch <= len(perm); off += pool {
		p := slices.Clone(perm[off:min(off+pool, len(perm))])
		slices.SortFunc(p, func(a, b int) int { return len(ex[a].IDs) - len(ex[b].IDs) })
		for i := 0; i+s.batch <= len(p); i += s.batch {
			s.order = append(s.order, p[i:i+s.batch])
		}
	}
	s.rng.Shuffle(len(s.order), func(i, j int) { s.order[i], s.order[j] = s.order[j], s.order[i] })
	s.pos = 0
}

// SFTState is the part of the trainer's state outside the policy's
// context (weights and AdamW moments): the batch sampler's RNG and the
// current epoch's batches, so that a resumed warm start draws exactly the
// batches an uninterrupted one would.
type SFTState struct {
	RNG   []byte  `json:"rng"`
	Order [][]int `json:"order"`
	Pos   int     `json:"pos"`
}

// State returns the sampler's state, saved with the policy (and its AdamW
// moments, in the policy's context) for a resume.
func (s *SFT) State() (SFTState, error) {
	rng, err := s.src.MarshalBinary()
	return SFTState{RNG: rng, Order: s.order, Pos: s.pos}, err
}

// Restore sets the sampler to st, checking it against the n examples.
func (s *SFT) Restore(st SFTState, n int) error {
	if err := st.Check(s.batch, n); err != nil {
		return err
	}
	if err := s.src.UnmarshalBinary(st.RNG); err != nil {
		return fmt.Errorf("sft state: rng: %w", err)
	}
	s.order, s.pos = st.Order, st.Pos
	return nil
}

// Check reports whether st can resume a sampler of batches of batch
// examples out of n: a valid RNG state, a position inside the epoch, and
// batches of batch indices in [0, n).
func (st SFTState) Check(batch, n int) error {
	if err := new(rand.PCG).UnmarshalBinary(st.RNG); err != nil {
		return fmt.Errorf("sft state: rng: %w", err)
	}
	if st.Pos < 0 || st.Pos > len(st.Order) {
		return fmt.Errorf("sft state: position %d outside the epoch's %d batches", st.Pos, len(st.Order))
	}
	for _, b := range st.Order {
		if len(b) != batch {
			return fmt.Errorf("sft state: a batch of %d examples, want %d", len(b), batch)
		}
		for _, i := range b {
			if i < 0 || i >= n {
				return fmt.Errorf("sft state: example %d outside [0, %d)", i, n)
			}
		}
	}
	return nil
}

// sftBatch is one step's input: ids and attn [B, T]; the N loss entries
// (pos into the flattened [B·T] states, predicting tgt, with weight w, pm
// = 1 for a policy token), zero-weighted past the real ones.
type sftBatch struct {
	b, t, n             int
	ids, attn, pos, tgt []int32
	w, pm               []float32
	tokens, policy, env int // real tokens, policy tokens, environment tokens in the loss
}

// assembleSFT builds the batch of rows: the policy tokens at weight 1 and,
// when envWeight λ > 0, every environment token at weight λ.
func assembleSFT(ex []*agent.Trajectory, rows []int, envWeight float64) sftBatch {
	longest, n, env := 0, 0, 0
	for _, i := range rows {
		longest = max(longest, len(ex[i].IDs))
		n += ex[i].PolicyTokens()
		env += len(ex[i].IDs) - 1 - ex[i].PolicyTokens()
	}
	if envWeight == 0 {
		env = 0
	}
	bs := sftBatch{b: len(rows), t: padLen(longest), policy: n, env: env}
	t := bs.t
	bs.n = padN(n)
	if env > 0 {
		bs.n = bs.b * t // every position can be in the loss: one graph per length
	}
	bs.ids, bs.attn = make([]int32, bs.b*t), make([]int32, bs.b*t)
	bs.pos, bs.tgt = make([]int32, bs.n), make([]int32, bs.n)
	bs.w, bs.pm = make([]float32, bs.n), make([]float32, bs.n)
	c := 0
	for r, i := range rows {
		e := ex[i]
		for j, id := range e.IDs {
			bs.ids[r*t+j] = int32(id)
			bs.attn[r*t+j] = 1
		}
		for at := 1; at < len(e.IDs); at++ { // the target's position; it is predicted from at−1
			policy := e.Mask[at] == 1
			if !policy && env == 0 {
				continue
			}
			bs.pos[c], bs.tgt[c], bs.w[c] = int32(r*t+at-1), int32(e.IDs[at]), float32(envWeight)
			if policy {
				bs.w[c], bs.pm[c] = 1, 1
			}
			c++
		}
		bs.tokens += len(e.IDs)
	}
	return bs
}

// Step takes one optimiser step at learning rate lr on the next batch and
// returns its cross-entropy (before the update) and its token counts.
func (s *SFT) Step(ex []*agent.Trajectory, lr float64) (loss float64, tokens, policy int, err error) {
	if len(ex) < s.batch {
		return 0, 0, 0, fmt.Errorf("sft: %d examples for a batch of %d", len(ex), s.batch)
	}
	if s.pos >= len(s.order) {
		s.epoch(ex)
	}
	bs := assembleSFT(ex, s.order[s.pos], s.envWeight)
	s.pos++
	exec, err := s.exec(lr)
	if err != nil {
		return 0, 0, 0, err
	}
	out, err := exec.Exec(tensors.FromFlatDataAndDimensions(bs.ids, bs.b, bs.t), tensors.FromFlatDataAndDimensions(bs.attn, bs.b, bs.t),
		tensors.FromFlatDataAndDimensions(bs.pos, bs.n), tensors.FromFlatDataAndDimensions(bs.tgt, bs.n),
		tensors.FromFlatDataAndDimensions(bs.w, bs.n), tensors.FromFlatDataAndDimensions(bs.pm, bs.n))
	if err != nil {
		return 0, 0, 0, err
	}
	loss = float64(tensors.ToScalar[float32](out[0]))
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, bs.tokens, bs.policy, fmt.Errorf("sft: cross-entropy %v: %w", loss, ErrNonFinite)
	}
	return loss, bs.tokens, bs.policy, nil
}

// Clear deletes the optimiser's state, so that a GRPO learner built on the
// policy afterwards starts its own.
func (s *SFT) Clear() error {
	opt, err := NewAdamW(s.cfg)
	if err != nil {
		return err
	}
	return errors.Join(opt.Clear(s.m.Context()))
}
