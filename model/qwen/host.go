package qwen

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/backend/gocpu"
	"github.com/cas-engine/cas/model/hfbind"
	"github.com/cas-engine/cas/tensor"
)

// StepEnv names the environment variable that chooses how a Session runs
// its steps on the gocpu backend: "graph" forces the compiled step graph
// (the reference, and the only path on other backends); anything else,
// or unset, lets float32-computing models use the host step of
// hoststep.go (on a gocpu backend that is not plain, with its workers).
const StepEnv = "CAS_QWEN_STEP"

// useHostStep reports whether sessions of m run the host step: on the
// gocpu backend (whose buffers are host memory the step can read in
// place), for a model computing in float32 (its weights stored in float32
// or bfloat16), unless StepEnv says "graph".
func (m *Model) useHostStep() bool {
	m.mu.Lock()
	graph := m.graphStep
	m.mu.Unlock()
	if graph {
		return false
	}
	if m.hostWorkers() == 0 || m.ComputeDType() != dtypes.Float32 {
		return false
	}
	return os.Getenv(StepEnv) != "graph"
}

// hostWorkers returns the threads of the host step: the gocpu backend's
// workers, or 0 on any other backend and on a plain (nofast) gocpu.
func (m *Model) hostWorkers() int {
	if b, ok := m.backend.(*gocpu.Backend); ok {
		return b.Workers()
	}
	return 0
}

// SetGraphStep makes the sessions started afterwards run their steps as
// compiled graphs even where the host step would run (to profile the
// graph's ops, or to compare the two paths); false restores the default.
func (m *Model) SetGraphStep(force bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.graphStep = force
}

// hostTensor is a host view of one weight: the variable's own values
// (gocpu keeps them in host memory; nothing is copied), float32 or the
// bfloat16 bit patterns of a matrix stored in bfloat16. A vector stored
// in bfloat16 (norm weights, biases) is widened to a float32 copy.
type hostTensor struct {
	f32  []float32
	bf16 []uint16
}

// gemvRows computes y[j] = Σ_p x[p]·W[j, p] for the rows lo ≤ j < hi of
// the weight W [·, k] (one thread: the callers split the rows).
func (w *hostTensor) gemvRows(y, x []float32, lo, hi, k int) {
	if w.bf16 != nil {
		tensor.GemvTBF16(y[lo:hi], x, w.bf16[lo*k:], hi-lo, k, k, false, 1)
		return
	}
	tensor.GemvT(y[lo:hi], x, w.f32[lo*k:], hi-lo, k, k, false, 1)
}

// matMulT computes out [m, n] = x [m, k] · Wᵀ for the weight W [n, k] on
// workers goroutines.
func (w *hostTensor) matMulT(out, x []float32, m, n, k, workers int) {
	if w.bf16 != nil {
		tensor.MatMulTBF16(out, x, w.bf16, m, n, k, workers)
		return
	}
	tensor.MatMulT(out, x, w.f32, m, n, k, workers)
}

// row writes row i of the matrix W [·, len(dst)] to dst (float32).
func (w *hostTensor) row(dst []float32, i int) {
	k := len(dst)
	if w.bf16 != nil {
		tensor.DecodeBF16(dst, w.bf16[i*k:(i+1)*k])
		return
	}
	copy(dst, w.f32[i*k:(i+1)*k])
}

// hostWeights is the weight tree bound to host views.
type hostWeights = weightTree[*hostTensor]

// hostSnapshot is the host views of a model's weights and the variable
// tensors they view. The views stay valid while every variable holds the
// same live tensor: a training step replaces the tensors (and may reuse
// the old buffers), so each step checks current first.
type hostSnapshot struct {
	w      hostWeights
	vars   []*context.Variable
	values []*tensors.Tensor
}

// current reports whether every variable still holds the tensor viewed.
func (h *hostSnapshot) current() bool {
	for i, v := range h.vars {
		if t, err := v.Value(); err != nil || t != h.values[i] || !t.Ok() {
			return false
		}
	}
	return true
}

// hostWeights returns host views of the model's current weights: the
// model's cached snapshot while it is current, else a new one.
func (m *Model) hostWeights() (*hostSnapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.host != nil && m.host.current() {
		return m.host, nil
	}
	h := &hostSnapshot{}
	for _, s := range weightLeaves(m.Config, &h.w) {
		if !s.Needed {
			continue
		}
		scope, name := hfbind.VariableScope(m.ctx.Scope(), s.Name)
		v := m.ctx.GetVariableByScopeAndName(scope, name)
		if v == nil {
			return nil, fmt.Errorf("host step: model variable for %s is missing", s.Name)
		}
		t, err := v.Value()
		if err != nil {
			return nil, fmt.Errorf("host step: %s: %w", s.Name, err)
		}
		if t.Size() != product(s.Shape) {
			return nil, fmt.Errorf("host step: %s holds %d values, want %v", s.Name, t.Size(), s.Shape)
		}
		ht, err := viewTensor(t, len(s.Shape) == 2)
		if err != nil {
			return nil, fmt.Errorf("host step: %s: %w", s.Name, err)
		}
		s.Set(ht)
		h.vars, h.values = append(h.vars, v), append(h.values, t)
	}
	m.host = h
	return h, nil
}

// viewTensor returns the host view of t (see hostTensor); matrix says
// whether bfloat16 values may stay bfloat16.
func viewTensor(t *tensors.Tensor, matrix bool) (*hostTensor, error) {
	ht := &hostTensor{}
	var err error
	switch t.DType() {
	case dtypes.Float32:
		err = tensors.ConstFlatData(t, func(flat []float32) { ht.f32 = flat })
	case dtypes.BFloat16:
		err = tensors.ConstFlatData(t, func(flat []bfloat16.BFloat16) {
			bits := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(flat))), len(flat))
			if matrix {
				ht.bf16 = bits
				return
			}
			ht.f32 = make([]float32, len(bits))
			tensor.DecodeBF16(ht.f32, bits)
		})
	default:
		return nil, fmt.Errorf("dtype %s: the host step reads float32 or bfloat16 weights", t.DType())
	}
	return ht, err
}
