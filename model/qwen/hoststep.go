package qwen

// The host step: Session.step on the gocpu backend, written out like
// llama2.c's forward instead of run as a compiled graph. A batch-1 decode
// step of the graph is about 345 small ops through the executor, each with
// its own dispatch and thread synchronisation; this is the same arithmetic
// in four parallel phases per layer over the weights in place (host.go),
// with the KV caches in host memory in the graph's layouts:
//
//	keys   [B, k, S, h]    values [B, k, h, S]
//
// Letters as in forward.go: b batch row, t chunk index, s slot, d hidden,
// k KV head, r query head within its group, h head_dim, i intermediate, v
// vocabulary; M is the number of active tokens of a step, the (b, t) whose
// slot start+t holds a real token of row b (keyValid). Only active tokens
// are computed: a padded chunk position or a row that is not running has
// no effect on any logits the session keeps (its slot stays invalid, so no
// later query sees it), and its logits are not returned.
//
// Matrix products: one active token (batch-1 decode) runs tensor.GemvT /
// GemvTBF16 with the rows of a phase's projections split into chunks that
// the team's workers take in turn; several tokens (prefill chunks, batched
// decoding) run the packed GEMM (tensor.MatMulT). Attention runs per
// (token, KV head): the scores q·kᵀ/√h of the group's query heads over the
// slots ≤ start+t (tensor.DotBlock), maskedScore where keyValid is false
// (the graph's additive bias), softmax, and a GEMV over the values per
// head — the graph's attend, restricted to the slots the causal mask
// allows (the others' probabilities are exactly zero in float32).

import (
	"math"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cas-engine/cas/tensor"
)

// hostState is a Session's host-step state.
type hostState struct {
	keys, values [][]float32 // per layer: [B, k, S, h] and [B, k, h, S]
	team         *team
	inv          []float32 // RoPE inverse frequencies θ^(−2j/h), j < h/2
	// Scratch, grown as needed: the active tokens, and per token the
	// residual stream and the activations of one layer.
	tok                     []hostToken
	x, xn, q, k, v, qr, kr  []float32
	att, gate, up, cos, sin []float32
	scores                  [][]float32 // per worker: [r, S]
	// The weights of each decode phase in the order they are read, to
	// read ahead during the phase before (team.runAhead), for the
	// snapshot aheadOf: per layer QKV, O, gate/up, down, then lm_head.
	ahead   []*teamAhead
	aheadOf *hostSnapshot
	// Until calmUntil, decode steps run calm: their helpers linger briefly
	// and read nothing ahead (see hostStep); shared is whether the last
	// decode step that was not calm found the cores shared.
	calmUntil time.Time
	shared    bool
}

// hostToken is an active token: chunk index t of row b.
type hostToken struct{ b, t int }

// newHostState allocates the caches of batch rows of slots slots, with
// workers threads.
func newHostState(c *Config, batch, slots, workers int) *hostState {
	h := &hostState{team: newTeam(workers)}
	for range c.NumHiddenLayers {
		n := batch * c.NumKeyValueHeads * slots * c.HeadDim
		h.keys, h.values = append(h.keys, make([]float32, n)), append(h.values, make([]float32, n))
	}
	h.inv = make([]float32, c.HeadDim/2)
	for j := range h.inv {
		h.inv[j] = float32(1 / math.Pow(c.RopeTheta, float64(2*j)/float64(c.HeadDim)))
	}
	return h
}

// close stops the team and drops the caches.
func (h *hostState) close() {
	h.team.stop()
	h.keys, h.values = nil, nil
}

// growSlots copies the caches into buffers of newSlots slots per row (the
// new slots zero), as growGraph does.
func (h *hostState) growSlots(c *Config, batch, slots, newSlots int) {
	kv, hd := c.NumKeyValueHeads, c.HeadDim
	for l := range h.keys {
		keys := make([]float32, batch*kv*newSlots*hd)
		for bj := range batch * kv { // [S, h] blocks
			copy(keys[bj*newSlots*hd:], h.keys[l][bj*slots*hd:(bj+1)*slots*hd])
		}
		values := make([]float32, batch*kv*hd*newSlots)
		for row := range batch * kv * hd { // rows of S slots
			copy(values[row*newSlots:], h.values[l][row*slots:(row+1)*slots])
		}
		h.keys[l], h.values[l] = keys, values
	}
}

