//go:build cpuexp

package cpubench

import (
	"fmt"
	"os"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"

	"github.com/cas-engine/cas/model/cpubackend"
	"github.com/cas-engine/cas/model/qwen"
)

func TestExpDecode(t *testing.T) {
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
	if os.Getenv("EXP_25M") != "" {
		cfg = Qwen25M
	}
	m, err := qwen.NewRandom(cfg, be, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		tps, err := DecodeSpeed(m, 1, 64, 64)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("decode %d: %.1f tok/s\n", i, tps)
	}
}
