package qwen

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// GenerateOptions control one Session.Generate call.
type GenerateOptions struct {
	// MaxNewTokens bounds the tokens generated per row in this call.
	MaxNewTokens int
	// Sampling: temperature 0 is greedy decoding (argmax); otherwise
	// logits/Temperature are filtered by TopK (0 = off) then TopP (nucleus,
	// 0 or 1 = off) and sampled with the session's seeded generator.
	Temperature float64
	TopK        int
	TopP        float64
	// EOS lists the token ids that end a row; nil means the model config's
	// eos_token_id list. The EOS token is included in the output.
	EOS []int
	// Stop lists strings (e.g. "</search>", "</answer>") that end a row as
	// soon as the decoded text of its new tokens contains one. Decode must
	// be set when Stop is not empty. The token completing the string is
	// included in the output.
	Stop   []string
	Decode func(ids []int) string
	// OnToken, when set, is called after each sampled token, in row order
	// (for streaming).
	OnToken func(row, id int)
}

// FinishReason says why a row stopped.
type FinishReason string

// Finish reasons.
const (
	FinishEOS    FinishReason = "eos"
	FinishStop   FinishReason = "stop"
	FinishLength FinishReason = "length"
	FinishIdle   FinishReason = "" // the row was not active in this call
)

// Result is one row's output of a Generate call.
type Result struct {
	// IDs are the tokens generated in this call.
	IDs []int
	// LogProbs[i] = log p(IDs[i] | everything before it) under the model
	// (temperature 1, no top-k/top-p filtering): the policy log-probability
	// GRPO needs, equal to TokenLogProbs of the same sequence.
	LogProbs []float32
	Finish   FinishReason
	// StopString is the stop string found when Finish is FinishStop.
	StopString string
}

// Session is a batch of sequences sharing one KV cache: Append feeds tokens
// (prefill), Generate samples new ones, and the two alternate freely, so an
// agent can append retrieved text to some rows and continue generating
// without recomputing the prefix. Rows advance independently: each has its
// own position counter and valid slots.
//
// A Session is not safe for concurrent use.
type Session struct {
	m        *Model
	batch    int
	slots    int // S, the cache capacity
	next     int // first free slot
	keyValid []bool
	pos      []int32   // next position id, per row
	pending  [][]int32 // tokens of the sequence not yet in the cache, per row
	logits   [][]float32
	caches   []*tensors.Tensor // the graph step's KV caches
	host     *hostState        // the host step's (hoststep.go), nil on the graph path
	rng      *rand.Rand
	// MaxChunk bounds the tokens per prefill call; feed lowers it further
	// so that one call's attention scores stay under 1 GiB.
	MaxChunk int
}

// NewSession starts a batch of size batch with room for capacity tokens
// per row (it grows by doubling when needed, which recompiles the graphs
// once per size). seed drives sampling. On the gocpu backend a model that
// computes in float32 runs its steps on the host (hoststep.go) unless
// $CAS_QWEN_STEP is "graph" (StepEnv).
func (m *Model) NewSession(batch, capacity int, seed uint64) (*Session, error) {
	return m.newSession(batch, capacity, seed, m.useHostStep())
}

// newSession is NewSession with the step path chosen by host.
func (m *Model) newSession(batch, capacity int, seed uint64, host bool) (*Session, error) {
	if batch <= 0 {
		return nil, fmt.Errorf("session: batch %d must be positive", batch)
	}
	capacity = roundUp(max(capacity, 1), 64)
	s := &Session{
		m: m, batch: batch, slots: capacity,
		keyValid: make([]bool, batch*capacity),
		pos:      make([]int32, batch),
		pending:  make([][]int32, batch),
		logits:   make([][]float32, batch),
		rng:      rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)),
		MaxChunk: 256,
	}
	c, dt := m.Config, m.ComputeDType()
	if host {
		s.host = newHostState(c, batch, capacity, max(m.hostWorkers(), 1))
		// A session dropped without Close still stops its helper threads.
		runtime.AddCleanup(s, func(h *hostState) { h.team.stop() }, s.host)
		return s, nil
	}
	for range c.NumHiddenLayers {
		s.caches = append(s.caches,
			tensors.FromShape(shapes.Make(dt, batch, c.NumKeyValueHeads, capacity, c.HeadDim)),
			tensors.FromShape(shapes.Make(dt, batch, c.NumKeyValueHeads, c.HeadDim, capacity)))
	}
	return s, nil
}

