package tensor

import "golang.org/x/sys/cpu"

//go:noescape
func sum4StreamsAVX512(a, b, c, d *float32, n int) float32

// sumStreams4 sums the first 4·q values of x as four streams of q (a
// multiple of 32) and returns q, or 0 without AVX-512 or for short x.
func sumStreams4(x []float32) (float32, int) {
	q := len(x) / 4 &^ 31
	if q == 0 || !cpu.X86.HasAVX512F {
		return 0, 0
	}
	return sum4StreamsAVX512(&x[0], &x[q], &x[2*q], &x[3*q], q), q
}
