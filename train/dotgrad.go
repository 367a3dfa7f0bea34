package train

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLX v0.26's gradient of DotGeneral (graph.dotGeneralVJP) materialises
// the outer product of the adjoint and the other operand before reducing
// it: the weight gradient of a linear layer x[B,T,in]·W[out,in] builds a
// [B,T,out,in] tensor, and the input gradient another. On the golden tiny
// models that makes a training step 10–20× slower than it need be; for
// Qwen2.5-3B at a few thousand tokens it would need terabytes. The VJP
// below computes the same two gradients as DotGenerals (matrix products):
//
//	y[b…, l…, r…] = Σ_c lhs[b…, l…, c…] · rhs[b…, r…, c…]
//	∂lhs[b…, l…, c…] = Σ_r v[b…, l…, r…] · rhs[b…, r…, c…]
//	∂rhs[b…, r…, c…] = Σ_l v[b…, l…, r…] · lhs[b…, l…, c…]
//
// each followed by a transpose back to the operand's axis order. GoMLX
// documents graph.VJPRegistration as the place to change a VJP.

var fastDotOnce sync.Once

// gomlxDotVJP is GoMLX's own DotGeneral VJP, captured before any
// replacement: the fallback, and the reference of the tests.
var gomlxDotVJP = graph.VJPRegistration[graph.NodeTypeDotGeneral]

// EnableFastDotGradient replaces GoMLX's DotGeneral VJP with
// fastDotGeneralVJP, process-wide and once (NewLearner and WarmStart call
// it before building any gradient). The gradients are the same; only their
// cost changes. If the node's axes cannot be read (a GoMLX version whose
// DotGeneral node differs), GoMLX's own VJP is used for that node.
func EnableFastDotGradient() {
	fastDotOnce.Do(func() {
		graph.VJPRegistration[graph.NodeTypeDotGeneral] = func(node *graph.Node, vjps []*graph.Node, out shapes.Shape) []*graph.Node {
			if grads, ok := fastDotGeneralVJP(node, vjps[0]); ok {
				return grads
			}
			return gomlxDotVJP(node, vjps, out)
		}
	})
}

// dotAxes are a DotGeneral node's axis lists.
type dotAxes struct {
	lhsContracting, lhsBatch, rhsContracting, rhsBatch []int
}

// readDotAxes reads the axes of a DotGeneral node. GoMLX v0.26 keeps them
// in unexported fields with no accessor; reflection reads them (read-only).
func readDotAxes(node *graph.Node) (dotAxes, bool) {
	if node.Type() != graph.NodeTypeDotGeneral || len(node.Inputs()) != 2 {
		return dotAxes{}, false
	}
	v := reflect.ValueOf(node).Elem().FieldByName("inputs")
	if !v.IsValid() || v.Kind() != reflect.Interface || v.IsNil() {
		return dotAxes{}, false
	}
	v = v.Elem()
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return dotAxes{}, false
	}
	ok := true
	ints := func(name string) []int {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Int {
			ok = false
			return nil
		}
		out := make([]int, f.Len())
		for i := range out {
			out[i] = int(f.Index(i).Int())
		}
		return out
	}
	a := dotAxes{
		lhsContracting: ints("lhsContractingAxes"), lhsBatch: ints("lhsBatchAxes"),
		rhsContracting: ints("rhsContractingAxes"), rhsBatch: ints("rhsBatchAxes"),
	}
	return a, ok && len(a.lhsContracting) == len(a.rhsContracting) && len(a.lhsBatch) == len(a.rhsBatch)
}

// crossAxes returns the axes of a rank-r operand that are neither
// contracting nor batch, in increasing order (DotGeneral's output order).
func crossAxes(rank int, contracting, batch []int) []int {
	var out []int
	for a := range rank {
		if !slices.Contains(contracting, a) && !slices.Contains(batch, a) {
			out = append(out, a)
		}
	}
	return out
}

// fastDotGeneralVJP returns the adjoints of a DotGeneral node's two operands
// for the output adjoint v, computed as DotGenerals (see above).
func fastDotGeneralVJP(node, v *graph.Node) ([]*graph.Node, bool) {
	ax, ok := readDotAxes(node)
	if !ok {
		return nil, false
	}
	lhs, rhs := node.Inputs()[0], node.Inputs()[1]
	nb := len(ax.lhsBatch)
	lx := crossAxes(lhs.Rank(), ax.lhsContracting, ax.lhsBatch)
	rx := crossAxes(rhs.Rank(), ax.rhsContracting, ax.rhsBatch)
	if v.Rank() != nb+len(lx)+len(rx) {
		return nil, false
	}
	batchV := iotaFrom(0, nb)
	vL := iotaFrom(nb, len(lx))         // v's axes of lhs's cross axes
	vR := iotaFrom(nb+len(lx), len(rx)) // v's axes of rhs's cross axes
	g := []*graph.Node{
		operandAdjoint(v, vR, batchV, rhs, rx, ax.rhsBatch, lhs.Rank(), ax.lhsBatch, lx, ax.lhsContracting, ax.rhsContracting),
		operandAdjoint(v, vL, batchV, lhs, lx, ax.lhsBatch, rhs.Rank(), ax.rhsBatch, rx, ax.rhsContracting, ax.lhsContracting),
	}
	return g, true
}

// operandAdjoint computes the adjoint of one operand ("this") of a
// DotGeneral from the output adjoint v and the other operand:
//
//	r = DotGeneral(v, contracting vOther, batch vBatch; other, contracting otherCross, batch otherBatch)
//	  → [batch…, this cross…, other's contracting axes in increasing order…]
//
// transposed to this operand's axis order, where thisContract[i] pairs with
// otherContract[i].
func operandAdjoint(v *graph.Node, vOther, vBatch []int, other *graph.Node, otherCross, otherBatch []int,
	thisRank int, thisBatch, thisCross, thisContract, otherContract []int) *graph.Node {
	r := graph.DotGeneral(v, vOther, vBatch, other, otherCross, otherBatch)
	sortedOther := slices.Clone(otherContract)
	slices.Sort(sortedOther)
	perm := make([]int, thisRank) // perm[a] = axis of r that becomes this operand's axis a
	for i, a := range thisBatch {
		perm[a] = i
	}
	for j, a := range thisCross {
		perm[a] = len(thisBatch) + j
	}
	for i, a := range thisContract {
		k := slices.Index(sortedOther, otherContract[i])
		perm[a] = len(thisBatch) + len(thisCross) + k
	}
	identity := true
	for a, p := range perm {
		identity = identity && a == p
	}
	if identity {
		return r
	}
	return graph.TransposeAllAxes(r, perm...)
}

func iotaFrom(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}

// String helps debugging: a DotGeneral node's axes.
func (a dotAxes) String() string {
	return fmt.Sprintf("lhs contracting %v batch %v, rhs contracting %v batch %v", a.lhsContracting, a.lhsBatch, a.rhsContracting, a.rhsBatch)
}
