package gocpu

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Builder implements backends.Builder by recording the graph. Every op is
// also applied at once to a "shadow" simplego builder, which validates it
// and infers its shape exactly as the pure-Go backend would; custom ops
// appear there as parameters of their output shape.
type Builder struct {
	backend  *Backend
	name     string
	shadow   backends.Builder
	nodes    []*node
	params   []*value
	byShadow map[backends.Op]*value
	compiled bool
}

var _ backends.Builder = (*Builder)(nil)

// value is one output of a node: the backends.Op handed to GoMLX.
type value struct {
	b      *Builder
	node   *node
	shape  shapes.Shape
	shadow backends.Op
	// out is the position of this value among the results of node.replay.
	out int
	id  int
}

type nodeKind int

const (
	kindParam nodeKind = iota
	kindDelegate
	kindCustom
)

// replayFn applies a recorded op to a simplego builder, given the simplego
// ops of its inputs.
type replayFn func(sb backends.Builder, in []backends.Op) ([]backends.Op, error)

// customFn executes a custom op. owned[i] reports that in[i] is not used
// after this op, so it may be reused for the output (it is then consumed:
// the executor does not free it).
type customFn func(be *Backend, in []backends.Buffer, owned []bool) (out backends.Buffer, consumed int, err error)

// node is one recorded op.
type node struct {
	kind   nodeKind
	opType backends.OpType
	inputs []*value
	outs   []*value
	replay replayFn // kindDelegate
	exec   customFn // kindCustom
	param  int      // kindParam: position among the parameters
	name   string   // kindParam
	seq    int
	// bcastFrom and bcastAxes are a custom BroadcastInDim's operand and
	// broadcast axes (see foldBroadcast).
	bcastFrom *value
	bcastAxes []int
	// reduceAxes are a ReduceSum's or ReduceMax's axes (normalised), and
	// label names a fused op (fuse_softmax.go) in profiles and errors.
	reduceAxes []int
	label      string
	// dotAxes are a custom DotGeneral's lhs contracting, lhs batch, rhs
	// contracting and rhs batch axes, perm a custom Transpose's
	// permutation (read by fuse_attention.go) and sliceStarts a Slice's
	// start indices (fuse_rope.go).
	dotAxes     [4][]int
	perm        []int
	sliceStarts []int
	// concatAxis is a Concatenate's axis, and zero marks a Constant whose
	// elements are all +0 or −0 (read by foldZeroPad, fuse.go).
	concatAxis int
	zero       bool
	// ew marks a float32 elementwise op that may join a fused group, and
	// execN executes such a group, which may have several results
	// (fuse_elementwise.go).
	ew    *ewSpec
	execN multiFn
}

func newBuilder(be *Backend, name string) *Builder {
	return &Builder{
		backend:  be,
		name:     name,
		shadow:   be.Backend.Builder(name),
		byShadow: make(map[backends.Op]*value),
	}
}

// Name implements backends.Builder.
func (b *Builder) Name() string { return b.name }

// OpShape implements backends.Builder.
func (b *Builder) OpShape(op backends.Op) (shapes.Shape, error) {
	vs, err := b.checkOps("OpShape", []backends.Op{op})
	if err != nil {
		return shapes.Invalid(), err
	}
	return vs[0].shape, nil
}

// checkOps converts ops of this builder to values.
func (b *Builder) checkOps(what string, ops []backends.Op) ([]*value, error) {
	if b.compiled {
		return nil, fmt.Errorf("%s: builder %q is already compiled", what, b.name)
	}
	vs := make([]*value, len(ops))
	for i, op := range ops {
		v, ok := op.(*value)
		if !ok || v == nil {
			return nil, fmt.Errorf("%s: operand #%d (%T) was not built by the %s backend", what, i, op, BackendName)
		}
		if v.b != b {
			return nil, fmt.Errorf("%s: operand #%d belongs to builder %q, not %q", what, i, v.b.name, b.name)
		}
		vs[i] = v
	}
	return vs, nil
}

func shadowOps(vs []*value) []backends.Op {
	ops := make([]backends.Op, len(vs))
	for i, v := range vs {
		ops[i] = v.shadow
	}
	return ops
}