// Batch returns the number of rows.
func (s *Session) Batch() int { return s.batch }

// Len returns the number of tokens of row b (in the cache or pending).
func (s *Session) Len(b int) int { return int(s.pos[b]) + len(s.pending[b]) }

// NextLogits returns the logits of the next-token distribution of row b
// (nil before any token was fed). Pending tokens are not yet accounted for.
func (s *Session) NextLogits(b int) []float32 { return s.logits[b] }

// Close releases the cache buffers.
func (s *Session) Close() {
	if s.host != nil {
		s.host.close()
	}
	for _, t := range s.caches {
		t.FinalizeAll()
	}
	s.caches = nil
}

// Keep shrinks the batch to the listed rows, in that order (row i of the
// new batch is old row rows[i]), so that finished rows stop costing compute;
// their caches, positions and pending tokens move along. Each new batch size
// compiles its own step graph, so shrinking to power-of-two sizes bounds the
// compilations.
func (s *Session) Keep(rows []int) error {
	if len(rows) == 0 {
		return errors.New("keep: no rows")
	}
	idx := make([]int32, len(rows))
	seen := make(map[int]bool, len(rows))
	for i, r := range rows {
		if r < 0 || r >= s.batch || seen[r] {
			return fmt.Errorf("keep: row %d invalid or repeated (batch %d)", r, s.batch)
		}
		seen[r] = true
		idx[i] = int32(r)
	}
	if s.host != nil {
		if s.host.keys == nil {
			return errors.New("keep: session is closed")
		}
		s.host.keepRows(s.m.Config, rows, s.slots)
	} else if err := s.keepGraph(idx); err != nil {
		return err
	}
	valid := make([]bool, len(rows)*s.slots)
	pos := make([]int32, len(rows))
	pending := make([][]int32, len(rows))
	logits := make([][]float32, len(rows))
	for i, r := range rows {
		copy(valid[i*s.slots:(i+1)*s.slots], s.keyValid[r*s.slots:(r+1)*s.slots])
		pos[i], pending[i], logits[i] = s.pos[r], s.pending[r], s.logits[r]
	}
	s.batch, s.keyValid, s.pos, s.pending, s.logits = len(rows), valid, pos, pending, logits
	return nil
}

// keepGraph selects the graph caches' rows idx.
func (s *Session) keepGraph(idx []int32) error {
	args := []any{tensors.FromFlatDataAndDimensions(idx, len(idx))}
	for _, t := range s.caches {
		args = append(args, t)
	}
	out, err := s.m.selectExec.Exec(args...)
	if err != nil {
		return fmt.Errorf("keep: %w", err)
	}
	for _, t := range s.caches {
		t.FinalizeAll()
	}
	s.caches = out
	return nil
}

// Append feeds tokens[b] to row b (nil or empty: nothing new), after any
// token still pending from Generate, prefilling only these new tokens; the
// cache of earlier tokens is kept.
func (s *Session) Append(tokens [][]int) error {
	if len(tokens) != s.batch {
		return fmt.Errorf("append: %d rows for a batch of %d", len(tokens), s.batch)
	}
	chunks := make([][]int32, s.batch)
	longest := 0
	for b := range s.batch {
		chunks[b] = append(chunks[b], s.pending[b]...)
		for _, id := range tokens[b] {
			if id < 0 || id >= s.m.Config.VocabSize {
				return fmt.Errorf("append: row %d: token id %d outside the vocabulary [0, %d)", b, id, s.m.Config.VocabSize)
			}
			chunks[b] = append(chunks[b], int32(id))
		}
		longest = max(longest, len(chunks[b]))
	}
	if err := s.feed(chunks, longest); err != nil {
		return err
	}
	for b := range s.pending {
		s.pending[b] = nil
	}
	return nil
}

