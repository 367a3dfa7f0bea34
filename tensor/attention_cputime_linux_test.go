package tensor

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkAttentionCPUTime compares, on one thread in thread CPU time
// (which other processes on a shared machine do not inflate), the blocked
// kernel (Attention.Forward, Backward) with the unfused computation the
// model's graph made before it, on one 25M layer (8 rows × 256 tokens, 8
// query heads in 2 KV groups of 64, causal; and 2 rows × 1,024 tokens, the
// same number of tokens with 4× longer rows): the [B, H, T, T] scores
// written by a GEMM per head, the bias added, SoftmaxRows, the product
// with v; backward the four GEMMs and SoftmaxGradRows. CPU ms per layer:
//
//	go test -run '^$' -bench AttentionCPUTime -benchtime 5x ./tensor/
func BenchmarkAttentionCPUTime(b *testing.B) {
	for _, c := range []attentionCase{{b: 8, heads: 8, kv: 2, t: 256, h: 64, causal: true}, {b: 2, heads: 8, kv: 2, t: 1024, h: 64, causal: true}} {
		b.Run(fmt.Sprintf("B%d_T%d", c.b, c.t), func(b *testing.B) { benchAttentionCPUTime(b, c) })
	}
}

func benchAttentionCPUTime(b *testing.B, c attentionCase) {
	qs, k, v, bias, dO := attentionInputs(rand.New(rand.NewPCG(1, 2)), c)
	B, H, kv, T, h := c.b, c.heads, c.kv, c.t, c.h
	r := H / kv
	a := &Attention{Batch: B, Heads: H, KVHeads: kv, T: T, S: T, HeadDim: h, Workers: 1, Buffers: new(AttentionBuffers)}
	fwd := make([]float32, B*T*H*(h+2))
	grads := make([]float32, B*kv*T*(r+2)*h)
	// The unfused computation's buffers: per (b, head) [T, T] scores.
	p := make([]float32, B*H*T*T)
	dp := make([]float32, B*H*T*T)
	o := make([]float32, B*H*T*h)
	dq, dk, dv := make([]float32, B*H*T*h), make([]float32, B*H*T*h), make([]float32, B*H*T*h)
	qOp := func(x []float32, bb, hd int) Operand { // rows t of head hd: [T, h]
		return Operand{F32: x, Offset: (bb*T*H + hd) * h, RowStride: H * h, ColStride: 1}
	}
	kvT := func(x []float32, bb, j int) Operand { // [h, S]: p = feature, column = key
		return Operand{F32: x, Offset: (bb*T*kv + j) * h, RowStride: 1, ColStride: kv * h}
	}
	kvRows := func(x []float32, bb, j int) Operand { // [S, h]
		return Operand{F32: x, Offset: (bb*T*kv + j) * h, RowStride: kv * h, ColStride: 1}
	}
	unfusedForward := func() {
		for bb := range B {
			for hd := range H {
				j, ph := hd/r, p[(bb*H+hd)*T*T:(bb*H+hd+1)*T*T]
				runSerial(Gemm{Batch: 1, M: T, N: T, K: h, A: qOp(qs, bb, hd), B: kvT(k, bb, j)}, ph)
				for t := range T {
					row := ph[t*T : (t+1)*T]
					for s, x := range bias[(bb*T+t)*T : (bb*T+t+1)*T] {
						row[s] += x
					}
				}
				SoftmaxRows(ph, ph, T, 1)
				runSerial(Gemm{Batch: 1, M: T, N: h, K: T, A: RowMajor(ph, T, T), B: kvRows(v, bb, j)}, o[(bb*H+hd)*T*h:])
			}
		}
	}
	unfusedBackward := func() {
		for bb := range B {
			for hd := range H {
				j := hd / r
				ph, dph := p[(bb*H+hd)*T*T:(bb*H+hd+1)*T*T], dp[(bb*H+hd)*T*T:(bb*H+hd+1)*T*T]
				off := (bb*H + hd) * T * h
				runSerial(Gemm{Batch: 1, M: T, N: h, K: T, A: Operand{F32: ph, RowStride: 1, ColStride: T}, B: qOp(dO, bb, hd)}, dv[off:])
				runSerial(Gemm{Batch: 1, M: T, N: T, K: h, A: qOp(dO, bb, hd), B: kvT(v, bb, j)}, dph)
				SoftmaxGradRows(dph, ph, dph, T, 1)
				runSerial(Gemm{Batch: 1, M: T, N: h, K: T, A: RowMajor(dph, T, T), B: kvRows(k, bb, j)}, dq[off:])
				runSerial(Gemm{Batch: 1, M: T, N: h, K: T, A: Operand{F32: dph, RowStride: 1, ColStride: T}, B: qOp(qs, bb, hd)}, dk[off:])
			}
		}
	}
	for _, bc := range []struct {
		name string
		f    func()
	}{
		{"fused-forward", func() { a.Forward(fwd, qs, k, v, bias) }},
		{"fused-backward", func() { a.Backward(grads, qs, k, v, bias, fwd, dO) }},
		{"unfused-forward", unfusedForward},
		{"unfused-backward", unfusedBackward},
	} {
		b.Run(bc.name, func(b *testing.B) {
			runtime.LockOSThread() // thread CPU time: this goroutine's thread
			defer runtime.UnlockOSThread()
			bc.f()
			t0 := threadCPU()
			for b.Loop() {
				bc.f()
			}
			b.ReportMetric((threadCPU()-t0)/float64(b.N)*1e3, "cpu-ms/op")
		})
	}
}