// addNode appends n and creates its output values for the shadow ops
// (one per replay result). A shadow op that already belongs to a value
// (simplego returns its operand for no-op conversions) is that value.
func (b *Builder) addNode(n *node, shadow []backends.Op) ([]backends.Op, error) {
	res := make([]backends.Op, len(shadow))
	for i, so := range shadow {
		if v, ok := b.byShadow[so]; ok {
			res[i] = v
			continue
		}
		shape, err := b.shadow.OpShape(so)
		if err != nil {
			return nil, err
		}
		v := &value{b: b, node: n, shape: shape, shadow: so, out: i, id: -1}
		n.outs = append(n.outs, v)
		b.byShadow[so] = v
		res[i] = v
	}
	if len(n.outs) > 0 {
		n.seq = len(b.nodes)
		b.nodes = append(b.nodes, n)
	}
	return res, nil
}

// recordN records a delegated op with nOut results (-1: any number).
func (b *Builder) recordN(op backends.OpType, ins []backends.Op, nOut int, replay replayFn) ([]backends.Op, error) {
	vs, err := b.checkOps(op.String(), ins)
	if err != nil {
		return nil, err
	}
	outs, err := replay(b.shadow, shadowOps(vs))
	if err != nil {
		return nil, err
	}
	if nOut >= 0 && len(outs) != nOut {
		return nil, fmt.Errorf("%s: %d results, want %d", op, len(outs), nOut)
	}
	return b.addNode(&node{kind: kindDelegate, opType: op, inputs: vs, replay: replay}, outs)
}

// record1 records a delegated op with one result.
func (b *Builder) record1(op backends.OpType, ins []backends.Op, fn func(sb backends.Builder, in []backends.Op) (backends.Op, error)) (backends.Op, error) {
	res, err := b.recordN(op, ins, 1, func(sb backends.Builder, in []backends.Op) ([]backends.Op, error) {
		o, err := fn(sb, in)
		if err != nil {
			return nil, err
		}
		return []backends.Op{o}, nil
	})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// addCustom records an op this backend executes itself, with output shape.
func (b *Builder) addCustom(op backends.OpType, vs []*value, shape shapes.Shape, exec customFn) (backends.Op, error) {
	so, err := b.shadow.Parameter(fmt.Sprintf("%s#%d", op, len(b.nodes)), shape, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	res, err := b.addNode(&node{kind: kindCustom, opType: op, inputs: vs, exec: exec}, []backends.Op{so})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// Parameter implements backends.Builder.
func (b *Builder) Parameter(name string, shape shapes.Shape, sharding *backends.ShardingSpec) (backends.Op, error) {
	if b.compiled {
		return nil, fmt.Errorf("Parameter: builder %q is already compiled", b.name)
	}
	so, err := b.shadow.Parameter(name, shape, sharding)
	if err != nil {
		return nil, err
	}
	n := &node{kind: kindParam, opType: backends.OpTypeParameter, param: len(b.params), name: name}
	res, err := b.addNode(n, []backends.Op{so})
	if err != nil {
		return nil, err
	}
	v := res[0].(*value)
	b.params = append(b.params, v)
	return v, nil
}

// Constant implements backends.Builder.
func (b *Builder) Constant(flat any, dims ...int) (backends.Op, error) {
	dims = append([]int(nil), dims...)
	op, err := b.record1(backends.OpTypeConstant, nil, func(sb backends.Builder, _ []backends.Op) (backends.Op, error) {
		return sb.Constant(flat, dims...)
	})
	if v, ok := op.(*value); ok && err == nil && v.node.opType == backends.OpTypeConstant {
		v.node.zero = allZero(flat)
	}
	return op, err
}

// allZero reports whether flat is a non-empty []float32 of zeros (±0).
func allZero(flat any) bool {
	f, ok := flat.([]float32)
	if !ok || len(f) == 0 {
		return false
	}
	for _, x := range f {
		if x != 0 {
			return false
		}
	}
	return true
}

// DistributedSPMD implements backends.Builder (unsupported, as in simplego).
func (b *Builder) DistributedSPMD(numDevices int) error { return b.shadow.DistributedSPMD(numDevices) }

// DistributedAutoSharding implements backends.Builder (unsupported, as in
// simplego).
func (b *Builder) DistributedAutoSharding(meshes ...backends.Mesh) error {
	return b.shadow.DistributedAutoSharding(meshes...)
}

// DeviceAssignment implements backends.Builder: only device 0 exists.
func (b *Builder) DeviceAssignment(devices ...backends.DeviceNum) error {
	return b.shadow.DeviceAssignment(devices...)
}
