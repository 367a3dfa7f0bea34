package conformal_test

import (
	"fmt"
	"math"

	"github.com/cas-engine/cas/conformal"
)

func ExampleQuantile() {
	scores := []float64{3, 1, 4, 1, 5, 9, 2, 6} // n = 8
	for _, r := range []conformal.QuantileRule{conformal.RuleConformal, conformal.RuleHigher, conformal.RuleLinear} {
		fmt.Printf("%-9s q(0.8) = %.4g\n", r, conformal.Quantile(scores, 0.8, r))
	}
	// Output:
	// conformal q(0.8) = 9
	// higher    q(0.8) = 6
	// linear    q(0.8) = 5.6
}

func ExampleAPS() {
	aps := conformal.PaperAPS() // T = 0.01, keep 1..5
	calib := []conformal.Query{
		{Scores: []float64{0.80, 0.82, 0.79}, Gold: 1},
		{Scores: []float64{0.80, 0.82, 0.79}, Gold: 0},
		{Scores: []float64{0.85, 0.81, 0.83, 0.80}, Gold: 2},
		{Scores: []float64{0.78, 0.84, 0.80}, Gold: conformal.NoGold},
		{Scores: []float64{0.81, 0.80, 0.86, 0.79, 0.83}, Gold: 2},
	}
	c, err := aps.Calibrate(calib, 0.4, conformal.RuleConformal, nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("q̂ = %.4f, calibration coverage %.1f\n", c.QHat, c.Coverage)
	retrieved := []float64{0.83, 0.80, 0.84, 0.70, 0.82}
	fmt.Println("keep", c.Keep(retrieved), "passages:", c.KeepIndices(retrieved))
	// Output:
	// q̂ = 0.9784, calibration coverage 0.8
	// keep 3 passages: [2 0 4]
}

func ExampleACI() {
	// The paper's controller (smoothed rule, ρ = 0.25), bootstrapped with the
	// untrained policy's answer-span NLLs.
	aci, err := conformal.NewACI(conformal.DefaultACIConfig(), []float64{0.5, 1.0, 1.5, 2.0, 2.5, 3.0})
	if err != nil {
		panic(err)
	}
	logps := [][]float64{{-0.25, -0.25}, {-1.5, -2.5}, {-0.4, -0.6}, {-4, -3}}
	batch := make([]float64, len(logps))
	for i, lp := range logps {
		batch[i] = conformal.AnswerNLL(lp, [2]int{0, len(lp)})
	}
	st, err := aci.Step(batch)
	if err != nil {
		panic(err)
	}
	fmt.Printf("scores %v\nq_1 = %v, err_1 = %v, weights %v, α_2 = %.5f\n", batch, st.QHat, st.Err, st.Weights, st.AlphaNext)
	// Output:
	// scores [0.25 2 0.5 3.5]
	// q_1 = 3, err_1 = 0.25, weights [1 1 1 0.5], α_2 = 0.25000
}

func ExampleAnswerNLL() {
	logps := []float32{-0.1, -0.2, -1.0, -2.0, -0.5}               // response tokens
	fmt.Printf("%.2f\n", conformal.AnswerNLL(logps, [2]int{2, 4})) // answer = tokens 2, 3
	fmt.Printf("%.2f\n", conformal.AnswerNLL(logps, [2]int{0, 0})) // no answer: all tokens
	fmt.Println(conformal.AnswerNLL([]float64{}, [2]int{0, 0}) == conformal.EmptyNLL, math.IsInf(conformal.AnswerNLL([]float64{math.Inf(-1)}, [2]int{0, 1}), 1))
	// Output:
	// 1.50
	// 0.76
	// true true
}
