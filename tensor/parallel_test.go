package tensor

import (
	"fmt"
	"testing"
)

// TestCopy: Copy moves exactly min(len(dst), len(src)) elements, as the
// built-in copy does, below and above the parallel threshold, with odd
// lengths and more workers than ranges, and leaves the rest of dst alone.
func TestCopy(t *testing.T) {
	const big = parallelCopyBytes / 4
	for _, c := range []struct{ dst, src, workers int }{
		{0, 0, 2}, {5, 3, 2}, {3, 5, 2}, {17, 17, 1},
		{big - 1, big - 1, 2}, {big, big, 2}, {big + 17, big + 17, 3},
		{3*big + 5, 2*big + 1, 2}, {2*big + 1, 3*big + 5, 7}, {big + 1, big + 1, 0},
	} {
		t.Run(fmt.Sprintf("%d<-%d/%d", c.dst, c.src, c.workers), func(t *testing.T) {
			dst, src := make([]float32, c.dst), make([]float32, c.src)
			for i := range src {
				src[i] = float32(i) + 0.5
			}
			for i := range dst {
				dst[i] = -1
			}
			n := Copy(dst, src, c.workers)
			if want := min(c.dst, c.src); n != want {
				t.Fatalf("copied %d, want %d", n, want)
			}
			for i, v := range dst {
				want := float32(-1)
				if i < n {
					want = src[i]
				}
				if v != want {
					t.Fatalf("dst[%d] = %v, want %v", i, v, want)
				}
			}
		})
	}
}

// BenchmarkCopy: a forward pass's logits (2048 × 16384 floats) copied by
// the built-in copy and by Copy on all workers, into a warm buffer.
func BenchmarkCopy(b *testing.B) {
	const n = 2048 * 16384
	src, dst := make([]float32, n), make([]float32, n)
	for i := range src {
		src[i], dst[i] = 1, 2
	}
	for _, c := range []struct {
		name string
		f    func()
	}{{"builtin", func() { copy(dst, src) }}, {"Copy", func() { Copy(dst, src, 0) }}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				c.f()
			}
		})
	}
}