// keepRows keeps the cache rows listed in rows, in that order.
func (h *hostState) keepRows(c *Config, rows []int, slots int) {
	n := c.NumKeyValueHeads * slots * c.HeadDim // one row's block, both layouts
	for l := range h.keys {
		keys, values := make([]float32, len(rows)*n), make([]float32, len(rows)*n)
		for i, r := range rows {
			copy(keys[i*n:(i+1)*n], h.keys[l][r*n:(r+1)*n])
			copy(values[i*n:(i+1)*n], h.values[l][r*n:(r+1)*n])
		}
		h.keys[l], h.values[l] = keys, values
	}
}

// hostProj is one projection of a phase: out [M, n] = x · Wᵀ (+ bias).
type hostProj struct {
	out  []float32
	w    *hostTensor // [n, in]
	bias *hostTensor // [n] or nil
	n    int
}

// hostStep is Session.step on the host: the same inputs and logits (for
// the rows whose token at last[b] is active; nil for the others).
func (s *Session) hostStep(ids, pos, last []int32, width int) ([][]float32, error) {
	snap, err := s.m.hostWeights()
	if err != nil {
		return nil, err
	}
	w, c, h := &snap.w, s.m.Config, s.host
	d, hd, nh, kv, ni, nv := c.HiddenSize, c.HeadDim, c.NumAttentionHeads, c.NumKeyValueHeads, c.IntermediateSize, c.VocabSize
	eps := float32(c.RMSNormEps)
	slots, start := s.slots, s.next

	tok := h.tok[:0]
	for b := range s.batch {
		for t := range width {
			if slot := start + t; slot < slots && s.keyValid[b*slots+slot] {
				tok = append(tok, hostToken{b, t})
			}
		}
	}
	h.tok = tok
	rows := make([][]float32, s.batch)
	m := len(tok)
	if m == 0 {
		return rows, nil
	}

	x := grow(&h.x, m*d)         // [M, D] the residual stream
	xn := grow(&h.xn, m*d)       // [M, D] normed, then each block's output
	q := grow(&h.q, m*nh*hd)     // [M, H, h]
	k := grow(&h.k, m*kv*hd)     // [M, k, h]
	v := grow(&h.v, m*kv*hd)     // [M, k, h]
	qr := grow(&h.qr, m*nh*hd)   // [M, H, h] rotated
	kr := grow(&h.kr, m*kv*hd)   // [M, k, h] rotated
	att := grow(&h.att, m*nh*hd) // [M, H·h]
	gate := grow(&h.gate, m*ni)  // [M, I]
	up := grow(&h.up, m*ni)      // [M, I]
	cos := grow(&h.cos, m*hd)    // [M, h]
	sin := grow(&h.sin, m*hd)    // [M, h]
	for i, tk := range tok {
		w.Embed.row(x[i*d:(i+1)*d], int(ids[tk.b*width+tk.t]))
		h.ropeTables(cos[i*hd:(i+1)*hd], sin[i*hd:(i+1)*hd], pos[tk.b*width+tk.t])
	}
	workers := h.team.workers()
	// A decode step's helpers poll for the next phase and read its weights
	// ahead, so that every worker's core is busy for the whole step, the
	// caller's included. Where other processes want the cores, polling
	// only takes time from the caller and from them, and a helper
	// descheduled mid-item holds the phase up; that shows as a caller
	// thread that gets much less CPU time than the step takes, or as
	// helpers that run a small share of the items. When two steps in a row
	// show it (one alone, 1–3% of the steps on the quiet VM, is mostly a
	// blip), decode steps run calm for the next hostCalm: the helpers sleep
	// between phases, from where the scheduler wakes them promptly.
	var ahead []*teamAhead // nil: no reading ahead
	h.team.setLinger(teamLinger)
	if m == 1 && workers > 1 {
		if t0 := time.Now(); !t0.Before(h.calmUntil) {
			ahead = h.aheadPhases(snap)
			h.team.setLinger(teamDecodeLinger)
			runtime.LockOSThread() // threadCPU's thread for the whole step
			c0 := threadCPU()
			items0, helped0 := h.team.share()
			defer func() {
				wall, cpu := time.Since(t0), threadCPU()-c0
				runtime.UnlockOSThread()
				items, helped := h.team.share()
				items, helped = items-items0, helped-helped0
				// helped/items < 0.8·(workers−1)/workers
				starved := items >= 64 && 5*helped*int64(workers) < 4*items*int64(workers-1)
				switch shared := starved || c0 > 0 && cpu < wall*9/10; {
				case shared && h.shared: // twice in a row: not a blip
					h.calmUntil, h.shared = time.Now().Add(hostCalm), false
				default:
					h.shared = shared
				}
			}()
		}
	}
	// next returns the weights of the phase after phase i of the step (the
	// last one's: the first of the next step's).
	next := func(i int) *teamAhead {
		if ahead == nil {
			return nil
		}
		return ahead[(i+1)%len(ahead)]
	}

	for l := range w.Layers {
		lw := &w.Layers[l]
		// x = x + o_proj(attention(rope(q(n₁(x))), rope(k(n₁(x))), v(n₁(x))))
		rmsNormRows(xn, x, lw.InputNorm.f32, d, eps)
		h.project(m, xn, d, next(4*l),
			hostProj{q, lw.Q, lw.QBias, nh * hd}, hostProj{k, lw.K, lw.KBias, kv * hd}, hostProj{v, lw.V, lw.VBias, kv * hd})
		if lw.QNorm != nil {
			rmsNormRows(q, q, lw.QNorm.f32, hd, eps) // per head
			rmsNormRows(k, k, lw.KNorm.f32, hd, eps)
		}
		tensor.RopeRows(qr, q, cos, sin, nh, hd, false, workers)
		tensor.RopeRows(kr, k, cos, sin, kv, hd, false, workers)
		keys, values := h.keys[l], h.values[l]
		for i, tk := range tok { // the chunk's keys and values into their slots
			slot := start + tk.t
			for j := range kv {
				src := (i*kv + j) * hd
				blk := tk.b*kv + j
				copy(keys[(blk*slots+slot)*hd:(blk*slots+slot+1)*hd], kr[src:src+hd])
				for e := range hd {
					values[(blk*hd+e)*slots+slot] = v[src+e]
				}
			}
		}
		h.attend(s, att, qr, keys, values, ahead != nil)
		h.project(m, att, nh*hd, next(4*l+1), hostProj{xn, lw.O, lw.OBias, d})
		addTo(x, xn)

		// x = x + down(silu(gate(n₂(x))) ⊙ up(n₂(x)))
		rmsNormRows(xn, x, lw.PostNorm.f32, d, eps)
		h.project(m, xn, d, next(4*l+2), hostProj{gate, lw.Gate, nil, ni}, hostProj{up, lw.Up, nil, ni})
		tensor.MulSilu(up, up, gate, workers)
		h.project(m, up, ni, next(4*l+3), hostProj{xn, lw.Down, nil, d})
		addTo(x, xn)
	}

	// logits = lm_head(norm(x)) at index last[b] of each row.
	var picked []int // indices into tok
	for i, tk := range tok {
		if int32(tk.t) == last[tk.b] {
			picked = append(picked, i)
		}
	}
	if len(picked) == 0 {
		return rows, nil
	}
	xl := grow(&h.xn, len(picked)*d) // [P, D]
	for p, i := range picked {
		rmsNormRows(xl[p*d:(p+1)*d], x[i*d:(i+1)*d], w.Norm.f32, d, eps)
	}
	logits := make([]float32, len(picked)*nv) // [P, V]
	h.project(len(picked), xl, d, next(4*len(w.Layers)), hostProj{logits, w.lmHead(), nil, nv})
	for p, i := range picked {
		rows[tok[i].b] = logits[p*nv : (p+1)*nv : (p+1)*nv]
	}
	return rows, nil
}

