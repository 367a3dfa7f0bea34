package train

import "fmt"

func ExampleGroupAdvantages() {
	// Two prompts, G = 3: rewards from the Eq. 5 table.
	adv, err := GroupAdvantages([]float32{1.0, 0.2, 0.2, 0.1, 0.1, 0.1}, 3)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%.4f\n", adv)
	// Output:
	// [1.1547 -0.5773 -0.5773 0.0000 0.0000 0.0000]
}

func ExampleOptimConfig_LearningRate() {
	cfg := DefaultOptimConfig()
	cfg.TotalSteps = 351 // int(0.285·351) = 100 warm-up steps
	for _, step := range []int{0, 25, 100, 300} {
		fmt.Printf("step %d: lr %.2e\n", step, cfg.LearningRate(step))
	}
	// Output:
	// step 0: lr 0.00e+00
	// step 25: lr 2.50e-07
	// step 100: lr 1.00e-06
	// step 300: lr 1.00e-06
}
