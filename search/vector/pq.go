package vector

import (
	"fmt"

	"github.com/cas-engine/cas/tensor"
)

// Product quantization (Jégou, Douze & Schmid, "Product quantization for
// nearest neighbor search", TPAMI 2011; FAISS's ProductQuantizer with
// nbits = 8). A d-dimensional vector r is cut into M sub-vectors r_m of
// dsub = d/M components; each sub-space has its own codebook of
// pqK = 256 centroids C_m[0…255], learned by k-means on the training
// sub-vectors, and r is stored as the M bytes
//
//	code_m(r) = argmin_j ‖r_m − C_m[j]‖²,    r̂ = (C_0[code_0], …, C_{M−1}[code_{M−1}]).
//
// A query is compared with every code through an asymmetric distance
// (ADC) table of M × 256 entries computed once per query (or per query
// and list): ⟨q, r̂⟩ = Σ_m T_m[code_m] with T_m[j] = ⟨q_m, C_m[j]⟩, and
// ‖q − r̂‖² = Σ_m T'_m[code_m] with T'_m[j] = ‖q_m − C_m[j]‖².

// pqK is the codebook size of one sub-quantizer (8 bits per code).
const pqK = 256

// productQuantizer holds M codebooks of pqK centroids of dsub components,
// laid out as FAISS's ProductQuantizer::centroids: centroid j of
// sub-space m at cent[(m·pqK + j)·dsub : …+dsub].
type productQuantizer struct {
	d, m, dsub int
	cent       []float32
}

// newPQ checks the shape of a product quantizer of m sub-quantizers for
// d-dimensional vectors.
func newPQ(d, m int) (*productQuantizer, error) {
	if m <= 0 || m > d || d%m != 0 {
		return nil, fmt.Errorf("product quantizer: %d sub-quantizers must divide the dimension %d", m, d)
	}
	return &productQuantizer{d: d, m: m, dsub: d / m}, nil
}

// pqTrainIterations is FAISS's ProductQuantizer clustering default (25
// iterations, at most 256 points per centroid).
const pqTrainIterations = 25

// train learns the M codebooks by k-means (L2) on the sub-vectors of the
// n = len(x)/d training vectors x, FAISS's ProductQuantizer::train: at
// most 256·256 points per sub-space, 25 iterations unless opt says.
func (pq *productQuantizer) train(x []float32, opt KMeansOptions) error {
	n := len(x) / pq.d
	if n < pqK {
		return fmt.Errorf("product quantizer: %d training vectors for %d centroids per sub-quantizer (need at least %d)", n, pqK, pqK)
	}
	opt.Metric = L2
	opt.Spherical = false
	if opt.Iterations <= 0 {
		opt.Iterations = pqTrainIterations
	}
	opt.Progress = nil
	pq.cent = make([]float32, pq.m*pqK*pq.dsub)
	sub := make([]float32, n*pq.dsub)
	for m := range pq.m {
		pq.subvectors(sub, x, m, n)
		// One seed for every sub-space, as FAISS's ProductQuantizer::train.
		res, err := KMeans(sub, pq.dsub, pqK, opt)
		if err != nil {
			return fmt.Errorf("product quantizer, sub-space %d: %w", m, err)
		}
		copy(pq.cent[m*pqK*pq.dsub:], res.Centroids)
	}
	return nil
}

// subvectors copies sub-vector m of each of the n vectors of x into dst
// (n × dsub).
func (pq *productQuantizer) subvectors(dst, x []float32, m, n int) {
	d, ds := pq.d, pq.dsub
	for i := range n {
		copy(dst[i*ds:(i+1)*ds], x[i*d+m*ds:i*d+(m+1)*ds])
	}
}

// codebook is sub-space m's 256 × dsub centroids.
func (pq *productQuantizer) codebook(m int) []float32 {
	return pq.cent[m*pqK*pq.dsub : (m+1)*pqK*pq.dsub]
}

// encode writes the M-byte codes of the n = len(x)/d vectors of x into
// codes (n × M): per sub-space, the nearest centroid in L2 (ties to the
// lower index), found by one GEMM of the sub-vectors against the
// codebook (assignPoints).
func (pq *productQuantizer) encode(codes []uint8, x []float32, threads int) {
	n := len(x) / pq.d
	sub := make([]float32, n*pq.dsub)
	assign := make([]int32, n)
	for m := range pq.m {
		pq.subvectors(sub, x, m, n)
		assignPoints(assign, sub, pq.codebook(m), n, pq.dsub, pqK, L2, threads)
		for i, a := range assign {
			codes[i*pq.m+m] = uint8(a)
		}
	}
}

// decode writes r̂ of one code into dst (length d).
func (pq *productQuantizer) decode(dst []float32, code []uint8) {
	ds := pq.dsub
	for m, c := range code[:pq.m] {
		copy(dst[m*ds:(m+1)*ds], pq.cent[(m*pqK+int(c))*ds:(m*pqK+int(c)+1)*ds])
	}
}

// ipTable writes T_m[j] = ⟨q_m, C_m[j]⟩ into tab (M × 256).
func (pq *productQuantizer) ipTable(tab, q []float32) {
	ds := pq.dsub
	for m := range pq.m {
		tensor.MatMulT(tab[m*pqK:(m+1)*pqK], q[m*ds:(m+1)*ds], pq.codebook(m), 1, pqK, ds, 1)
	}
}

// l2Table writes T'_m[j] = ‖r_m − C_m[j]‖² into tab (M × 256).
func (pq *productQuantizer) l2Table(tab, r []float32) {
	ds := pq.dsub
	for m := range pq.m {
		rm := r[m*ds : (m+1)*ds]
		cb := pq.codebook(m)
		t := tab[m*pqK : (m+1)*pqK]
		for j := range pqK {
			c := cb[j*ds : (j+1)*ds]
			var s float32
			for i, v := range rm {
				diff := v - c[i]
				s += diff * diff
			}
			t[j] = s
		}
	}
}

// adcScan adds the table entries of each code of codes (n × M) to out
// (length n): out[i] = Σ_m tab[m·256 + codes[i·M + m]].
func adcScan(out, tab []float32, codes []uint8, m int) {
	n := len(out)
	codes = codes[:n*m]
	tab = tab[:m*pqK]
	for i := range n {
		c := codes[i*m : (i+1)*m]
		var s0, s1, s2, s3 float32
		j := 0
		for ; j+4 <= m; j += 4 {
			s0 += tab[j*pqK+int(c[j])]
			s1 += tab[(j+1)*pqK+int(c[j+1])]
			s2 += tab[(j+2)*pqK+int(c[j+2])]
			s3 += tab[(j+3)*pqK+int(c[j+3])]
		}
		for ; j < m; j++ {
			s0 += tab[j*pqK+int(c[j])]
		}
		out[i] = (s0 + s1) + (s2 + s3)
	}
}