// ropeTables writes cos and sin [h] at position p, as ropeTables of
// forward.go: angle(p, j) = p·θ^(−2j/h) in float32, for both halves.
func (h *hostState) ropeTables(cos, sin []float32, p int32) {
	half := len(h.inv)
	for j, f := range h.inv {
		a := float64(float32(p) * f)
		cos[j], sin[j] = float32(math.Cos(a)), float32(math.Sin(a))
		cos[j+half], sin[j+half] = cos[j], sin[j]
	}
}

// threadCPU returns the CPU time of the calling thread, 0 where unknown.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// hostCalm is how long decode steps run calm once two in a row found the
// cores shared with other processes (see hostStep).
const hostCalm = 50 * time.Millisecond

// gemvChunkBytes is the weight bytes of one chunk of a GEMV phase, and
// gemvSerialBytes the phase size below which the caller runs it alone.
// A chunk's rows are read as 8 streams (tensor.GemvT), 16 KiB each at 128
// KiB: decoding the 25M model ran 4–9% faster than with 64 KiB chunks (2 KiB
// rows: 8 KiB streams; the down projection's 5.5 KiB rows: one row per
// stream), and 32 KiB chunks slower still; the worker that finishes first
// reads the next phase ahead, so a longer last chunk costs little.
const (
	gemvChunkBytes  = 128 << 10
	gemvSerialBytes = 96 << 10
)