// feed runs the rows' chunks through the model, right-aligned on a common
// length (shorter rows leave their first slots empty), in pieces of at most
// MaxChunk tokens, and keeps the logits after the last token of each row
// that had one.
func (s *Session) feed(chunks [][]int32, longest int) error {
	if longest == 0 {
		return nil
	}
	if err := s.reserve(longest); err != nil {
		return err
	}
	// Bound the attention scores [B, H, chunk, S] of one call to 2^28 floats
	// (1 GiB), rounding the chunk down to a power of two.
	maxChunk := max(s.MaxChunk, 1)
	if limit := (1 << 28) / (s.batch * s.m.Config.NumAttentionHeads * s.slots); limit < maxChunk {
		maxChunk = 1
		for maxChunk*2 <= limit {
			maxChunk *= 2
		}
	}
	for off := 0; off < longest; off += maxChunk {
		n := min(maxChunk, longest-off)
		width := n // the host step computes the active tokens only
		if s.host == nil {
			width = bucket(n)
		}
		ids := make([]int32, s.batch*width)
		pos := make([]int32, s.batch*width)
		last := make([]int32, s.batch)
		for b, ch := range chunks {
			pad := longest - len(ch) // right-aligned: chunk index i holds ch[i-pad]
			for i := range n {
				j := off + i - pad
				if j < 0 {
					continue
				}
				ids[b*width+i] = ch[j]
				pos[b*width+i] = s.pos[b]
				s.pos[b]++
				s.keyValid[b*s.slots+s.next+i] = true
			}
			last[b] = int32(n - 1)
		}
		logits, err := s.step(ids, pos, last, width)
		if err != nil {
			return err
		}
		s.next += n
		if off+n == longest {
			for b, ch := range chunks {
				if len(ch) > 0 {
					s.logits[b] = logits[b]
				}
			}
		}
	}
	return nil
}

// step runs one compiled step over ids/pos [B, width] at slot s.next and
// returns the logits at index last[b] of each row.
func (s *Session) step(ids, pos, last []int32, width int) ([][]float32, error) {
	if s.host != nil {
		if s.host.keys == nil {
			return nil, errors.New("generate: session is closed")
		}
		return s.hostStep(ids, pos, last, width)
	}
	if s.caches == nil {
		return nil, errors.New("generate: session is closed")
	}
	args := make([]any, 0, stepCaches+len(s.caches))
	args = append(args,
		tensors.FromFlatDataAndDimensions(ids, s.batch, width),
		tensors.FromFlatDataAndDimensions(pos, s.batch, width),
		tensors.FromFlatDataAndDimensions(s.keyValid, s.batch, s.slots),
		tensors.FromScalar(int32(s.next)),
		tensors.FromFlatDataAndDimensions(last, s.batch))
	for _, t := range s.caches {
		d, err := graph.DonateTensorBuffer(t, s.m.backend, 0)
		if err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		args = append(args, d)
		t.FinalizeAll()
	}
	s.caches = nil // donated: the outputs replace them
	out, err := s.m.stepExec.Exec(args...)
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	s.caches = out[1:]
	flat, err := tensors.CopyFlatData[float32](out[0])
	out[0].FinalizeAll()
	if err != nil {
		return nil, err
	}
	v := s.m.Config.VocabSize
	rows := make([][]float32, s.batch)
	for b := range rows {
		rows[b] = flat[b*v : (b+1)*v : (b+1)*v]
	}
	return rows, nil
}

// reserve grows the cache so that n more slots fit.
func (s *Session) reserve(n int) error {
	need := s.next + n
	if need <= s.slots {
		return nil
	}
	newSlots := s.slots
	for newSlots < need {
		newSlots *= 2
	}
	if s.host != nil {
		s.host.growSlots(s.m.Config, s.batch, s.slots, newSlots)
	} else if err := s.growGraph(newSlots); err != nil {
		return err
	}
	valid := make([]bool, s.batch*newSlots)
	for b := range s.batch {
		copy(valid[b*newSlots:], s.keyValid[b*s.slots:(b+1)*s.slots])
	}
	s.keyValid, s.slots = valid, newSlots
	return nil
}

// growGraph copies the graph caches into buffers of newSlots slots.
func (s *Session) growGraph(newSlots int) error {
	exec, err := graph.NewExec(s.m.backend, growGraph(newSlots))
	if err != nil {
		return err
	}
	defer exec.Finalize()
	args := make([]any, len(s.caches))
	for i, t := range s.caches {
		args[i] = t
	}
	out, err := exec.Exec(args...)
	if err != nil {
		return fmt.Errorf("grow KV cache to %d slots: %w", newSlots, err)
	}
	for _, t := range s.caches {
		t.FinalizeAll()
	}
	s.caches = out
	return nil
}

