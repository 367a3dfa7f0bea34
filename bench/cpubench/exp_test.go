//go:build cpuexp

package cpubench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"

	"github.com/cas-engine/cas/bench"
	"github.com/cas-engine/cas/model/cpubackend"
	"github.com/cas-engine/cas/model/qwen"
)

func TestExp(t *testing.T) {
	var be backends.Backend
	var err error
	if os.Getenv("EXP_BACKEND") == "go" {
		be, err = simplego.New("")
	} else {
		be, err = cpubackend.New("")
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg := Qwen4M
	m, err := qwen.NewRandom(cfg, be, 1)
	if err != nil {
		t.Fatal(err)
	}
	B, T := 8, 256
	rng := rand.New(rand.NewPCG(3, 4))
	ids := make([]int32, B*T)
	mask := make([]int32, B*T)
	for i := range ids {
		ids[i], mask[i] = int32(rng.IntN(cfg.VocabSize)), 1
	}
	for i := range 3 {
		t0 := time.Now()
		if _, err := m.Logits(ids, mask, B, T); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("forward %d: %v rss %d MB\n", i, time.Since(t0), bench.PeakRSS()>>20)
	}
	if os.Getenv("EXP_TRAIN") != "" {
		tr, err := NewTrainer(m, 1e-4)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			t0 := time.Now()
			if _, err := tr.Step(ids, B, T); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("train %d: %v rss %d MB\n", i, time.Since(t0), bench.PeakRSS()>>20)
		}
	}
	for i := range 2 {
		tps, err := DecodeSpeed(m, 1, 64, 16)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("decode %d: %.1f tok/s rss %d MB\n", i, tps, bench.PeakRSS()>>20)
	}
}