// aheadPhases returns the weights of the decode phases of snap (see
// hostState.ahead), made once per snapshot.
func (h *hostState) aheadPhases(snap *hostSnapshot) []*teamAhead {
	if h.aheadOf == snap {
		return h.ahead
	}
	w := &snap.w
	var ahead []*teamAhead
	phase := func(ts ...*hostTensor) {
		a := &teamAhead{}
		for _, t := range ts {
			if t.bf16 != nil {
				a.spans = append(a.spans, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(t.bf16))), 2*len(t.bf16)))
			} else {
				a.spans = append(a.spans, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(t.f32))), 4*len(t.f32)))
			}
		}
		ahead = append(ahead, a)
	}
	for l := range w.Layers {
		lw := &w.Layers[l]
		phase(lw.Q, lw.K, lw.V)
		phase(lw.O)
		phase(lw.Gate, lw.Up)
		phase(lw.Down)
	}
	phase(w.lmHead())
	h.ahead, h.aheadOf = ahead, snap
	return ahead
}

// project computes each projection's out [m, n] = x [m, in] · Wᵀ (+ bias).
// For m = 1 the rows of all the projections are cut into chunks that the
// team's workers take in turn, one phase for the lot, after which the
// helpers read the weights of after ahead (nil: none); for m > 1 each is
// one packed GEMM on the team's worker count.
func (h *hostState) project(m int, x []float32, in int, after *teamAhead, projs ...hostProj) {
	if m == 1 {
		h.gemvPhase(x, in, after, projs)
	} else {
		for _, p := range projs {
			p.w.matMulT(p.out[:m*p.n], x[:m*in], m, p.n, in, h.team.workers())
		}
	}
	for _, p := range projs {
		if p.bias == nil {
			continue
		}
		for r := range m {
			addTo(p.out[r*p.n:(r+1)*p.n], p.bias.f32)
		}
	}
}