// Generate samples up to opts.MaxNewTokens tokens for every row with
// active[b] set (nil: all rows), stopping a row at an EOS id, a stop string
// or the token limit. Each sampled token is fed back one decode step at a
// time while any row still runs; the last token of a stopped row stays
// pending, so a later Append or Generate continues right after it.
func (s *Session) Generate(opts GenerateOptions, active []bool) ([]Result, error) {
	if active != nil && len(active) != s.batch {
		return nil, fmt.Errorf("generate: %d active flags for a batch of %d", len(active), s.batch)
	}
	if len(opts.Stop) > 0 && opts.Decode == nil {
		return nil, errors.New("generate: stop strings need a Decode function")
	}
	if opts.MaxNewTokens <= 0 {
		return nil, fmt.Errorf("generate: max new tokens %d must be positive", opts.MaxNewTokens)
	}
	eos := opts.EOS
	if eos == nil {
		eos = s.m.Config.EOSTokenID
	}
	maxStop := 0
	for _, st := range opts.Stop {
		maxStop = max(maxStop, len(st))
	}
	// A row must have its next-token logits: feed pending tokens first.
	for b := range s.batch {
		if (active == nil || active[b]) && (len(s.pending[b]) > 0 || s.logits[b] == nil) {
			if err := s.Append(make([][]int, s.batch)); err != nil {
				return nil, err
			}
			break
		}
	}
	results := make([]Result, s.batch)
	running := make([]bool, s.batch)
	for b := range s.batch {
		if active == nil || active[b] {
			if s.logits[b] == nil {
				return nil, fmt.Errorf("generate: row %d has no tokens", b)
			}
			running[b] = true
		}
	}
	sampler := newSampler(opts)
	for {
		anyRunning := false
		for b := range s.batch {
			if !running[b] {
				continue
			}
			id, lp := sampler.sample(s.logits[b], s.rng)
			r := &results[b]
			r.IDs = append(r.IDs, id)
			r.LogProbs = append(r.LogProbs, lp)
			s.pending[b] = append(s.pending[b], int32(id))
			if opts.OnToken != nil {
				opts.OnToken(b, id)
			}
			switch {
			case containsInt(eos, id):
				r.Finish = FinishEOS
			case maxStop > 0 && s.stopFound(r, opts, maxStop):
				r.Finish = FinishStop
			case len(r.IDs) >= opts.MaxNewTokens:
				r.Finish = FinishLength
			default:
				anyRunning = true
				continue
			}
			running[b] = false
		}
		if !anyRunning {
			return results, nil
		}
		if err := s.decode(running); err != nil {
			return nil, err
		}
	}
}

// decode feeds the pending token of each running row (one per row) in a
// single T = 1 step.
func (s *Session) decode(running []bool) error {
	if err := s.reserve(1); err != nil {
		return err
	}
	ids := make([]int32, s.batch)
	pos := make([]int32, s.batch)
	last := make([]int32, s.batch)
	for b := range s.batch {
		if !running[b] {
			continue
		}
		ids[b] = s.pending[b][0]
		pos[b] = s.pos[b]
		s.pos[b]++
		s.keyValid[b*s.slots+s.next] = true
	}
	logits, err := s.step(ids, pos, last, 1)
	if err != nil {
		return err
	}
	s.next++
	for b := range s.batch {
		if running[b] {
			s.pending[b] = s.pending[b][1:]
			s.logits[b] = logits[b]
		}
	}
	return nil
}

// stopFound reports whether the decoded tail of the row's new tokens
// contains a stop string. Only the last maxStop+8 tokens are decoded: every
// stop string that just appeared lies within them.
func (s *Session) stopFound(r *Result, opts GenerateOptions, maxStop int) bool {
	tail := r.IDs[max(0, len(r.IDs)-maxStop-8):]
	text := opts.Decode(tail)
	for _, st := range opts.Stop {
		if st != "" && strings.Contains(text, st) {
			r.StopString = st
			return true
		}
	}
	return false
}

// Generate is a convenience for one batch of prompts: a session sized for
// prompts plus opts.MaxNewTokens, the prompts appended, one Generate call.
func (m *Model) Generate(prompts [][]int, opts GenerateOptions, seed uint64) ([]Result, error) {
	longest := 0
	for _, p := range prompts {
		longest = max(longest, len(p))
	}
	s, err := m.NewSession(len(prompts), longest+opts.MaxNewTokens, seed)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := s.Append(prompts); err != nil {
		return nil, err
	}
	return s.Generate(opts, nil)
}

// bucket rounds a chunk length up to a power of two, so that prefill
// compiles O(log MaxChunk) graphs.
func bucket(n int) int {
	w := 1
	for w < n {
		w *= 2
	}
	return w
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }
