package gocpu

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Executable implements backends.Executable: a sequence of steps, each a
// simplego executable (a segment of delegated ops) or a custom op, passing
// buffers through numbered slots.
type Executable struct {
	backend     *Backend
	name        string
	paramNames  []string
	paramShapes []shapes.Shape
	paramSlots  []int
	outShapes   []shapes.Shape
	outSlots    []int
	steps       []step
	numSlots    int
	// uses[s] is the number of steps reading slot s plus its occurrences
	// among the outputs.
	uses      []int
	finalized bool
	// largest is the element count of the largest value the plan
	// computes (tests check that no outer product is built).
	largest int
	// maxIn is the most inputs of one step (the size of Execute's
	// per-call argument scratch).
	maxIn int
}

var _ backends.Executable = (*Executable)(nil)

type step struct {
	seg      backends.Executable // a segment, or
	custom   customFn            // a custom op, or
	multi    multiFn             // a fused op with several results
	name     string
	in, out  []int // slots
	distinct bool  // every input slot appears once in in
	// once[j]: slot in[j] appears only once in in, so the op may be handed
	// that buffer (a slot read through two inputs never is). A
	// DynamicUpdateSlice lists its zero start index once per axis; its
	// operand, the KV cache, is still handed over and updated in place.
	once []bool
	// elems is the number of elements the step writes (for Profile).
	elems int
}

// Compile implements backends.Builder.
func (b *Builder) Compile(outputs []backends.Op, shardings []*backends.ShardingSpec) (backends.Executable, error) {
	if len(shardings) != 0 {
		return nil, fmt.Errorf("%s backend: sharding is not supported", BackendName)
	}
	outs, err := b.checkOps("Compile", outputs)
	if err != nil {
		return nil, err
	}
	b.compiled = true
	defer func() {
		if f, ok := b.shadow.(interface{ Finalize() }); ok {
			f.Finalize()
		}
		b.byShadow = nil
	}()
	e, err := b.plan(outs)
	if err != nil {
		return nil, fmt.Errorf("%s backend: compile %q: %w", BackendName, b.name, err)
	}
	return e, nil
}

// plan cuts the recorded graph into steps; see the package documentation.
func (b *Builder) plan(outs []*value) (*Executable, error) {
	nn := len(b.nodes)
	live := make([]bool, nn)
	stack := make([]*node, 0, len(outs))
	for _, v := range outs {
		stack = append(stack, v.node)
	}
	for _, v := range b.params { // parameters are inputs even when unused
		live[v.node.seq] = true
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if live[n.seq] && n.kind != kindParam {
			continue
		}
		live[n.seq] = true
		for _, in := range n.inputs {
			if !live[in.node.seq] {
				stack = append(stack, in.node)
			}
		}
	}
	if b.fuseElementwise(live, outs) { // b.nodes now holds only live nodes
		nn = len(b.nodes)
		live = make([]bool, nn)
		for i := range live {
			live[i] = true
		}
	}

	// Slots: one per value of a live node.
	e := &Executable{backend: b.backend, name: b.name}
	for _, n := range b.nodes {
		if !live[n.seq] {
			continue
		}
		for _, v := range n.outs {
			v.id = e.numSlots
			e.numSlots++
			e.largest = max(e.largest, v.shape.Size())
		}
	}
	remat := func(n *node) bool { return n.kind == kindDelegate && len(n.inputs) == 0 }

	// Consumers of each node.
	consumers := make([][]*node, nn)
	for _, n := range b.nodes {
		if !live[n.seq] {
			continue
		}
		for _, in := range n.inputs {
			p := in.node.seq
			if len(consumers[p]) == 0 || consumers[p][len(consumers[p])-1] != n {
				consumers[p] = append(consumers[p], n)
			}
		}
	}
	isOutput := make([]bool, nn)
	for _, v := range outs {
		isOutput[v.node.seq] = true
	}

	// Stages as early as possible.
	stage := make([]int, nn)
	last := 0
	for _, n := range b.nodes {
		if !live[n.seq] || n.kind == kindParam || remat(n) {
			continue
		}
		s := 0
		for _, in := range n.inputs {
			p := in.node
			switch {
			case p.kind == kindParam || remat(p):
			case p.kind == kindCustom && n.kind == kindDelegate:
				s = max(s, stage[p.seq]+1)
			default:
				s = max(s, stage[p.seq])
			}
		}
		stage[n.seq] = s
		last = max(last, s)
	}
	// Delegated ops as late as their consumers allow (consumers come later
	// in b.nodes, so their stages are final when a node is reached).
	// Constants (no inputs) are replayed by every segment that reads them;
	// their home stage serves custom readers and outputs.
	for i := nn - 1; i >= 0; i-- {
		n := b.nodes[i]
		if !live[i] || n.kind != kindDelegate {
			continue
		}
		lim := last
		for _, c := range consumers[i] {
			if c.kind == kindCustom || !remat(n) {
				lim = min(lim, stage[c.seq])
			}
		}
		stage[i] = max(stage[i], lim)
	}

	// Profiling: one stage per op, in graph order (a topological order),
	// so that every delegated op is a segment of its own.
	if b.backend.prof != nil {
		last = 0
		for _, n := range b.nodes {
			if live[n.seq] && n.kind != kindParam {
				stage[n.seq] = last
				last++
			}
		}
		last = max(last-1, 0)
	}

	// Steps: per stage, the segment then the custom ops (in graph order).
	byStage := make([][]*node, last+1)
	for _, n := range b.nodes {
		if live[n.seq] && n.kind != kindParam {
			byStage[stage[n.seq]] = append(byStage[stage[n.seq]], n)
		}
	}
	for s := 0; s <= last; s++ {
		seg, err := b.buildSegment(s, byStage[s], stage, consumers, isOutput, remat)
		if err != nil {
			return nil, err
		}
		if seg != nil {
			e.steps = append(e.steps, *seg)
		}
		for _, n := range byStage[s] {
			if n.kind == kindCustom {
				st := step{custom: n.exec, multi: n.execN, name: n.opType.String()}
				for _, v := range n.outs {
					st.out = append(st.out, v.id)
					st.elems += v.shape.Size()
				}
				if n.label != "" {
					st.name = n.label
				}
				for _, in := range n.inputs {
					st.in = append(st.in, in.id)
				}
				e.steps = append(e.steps, st)
			}
		}
	}

	// Parameters and outputs.
	for _, v := range b.params {
		e.paramSlots = append(e.paramSlots, v.id)
		e.paramShapes = append(e.paramShapes, v.shape)
		e.paramNames = append(e.paramNames, v.node.name)
	}
	for _, v := range outs {
		e.outSlots = append(e.outSlots, v.id)
		e.outShapes = append(e.outShapes, v.shape)
	}
	e.uses = make([]int, e.numSlots)
	for i := range e.steps {
		st := &e.steps[i]
		e.maxIn = max(e.maxIn, len(st.in))
		seen := map[int]int{}
		for _, s := range st.in {
			if seen[s]++; seen[s] == 1 {
				e.uses[s]++
			}
		}
		st.distinct = len(seen) == len(st.in)
		st.once = make([]bool, len(st.in))
		for j, s := range st.in {
			st.once[j] = seen[s] == 1
		}
	}
	for _, s := range e.outSlots {
		e.uses[s]++
	}
	return e, nil
}