// gemvPhase runs the single-token projections (see project).
func (h *hostState) gemvPhase(x []float32, in int, after *teamAhead, projs []hostProj) {
	size := 4
	if projs[0].w.bf16 != nil {
		size = 2
	}
	chunk := max(8, gemvChunkBytes/(in*size)&^7) // rows
	total, chunks := 0, 0
	for _, p := range projs {
		total += p.n
		chunks += (p.n + chunk - 1) / chunk
	}
	run := func(lo, hi int) { // chunks [lo, hi)
		for c := lo; c < hi; c++ {
			cc := c
			for _, p := range projs {
				pc := (p.n + chunk - 1) / chunk
				if cc < pc {
					p.w.gemvRows(p.out, x, cc*chunk, min(p.n, (cc+1)*chunk), in)
					break
				}
				cc -= pc
			}
		}
	}
	if total*in*size < gemvSerialBytes || h.team.workers() == 1 {
		run(0, chunks)
		return
	}
	h.team.runAhead(chunks, func(_, c int) { run(c, c+1) }, after)
}

// attend writes att [M, H·h], the attention output of every active token
// over the cache slots it may see (the chunk's keys and values are in the
// cache already), split over the team by (token, KV head) when there is
// enough work, or when polling says the helpers are polling for the next
// phase anyway (a decode step that is not calm: there, one token's KV
// heads in parallel took 13–15 µs per layer of the 25M model at ≤ 97
// slots, against 18 µs on the caller alone).
func (h *hostState) attend(s *Session, att, qr, keys, values []float32, polling bool) {
	c := s.m.Config
	hd, nh, kv, slots, start := c.HeadDim, c.NumAttentionHeads, c.NumKeyValueHeads, s.slots, s.next
	r := nh / kv
	scale := float32(1 / math.Sqrt(float64(hd)))
	workers := h.team.workers()
	for len(h.scores) < workers {
		h.scores = append(h.scores, nil)
	}
	item := func(wk, it int) { // token it/kv, KV head it%kv
		i, j := it/kv, it%kv
		tk := h.tok[i]
		n := start + tk.t + 1 // slots ≤ start+t
		valid := s.keyValid[tk.b*slots : tk.b*slots+n]
		blk := tk.b*kv + j
		kb := keys[blk*slots*hd:]                        // [S, h]
		vb := values[blk*hd*slots:]                      // [h, S]
		sc := grow(&h.scores[wk], r*slots)[:r*n]         // [r, n]
		o := (i*nh + j*r) * hd                           // the group's r query heads, contiguous
		tensor.DotBlock(sc, qr[o:o+r*hd], kb[:n*hd], hd) // q·k_s
		for rr := range r {
			row := sc[rr*n : (rr+1)*n]
			for si, ok := range valid {
				if ok {
					row[si] *= scale
				} else {
					row[si] = maskedScore
				}
			}
		}
		tensor.SoftmaxRows(sc, sc, n, 1)
		for rr := range r {
			oh := o + rr*hd
			tensor.GemvT(att[oh:oh+hd], sc[rr*n:(rr+1)*n], vb, hd, n, slots, false, 1) // Σ_s p_s v_s
		}
	}
	items := len(h.tok) * kv
	work := 0
	for _, tk := range h.tok {
		work += (start + tk.t + 1) * hd * nh
	}
	if work < 1<<16 && !polling || workers == 1 {
		for it := range items {
			item(0, it)
		}
		return
	}
	h.team.run(items, item)
}

// rmsNormRows writes dst = x / √(mean(x²) + ε) ⊙ w for each row of n
// values (dst may be x), as rmsNorm of forward.go in float32.
func rmsNormRows(dst, x, w []float32, n int, eps float32) {
	for r := 0; r+n <= len(x) && r+n <= len(dst); r += n {
		row := x[r : r+n]
		den := float32(math.Sqrt(float64(tensor.Dot(row, row)/float32(n) + eps)))
		out := dst[r : r+n]
		for i, xi := range row {
			out[i] = xi / den * w[i]
		}
	}
}

// addTo adds y to the first len(y) elements of x.
func addTo(x, y []float32) {
	x = x[:len(y)]
	for i, v := range y {
		x[i] += v
	}
}

// grow returns (*buf)[:n], reallocating when the capacity is short.
func grow(buf *[]float32, n int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	return (*buf)[:n]
}
