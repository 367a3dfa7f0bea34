package tensor

import (
	"errors"
	"fmt"
	"math"
)

// SQ8 is a per-dimension 8-bit scalar quantizer (FAISS's QT_8bit with the
// min–max range statistic). Component i of a vector is stored as one byte
// cᵢ and reconstructed as
//
//	x̂ᵢ = Minᵢ + Scaleᵢ·cᵢ,   cᵢ = round((xᵢ − Minᵢ)/Scaleᵢ) clamped to 0…255,
//
// with Scaleᵢ = (maxᵢ − minᵢ)/255 over the training vectors, so the
// reconstruction error is at most Scaleᵢ/2 inside the trained range. Inner
// products with a query need no decoding:
//
//	⟨q, x̂⟩ = Σᵢ qᵢ·Minᵢ + Σᵢ (qᵢ·Scaleᵢ)·cᵢ,
//
// a per-query bias plus a float×byte dot product (PrepareQuery, DotRowsU8).
type SQ8 struct {
	Min   []float32
	Scale []float32
}

// TrainSQ8 fits the per-dimension range to the rows of x (len(x)/d rows).
func TrainSQ8(x []float32, d int) (*SQ8, error) {
	if d <= 0 {
		return nil, fmt.Errorf("sq8: dimension %d", d)
	}
	n := len(x) / d
	if n == 0 || len(x)%d != 0 {
		return nil, fmt.Errorf("sq8: %d values are not a positive number of %d-d rows", len(x), d)
	}
	lo := make([]float32, d)
	hi := make([]float32, d)
	copy(lo, x[:d])
	copy(hi, x[:d])
	for j := 1; j < n; j++ {
		row := x[j*d : (j+1)*d]
		for i, v := range row {
			lo[i] = min(lo[i], v)
			hi[i] = max(hi[i], v)
		}
	}
	s := &SQ8{Min: lo, Scale: hi}
	for i := range d {
		if isNaNOrInf(lo[i]) || isNaNOrInf(hi[i]) {
			return nil, fmt.Errorf("sq8: dimension %d has non-finite training values", i)
		}
		s.Scale[i] = (hi[i] - lo[i]) / 255
	}
	return s, nil
}

func isNaNOrInf(f float32) bool {
	return math.IsNaN(float64(f)) || math.IsInf(float64(f), 0)
}

// Dim is the vector dimension.
func (s *SQ8) Dim() int { return len(s.Min) }

// Validate checks that the parameters are usable: equal lengths, finite,
// non-negative scales.
func (s *SQ8) Validate() error {
	if s == nil || len(s.Min) == 0 {
		return errors.New("sq8: no parameters")
	}
	if len(s.Min) != len(s.Scale) {
		return fmt.Errorf("sq8: %d minima but %d scales", len(s.Min), len(s.Scale))
	}
	for i := range s.Min {
		if isNaNOrInf(s.Min[i]) || isNaNOrInf(s.Scale[i]) || s.Scale[i] < 0 {
			return fmt.Errorf("sq8: dimension %d: min %v scale %v", i, s.Min[i], s.Scale[i])
		}
	}
	return nil
}

// Encode quantizes the rows of x into dst (len(x) bytes).
func (s *SQ8) Encode(dst []uint8, x []float32) {
	d := len(s.Min)
	checkLen("dst", len(dst), len(x))
	for j := 0; j+d <= len(x); j += d {
		row, out := x[j:j+d], dst[j:j+d]
		for i, v := range row {
			sc := s.Scale[i]
			if sc == 0 {
				out[i] = 0
				continue
			}
			c := math.Round(float64((v - s.Min[i]) / sc))
			switch {
			case c >= 255:
				out[i] = 255
			case c > 0:
				out[i] = uint8(c)
			default: // negative or NaN
				out[i] = 0
			}
		}
	}
}

// Decode reconstructs the rows of codes into dst: x̂ᵢ = Minᵢ + Scaleᵢ·cᵢ.
func (s *SQ8) Decode(dst []float32, codes []uint8) {
	d := len(s.Min)
	checkLen("codes", len(codes), len(dst))
	for j := 0; j+d <= len(dst); j += d {
		c, out := codes[j:j+d], dst[j:j+d]
		for i := range out {
			out[i] = s.Min[i] + s.Scale[i]*float32(c[i])
		}
	}
}

// PrepareQuery writes qs = q ⊙ Scale and returns the bias Σᵢ qᵢ·Minᵢ, so
// that ⟨q, x̂⟩ = bias + DotRowsU8(qs, codes).
func (s *SQ8) PrepareQuery(qs, q []float32) float32 {
	d := len(s.Min)
	checkLen("query", len(q), d)
	checkLen("prepared query", len(qs), d)
	for i := range d {
		qs[i] = q[i] * s.Scale[i]
	}
	return kernels.dot(q[:d], s.Min)
}
