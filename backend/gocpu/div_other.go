//go:build !amd64

package gocpu

// divVV writes dst[i] = a[i] / b[i] (dst may be exactly a or b).
func divVV(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] / b[i]
	}
}

// divVS writes dst[i] = a[i] / s (dst may be exactly a).
func divVS(dst, a []float32, s float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] = a[i] / s
	}
}

// divSV writes dst[i] = s / b[i] (dst may be exactly b).
func divSV(dst []float32, s float32, b []float32) {
	b = b[:len(dst)]
	for i := range dst {
		dst[i] = s / b[i]
	}
}
