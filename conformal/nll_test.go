package conformal

import (
	"math"
	"testing"
)

func TestAnswerNLL(t *testing.T) {
	// Response log-probs; the answer span is tokens 2..4 (exclusive end).
	lp := []float64{-0.1, -0.2, -1.0, -2.0, -0.5}
	cases := []struct {
		name string
		logp []float64
		span [2]int
		want float64
	}{
		{"answer span", lp, [2]int{2, 4}, 1.5},                    // (1.0 + 2.0)/2
		{"single token", lp, [2]int{4, 5}, 0.5},                   // 0.5
		{"empty span → all tokens", lp, [2]int{0, 0}, 3.8 / 5},    // (0.1+0.2+1+2+0.5)/5
		{"reversed span → all tokens", lp, [2]int{4, 2}, 3.8 / 5}, //
		{"span clipped to response", lp, [2]int{3, 99}, 1.25},     // (2.0 + 0.5)/2
		{"span wholly outside → all", lp, [2]int{7, 9}, 3.8 / 5},  //
		{"negative start clipped", lp, [2]int{-3, 2}, 0.15},       // (0.1 + 0.2)/2
		{"no response tokens", nil, [2]int{0, 0}, EmptyNLL},       // 20
		{"certain tokens", []float64{0, 0}, [2]int{0, 2}, 0},      //
		{"impossible token", []float64{math.Inf(-1)}, [2]int{0, 1}, math.Inf(1)},
	}
	for _, c := range cases {
		if got := AnswerNLL(c.logp, c.span); !near(got, c.want, 1e-12) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	// float32 log-probs (GoMLX outputs) give the same score.
	if got := AnswerNLL([]float32{-1, -2}, [2]int{0, 2}); got != 1.5 {
		t.Errorf("float32: got %v, want 1.5", got)
	}
}

func FuzzAnswerNLL(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 240, 191}, 0, 1)
	f.Add([]byte{}, -5, 5)
	f.Fuzz(func(t *testing.T, raw []byte, lo, hi int) {
		lp := floatsFromBytes(raw)
		got := AnswerNLL(lp, [2]int{lo, hi})
		if len(lp) == 0 && got != EmptyNLL {
			t.Fatalf("empty response: %v", got)
		}
	})
}
