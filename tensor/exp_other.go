//go:build !amd64

package tensor

// expLanes is 0: no vector kernel off amd64.
const expLanes = 0

// Exp writes dst[i] = e^x[i] (dst may be x; x at least as long as dst):
// exp32, correctly rounded but for rare near-ties.
func Exp(dst, x []float32) { expWith(dst, x, 0) }

// expWith is Exp (lanes is 0 off amd64).
func expWith(dst, x []float32, _ int) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = exp32(v)
	}
}

// mulSiluVec and siluGradMulVec do nothing off amd64 (see exp_amd64.go).
func mulSiluVec(d, a, g []float32) int        { return 0 }
func siluGradMulVec(d, v, u, g []float32) int { return 0 }

// expShiftScaleVec does nothing off amd64 (see exp_amd64.go).
func expShiftScaleVec(d, x []float32, shift, scale float32) int { return 0 }
