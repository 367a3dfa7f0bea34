package main

import (
	"reflect"
	"testing"

	"github.com/cas-engine/cas/demo"
)

// TestDemoSetup: `cas demo` and `cas ablate` pick the preset by --quick and
// default the output folder to runs/NAME or runs/NAME-quick, keeping --out.
func TestDemoSetup(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		quick     bool
		want      demo.Config
		wantOut   string
	}{
		{"demo", "", false, demo.DefaultConfig(7), "runs/demo"},
		{"demo", "", true, demo.QuickConfig(7), "runs/demo-quick"},
		{"ablate", "", false, demo.DefaultConfig(7), "runs/ablate"},
		{"ablate", "", true, demo.QuickConfig(7), "runs/ablate-quick"},
		{"ablate", "mine", true, demo.QuickConfig(7), "mine"},
	} {
		cfg, out := demoSetup(7, tc.quick, tc.out, tc.name)
		if out != tc.wantOut {
			t.Errorf("demoSetup(%q, quick=%v, out=%q): folder %q, want %q", tc.name, tc.quick, tc.out, out, tc.wantOut)
		}
		if !reflect.DeepEqual(cfg, tc.want) {
			t.Errorf("demoSetup(%q, quick=%v): config differs from the preset", tc.name, tc.quick)
		}
	}
	if reflect.DeepEqual(demo.DefaultConfig(7), demo.QuickConfig(7)) {
		t.Fatal("the quick and default presets are equal: the test above cannot tell them apart")
	}
}
