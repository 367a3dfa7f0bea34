package gocpu

import (
	"slices"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Loop fusion of float32 elementwise chains.
//
// GoMLX's optimizers write each variable's update as a chain of ~16
// elementwise ops (AdamW: m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², …), each
// a full pass over the variable: with tensors of 4–100 MB every op is
// bound by memory bandwidth. At Compile, a group of custom float32
// elementwise nodes (Add, Sub, Mul, Div, Neg, Sqrt, Rsqrt, Exp, Logistic)
// of one output shape, whose operands are tensors of that shape,
// 1-element tensors, or tensors broadcast along the leading or trailing
// axes (RMSNorm's [B, T, 1] scale and [1, 1, D] weight: one value per row
// or one vector repeated over the rows), runs as one op (fusedEW): the elements are split into
// tiles of ewTile, spread over the workers, and each tile runs the group's
// ops in graph order on small per-worker tile buffers; only the values
// read outside the group (or returned) are written to full-size buffers.
//
// Every element gets exactly the float32 operations it got unfused, in
// the same order and through the same kernels (binaryKernels' vv, vs and
// sv forms, chosen as bcastPlan chooses them (a broadcast operand row by
// row), and the unary kernels, all
// of which compute each element independently of its position in the
// slice), so results are bit-identical.
//
// A group is grown in graph order: a node joins the groups of its
// operands' producers (merging them) when no node outside the merged
// group placed before it reads a member. The fused node then takes the
// place of its last member, and every other node keeps its place, so the
// order stays topological (a node reading a member comes after the fused
// node, and every operand of a member comes before it).

// ewTile is the number of elements one tile of a fused group covers.
const ewTile = 4096

// ewSpec marks a custom node as a float32 elementwise op that a fused group
// may run on tiles: unary computes dst[i] = f(x[i]) (dst may be x), binary
// is the kernel of a binary op whose operands pass ewOperands.
type ewSpec struct {
	unary  func(dst, x []float32)
	binary *binaryKernel
}

// How an operand of a fused group's op covers the output's elements.
const (
	bcFull   = iota // the output's shape: element i is x[i]
	bcScalar        // 1 element: x[0] everywhere
	bcRows          // [d₀ … d_{k−1}, 1 … 1]: x[i / run] (one value per row of run elements)
	bcCols          // [1 … 1, d_k … d_{n−1}]: x[i mod run] (one vector repeated over the rows)
)

// ewBroadcast classifies a float32 operand of shape s of an op with output
// shape out (equal ranks, or s of one element): its mode and, for bcRows
// and bcCols, run, the elements of the output's trailing axes that s does
// not (bcRows) or does (bcCols) span. ok is false for any other broadcast.
func ewBroadcast(s, out shapes.Shape) (mode, run int, ok bool) {
	switch {
	case s.DType != dtypes.Float32:
		return 0, 0, false
	case s.Equal(out):
		return bcFull, 0, true
	case s.Size() == 1:
		return bcScalar, 0, true
	case s.Rank() != out.Rank():
		return 0, 0, false
	}
	n := out.Rank()
	first := 0 // first axis where s differs from out
	for first < n && s.Dimensions[first] == out.Dimensions[first] {
		first++
	}
	last := n // one past the last axis where s differs from out
	for last > 0 && s.Dimensions[last-1] == out.Dimensions[last-1] {
		last--
	}
	ones := func(lo, hi int) bool {
		for a := lo; a < hi; a++ {
			if s.Dimensions[a] != 1 {
				return false
			}
		}
		return true
	}
	size := func(lo int) int {
		r := 1
		for _, d := range out.Dimensions[lo:] {
			r *= d
		}
		return r
	}
	switch {
	case ones(first, n):
		return bcRows, size(first), true
	case ones(0, last):
		return bcCols, size(last), true
	}
	return 0, 0, false
}

// ewOperands reports whether a binary op with operands of shapes a and b
// and output shape out may join a fused group: each operand of the
// output's shape, of one element, or broadcast along leading or trailing
// axes (ewBroadcast), and at least one of the output's shape (a
// one-element output aside).
func ewOperands(a, b, out shapes.Shape) bool {
	ma, _, okA := ewBroadcast(a, out)
	mb, _, okB := ewBroadcast(b, out)
	return okA && okB && (ma == bcFull || mb == bcFull || out.Size() == 1)
}

// multiFn executes a fused op with several results. consumed[j] reports
// that in[j] (then owned[j]) now holds one of the results (the executor
// does not free it).
type multiFn func(be *Backend, in []backends.Buffer, owned []bool) (out []backends.Buffer, consumed []bool, err error)

// fuseElementwise replaces the maximal fusable groups (two members or
// more) among b's live nodes by fused nodes, drops the dead nodes and
// renumbers the rest; it reports whether b.nodes changed.
func (b *Builder) fuseElementwise(live []bool, outs []*value) bool {
	if b.backend.plain || b.backend.noFuse {
		return false
	}
	var nodes []*node
	for _, n := range b.nodes {
		if live[n.seq] {
			nodes = append(nodes, n)
		}
	}
	pos := make(map[*node]int, len(nodes))
	for i, n := range nodes {
		pos[n] = i
	}
	consumers := make([][]int, len(nodes))
	for i, n := range nodes {
		for _, in := range n.inputs {
			p := pos[in.node]
			if c := consumers[p]; len(c) == 0 || c[len(c)-1] != i {
				consumers[p] = append(consumers[p], i)
			}
		}
	}
	isOut := make([]bool, len(nodes))
	for _, v := range outs {
		isOut[pos[v.node]] = true
	}
	fusable := func(n *node) bool { return n.kind == kindCustom && n.ew != nil && len(n.outs) == 1 }

	group := make([]int, len(nodes))
	var groups [][]int // member positions, ascending
	// canJoin: no node outside gs ∪ {i} placed before i reads a member.
	canJoin := func(gs []int, i int) bool {
		for _, g := range gs {
			for _, m := range groups[g] {
				for _, c := range consumers[m] {
					if c != i && c < i && !slices.Contains(gs, group[c]) {
						return false
					}
				}
			}
		}
		return true
	}
	fused := false
	for i, n := range nodes {
		group[i] = -1
		if !fusable(n) {
			continue
		}
		shape := n.outs[0].shape
		var cands []int
		for _, in := range n.inputs {
			p := pos[in.node]
			if g := group[p]; g >= 0 && in.shape.Equal(shape) && !slices.Contains(cands, g) {
				cands = append(cands, g)
			}
		}
		tries := [][]int{cands}
		if len(cands) > 1 {
			for _, g := range cands {
				tries = append(tries, []int{g})
			}
		}
		joined := false
		for _, gs := range tries {
			if len(gs) == 0 || !canJoin(gs, i) {
				continue
			}
			into := gs[0]
			for _, g := range gs[1:] {
				for _, m := range groups[g] {
					group[m] = into
				}
				groups[into] = append(groups[into], groups[g]...)
				groups[g] = nil
			}
			groups[into] = append(groups[into], i)
			slices.Sort(groups[into])
			group[i] = into
			joined, fused = true, true
			break
		}
		if !joined {
			group[i] = len(groups)
			groups = append(groups, []int{i})
		}
	}
	if !fused && len(nodes) == len(b.nodes) {
		return false
	}
	out := make([]*node, 0, len(nodes))
	for i, n := range nodes {
		g := group[i]
		if g < 0 || len(groups[g]) < 2 {
			out = append(out, n)
			continue
		}
		ms := groups[g]
		if ms[len(ms)-1] != i {
			continue // placed at its last member
		}
		out = append(out, newFusedNode(nodes, ms, group, consumers, isOut))
	}
	for i, n := range out {
		n.seq = i
	}
	b.nodes = out
	return true
}

// ewRef locates an operand or result within a tile: an input of the fused
// node, a tile buffer or an output of the fused node.
type ewRef struct {
	kind int // refIn, refBuf or refOut
	i    int
}

const (
	refIn = iota
	refBuf
	refOut
)

// ewStep is one member op of a fused group.
type ewStep struct {
	spec *ewSpec
	a, b ewRef // b unused for unary ops
	dst  ewRef
}

// fusedEW is the compiled plan of a fused group.
type fusedEW struct {
	shape shapes.Shape
	steps []ewStep
	// bcast[j] and run[j]: how input j covers the output (bcFull, or
	// bcScalar for a 1-element operand of a larger output, read as a
	// number as bcastPlan does; bcRows, bcCols: see ewBroadcast).
	bcast, run []int
	// cands[k]: inputs that may hold output k (the output's shape, read by
	// no step after the one writing output k).
	cands [][]int
	nOut  int
	nBuf  int
}

// newFusedNode builds the fused node of the members ms (positions in
// nodes, ascending): its inputs are the members' operands produced
// outside the group (each once), its outputs the members' values read
// outside it or returned, re-homed onto the fused node.
func newFusedNode(nodes []*node, ms []int, group []int, consumers [][]int, isOut []bool) *node {
	g := group[ms[0]]
	shape := nodes[ms[0]].outs[0].shape
	f := &fusedEW{shape: shape}
	fn := &node{kind: kindCustom, opType: nodes[ms[len(ms)-1]].opType}
	member := map[*value]int{} // member value → step index
	inIdx := map[*value]int{}
	var names []string
	lastRead := []int{} // per input: last step reading it
	ref := func(v *value, step int) ewRef {
		if s, ok := member[v]; ok {
			return f.steps[s].dst
		}
		j, ok := inIdx[v]
		if !ok {
			j = len(fn.inputs)
			inIdx[v] = j
			fn.inputs = append(fn.inputs, v)
			mode, run, _ := ewBroadcast(v.shape, shape)
			if mode == bcScalar && shape.Size() == 1 {
				mode = bcFull
			}
			f.bcast, f.run = append(f.bcast, mode), append(f.run, run)
			lastRead = append(lastRead, step)
		}
		lastRead[j] = step
		return ewRef{kind: refIn, i: j}
	}
	// Last reader (step index) of each member's value inside the group.
	stepOf := make(map[int]int, len(ms))
	for s, m := range ms {
		stepOf[m] = s
	}
	lastUse := make([]int, len(ms))
	external := make([]bool, len(ms))
	for s, m := range ms {
		lastUse[s] = -1
		external[s] = isOut[m]
		for _, c := range consumers[m] {
			if group[c] == g {
				lastUse[s] = max(lastUse[s], stepOf[c])
			} else {
				external[s] = true
			}
		}
	}
	var free []int
	var outProducer []int
	var owner []int // tile buffer → the step whose value it holds (-1: free)
	for s, m := range ms {
		n := nodes[m]
		names = append(names, n.opType.String())
		st := ewStep{spec: n.ew}
		st.a = ref(n.inputs[0], s)
		if n.ew.binary != nil {
			st.b = ref(n.inputs[1], s)
		}
		if external[s] {
			st.dst = ewRef{kind: refOut, i: f.nOut}
			v := n.outs[0]
			v.node, v.out = fn, f.nOut
			fn.outs = append(fn.outs, v)
			outProducer = append(outProducer, s)
			f.nOut++
		} else {
			var bi int
			if len(free) > 0 {
				bi, free = free[len(free)-1], free[:len(free)-1]
			} else {
				bi = f.nBuf
				f.nBuf++
				owner = append(owner, -1)
			}
			st.dst = ewRef{kind: refBuf, i: bi}
		}
		// Then free the buffers whose last reader is this step: the
		// result never shares a tile buffer with an operand (vek's
		// in-place kernels refuse x ⊕ x into x).
		for _, r := range []ewRef{st.a, st.b} {
			if r.kind == refBuf {
				if src := owner[r.i]; src >= 0 && lastUse[src] == s {
					free = append(free, r.i)
					owner[r.i] = -1
				}
			}
		}
		if st.dst.kind == refBuf {
			owner[st.dst.i] = s
		}
		f.steps = append(f.steps, st)
		member[n.outs[0]] = s
	}
	f.cands = make([][]int, f.nOut)
	for k, p := range outProducer {
		for j, v := range fn.inputs {
			st := f.steps[p]
			same := st.spec.binary != nil && st.a == st.b // x ⊕ x: not in place (as unfused)
			if v.shape.Equal(shape) && lastRead[j] <= p && !same {
				f.cands[k] = append(f.cands[k], j)
			}
		}
	}
	fn.label = "Fused(" + strings.Join(names, ",") + ")"
	fn.execN = f.exec
	return fn
}

// exec runs the group: outputs go to owned inputs of their shape where the
// plan allows it, else to new buffers.
func (f *fusedEW) exec(be *Backend, in []backends.Buffer, owned []bool) ([]backends.Buffer, []bool, error) {
	ins := make([][]float32, len(in))
	for j, buf := range in {
		x, err := f32Data(be, buf)
		if err != nil {
			return nil, nil, err
		}
		ins[j] = x
	}
	outs := make([]backends.Buffer, f.nOut)
	dsts := make([][]float32, f.nOut)
	consumed := make([]bool, len(in))
	free := slices.Clone(owned) // owned inputs not yet holding an output
	for k := range outs {
		buf, flat, j, err := outputFor(be, in, free, f.shape, f.cands[k]...)
		if err != nil {
			for k2 := range k {
				if !slices.Contains(in, outs[k2]) {
					be.BufferFinalize(outs[k2])
				}
			}
			return nil, nil, err
		}
		if j >= 0 {
			free[j], consumed[j] = false, true
		}
		outs[k], dsts[k] = buf, flat
	}
	n := f.shape.Size()
	if n == 0 {
		return outs, consumed, nil
	}
	tile := min(ewTile, n)
	tiles := (n + tile - 1) / tile
	be.forRange(tiles, tile, func(lo, hi int) {
		var bufs []float32
		if f.nBuf > 0 {
			bufs = make([]float32, f.nBuf*tile)
		}
		for t := lo; t < hi; t++ {
			f.runTile(ins, dsts, bufs, tile, t*tile, min(n, (t+1)*tile))
		}
	})
	return outs, consumed, nil
}

// runTile computes elements [lo, hi) of every step.
func (f *fusedEW) runTile(ins, dsts [][]float32, bufs []float32, tile, lo, hi int) {
	at := func(r ewRef) []float32 {
		switch r.kind {
		case refIn:
			return ins[r.i][lo:hi]
		case refOut:
			return dsts[r.i][lo:hi]
		}
		return bufs[r.i*tile : r.i*tile+hi-lo]
	}
	for i := range f.steps {
		st := &f.steps[i]
		d := at(st.dst)
		k := st.spec.binary
		if k == nil {
			st.spec.unary(d, at(st.a))
			continue
		}
		ma, mb := bcFull, bcFull
		if st.a.kind == refIn {
			ma = f.bcast[st.a.i]
		}
		if st.b.kind == refIn {
			mb = f.bcast[st.b.i]
		}
		switch {
		case ma == bcFull && mb == bcFull:
			k.vv(d, at(st.a), at(st.b))
		case mb == bcScalar:
			k.vs(d, at(st.a), ins[st.b.i][0])
		case ma == bcScalar:
			k.sv(d, ins[st.a.i][0], at(st.b))
		case mb != bcFull:
			f.runBroadcast(k, d, at(st.a), ins[st.b.i], mb, f.run[st.b.i], lo, false)
		default:
			f.runBroadcast(k, d, at(st.b), ins[st.a.i], ma, f.run[st.a.i], lo, true)
		}
	}
}

// runBroadcast applies k to elements [lo, lo+len(d)) of the output, one
// operand x of the output's shape (its tile), the other y broadcast by
// mode (bcRows or bcCols, rows of run elements): row by row, the vs or sv
// form with the row's value (bcRows) or the vv form with the row's
// columns of y (bcCols), the forms bcastPlan gives the unfused op. yLeft:
// y is the left operand.
func (f *fusedEW) runBroadcast(k *binaryKernel, d, x, y []float32, mode, run, lo int, yLeft bool) {
	for o := 0; o < len(d); {
		r, c := (lo+o)/run, (lo+o)%run
		e := min(len(d), o+run-c)
		ds, xs := d[o:e], x[o:e]
		switch {
		case mode == bcRows && yLeft:
			k.sv(ds, y[r], xs)
		case mode == bcRows:
			k.vs(ds, xs, y[r])
		case yLeft:
			k.vv(ds, y[c:c+e-o], xs)
		default:
			k.vv(ds, xs, y[c:c+e-o])
		}
		o = e
	}
}