// buildSegment compiles the delegated ops of stage s (nodes holds the
// stage's live nodes) into one simplego executable; nil when there are
// none. Constants are members only where custom ops or outputs read them.
func (b *Builder) buildSegment(s int, nodes []*node, stage []int, consumers [][]*node, isOutput []bool, remat func(*node) bool) (*step, error) {
	var members []*node
	for _, n := range nodes {
		if n.kind == kindDelegate && (!remat(n) || b.neededOutside(n, consumers, isOutput)) {
			members = append(members, n)
		}
	}
	if len(members) == 0 {
		return nil, nil
	}
	sb := b.backend.Backend.Builder(fmt.Sprintf("%s#%d", b.name, s))
	ops := map[*value]backends.Op{}
	st := &step{name: fmt.Sprintf("segment %d", s)}
	if b.backend.prof != nil && len(members) == 1 {
		st.name = members[0].opType.String()
	}
	var replayNode func(n *node) error
	resolve := func(v *value) (backends.Op, error) {
		if op, ok := ops[v]; ok {
			return op, nil
		}
		if remat(v.node) {
			if err := replayNode(v.node); err != nil {
				return nil, err
			}
			return ops[v], nil
		}
		op, err := sb.Parameter(fmt.Sprintf("in%d", len(st.in)), v.shape, nil)
		if err != nil {
			return nil, err
		}
		ops[v] = op
		st.in = append(st.in, v.id)
		return op, nil
	}
	replayNode = func(n *node) error {
		in := make([]backends.Op, len(n.inputs))
		for i, v := range n.inputs {
			op, err := resolve(v)
			if err != nil {
				return err
			}
			in[i] = op
		}
		res, err := n.replay(sb, in)
		if err != nil {
			return fmt.Errorf("replaying %s: %w", n.opType, err)
		}
		for _, v := range n.outs {
			if v.out >= len(res) {
				return fmt.Errorf("replaying %s: %d results, want at least %d", n.opType, len(res), v.out+1)
			}
			ops[v] = res[v.out]
		}
		return nil
	}
	for _, n := range members {
		if _, done := ops[n.outs[0]]; done {
			continue // a constant already replayed for a member
		}
		if err := replayNode(n); err != nil {
			return nil, err
		}
	}
	// Outputs: member values read outside the segment.
	var outOps []backends.Op
	seen := map[backends.Op]bool{}
	for _, n := range members {
		if !b.neededOutsideSegment(n, s, stage, consumers, isOutput, remat) {
			continue
		}
		for _, v := range n.outs {
			op := ops[v]
			if seen[op] {
				return nil, fmt.Errorf("segment %d: %s yields an op twice", s, n.opType)
			}
			seen[op] = true
			outOps = append(outOps, op)
			st.out = append(st.out, v.id)
			st.elems += v.shape.Size()
		}
	}
	if len(outOps) == 0 {
		return nil, nil
	}
	exec, err := sb.Compile(outOps, nil)
	if err != nil {
		return nil, fmt.Errorf("segment %d: %w", s, err)
	}
	st.seg = exec
	return st, nil
}

// neededOutside reports whether a constant-like node is read by a custom
// op or returned (delegated readers replay it themselves).
func (b *Builder) neededOutside(n *node, consumers [][]*node, isOutput []bool) bool {
	if isOutput[n.seq] {
		return true
	}
	for _, c := range consumers[n.seq] {
		if c.kind == kindCustom {
			return true
		}
	}
	return false
}

// neededOutsideSegment reports whether a member of segment s is read by a
// custom op, by a delegated op of another stage, or returned.
func (b *Builder) neededOutsideSegment(n *node, s int, stage []int, consumers [][]*node, isOutput []bool, remat func(*node) bool) bool {
	if isOutput[n.seq] {
		return true
	}
	for _, c := range consumers[n.seq] {
		if c.kind == kindCustom || (c.kind == kindDelegate && stage[c.seq] != s) {
			if remat(n) && c.kind == kindDelegate {
				continue
			}
			return true
		}
	}
	return false
}

// Inputs implements backends.Executable.
func (e *Executable) Inputs() (names []string, inputShapes []shapes.Shape) {
	return e.paramNames, e.paramShapes
}

// Outputs implements backends.Executable.
func (e *Executable) Outputs() []shapes.Shape { return e.outShapes }

// Finalize implements backends.Executable.
func (e *Executable) Finalize() {
	for _, st := range e.steps {
		if st.seg != nil {
			st.seg.Finalize()
		}
	}
	e.steps = nil
	e.finalized = true
}

