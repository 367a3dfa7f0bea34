package calibrate

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cas-engine/cas/search"
)

func TestZZ(t *testing.T) {
	dir := "/tmp/scratch/bm25"
	r, _, err := search.OpenRetriever(dir, search.OpenOptions{})
	if err != nil { t.Fatal(err) }
	for _, f := range []string{"nq_test_1k", "hotpotqa_dev"} {
		qa, err := LoadQA("/work/shared/data/qa/" + f + ".jsonl")
		if err != nil { t.Fatal(err) }
		for _, temp := range []float64{0.01, 0.1, 0.3, 1} {
		for _, a := range []float64{0.05, 0.2, 0.35} {
			cfg := DefaultConfig()
			cfg.Alpha = a
			cfg.N = 150
			cfg.Test = 850
			cfg.GoldOnly = true
			cfg.APS.Temperature = temp
			rep, err := Run(context.Background(), r, qa, ContainsJudge{}, cfg, nil)
			if err != nil { t.Fatal(err) }
			h := rep.Histogram
			b, _ := json.Marshal(rep)
			fmt.Printf("%s T=%v a=%v qhat=%.6f cov=%.3f covkept=%.3f mean=%.2f fixed covkept=%.3f test=%d skipped=%d hist=%v\n", f, temp, a, float64(rep.QHat), rep.Coverage, rep.CoverageKept, rep.MeanKept, rep.Fixed.CoverageKept, rep.Test, rep.SkippedNoGold, h)
			_ = b
		}
		}
	}
}