// Execute implements backends.Executable. Donated inputs are consumed.
func (e *Executable) Execute(inputs []backends.Buffer, donate []bool, _ backends.DeviceNum) ([]backends.Buffer, error) {
	if e.finalized {
		return nil, fmt.Errorf("%s: executable was finalized", e.name)
	}
	if len(inputs) != len(e.paramSlots) {
		return nil, fmt.Errorf("%s: %d inputs, want %d", e.name, len(inputs), len(e.paramSlots))
	}
	be := e.backend
	vals := make([]backends.Buffer, e.numSlots)
	owned := make([]bool, e.numSlots)
	remaining := append([]int(nil), e.uses...)
	for i, in := range inputs {
		if in == nil {
			return nil, fmt.Errorf("%s: input #%d is nil", e.name, i)
		}
		shape, err := be.BufferShape(in)
		if err != nil {
			return nil, fmt.Errorf("%s: input #%d: %w", e.name, i, err)
		}
		if !shape.Equal(e.paramShapes[i]) {
			return nil, fmt.Errorf("%s: parameter %q (input #%d): shape %s, want %s", e.name, e.paramNames[i], i, shape, e.paramShapes[i])
		}
		s := e.paramSlots[i]
		vals[s] = in
		owned[s] = i < len(donate) && donate[i]
	}
	// release drops every owned buffer still held (on error paths too).
	release := func() {
		for s, v := range vals {
			if v != nil && owned[s] {
				be.BufferFinalize(v)
			}
			vals[s] = nil
		}
	}
	// One argument scratch for every step of this call (no allocation per
	// step: batch-1 decoding runs hundreds of small steps per token).
	inScratch, giveScratch := make([]backends.Buffer, e.maxIn), make([]bool, e.maxIn)
	var single [1]backends.Buffer
	for i := range e.steps {
		st := &e.steps[i]
		in, give := inScratch[:len(st.in)], giveScratch[:len(st.in)]
		for j, s := range st.in {
			in[j] = vals[s]
			give[j] = st.once[j] && owned[s] && remaining[s] == 1
		}
		var outs []backends.Buffer
		consumed := -1
		var consumedN []bool // multi
		var err error
		var t0 time.Time
		if be.prof != nil {
			t0 = time.Now()
		}
		if st.seg != nil {
			outs, err = st.seg.Execute(in, give, 0)
		} else if st.multi != nil {
			outs, consumedN, err = st.multi(be, in, give)
		} else {
			single[0], consumed, err = st.custom(be, in, give)
			outs = single[:]
		}
		if be.prof != nil {
			where := "gocpu"
			if st.seg != nil {
				where = "simplego"
			}
			be.prof.add(st.name, where, time.Since(t0), st.elems)
		}
		if err != nil {
			release()
			return nil, fmt.Errorf("%s: %s: %w", e.name, st.name, err)
		}
		for j, s := range st.in {
			if !st.distinct && slices.Index(st.in, s) < j {
				continue // an input slot listed twice counts once
			}
			remaining[s]--
			handedOver := (st.seg != nil && give[j]) || consumed == j || (consumedN != nil && consumedN[j])
			if handedOver {
				vals[s], owned[s] = nil, false
				continue
			}
			if remaining[s] == 0 && owned[s] {
				be.BufferFinalize(vals[s])
				vals[s], owned[s] = nil, false
			}
		}
		for j, s := range st.out {
			vals[s], owned[s] = outs[j], true
		}
	}
	res := make([]backends.Buffer, len(e.outSlots))
	for i, s := range e.outSlots {
		v := vals[s]
		if v == nil {
			release()
			return nil, fmt.Errorf("%s: output #%d was not computed", e.name, i)
		}
		if owned[s] && !slices.Contains(e.outSlots[i+1:], s) { // else a copy for all but the last
			res[i], vals[s], owned[s] = v, nil, false
			continue
		}
		c, err := e.clone(v)
		if err != nil {
			release()
			return nil, fmt.Errorf("%s: output #%d: %w", e.name, i, err)
		}
		res[i] = c
	}
	release()
	return res, nil
}

// clone copies a buffer the caller still owns (an input returned as an
// output, or an output listed twice).
func (e *Executable) clone(v backends.Buffer) (backends.Buffer, error) {
	shape, err := e.backend.BufferShape(v)
	if err != nil {
		return nil, err
	}
	src, err := e.backend.BufferData(v)
	if err != nil {
		return nil, err
	}
	out, dst, err := e.backend.NewSharedBuffer(0, shape)
	if err != nil {
		return nil, err
	}
	reflect.Copy(reflect.ValueOf(dst), reflect.ValueOf(src))
	return out, nil
}
