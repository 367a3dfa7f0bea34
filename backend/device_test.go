package backend

import "testing"

func TestHBMBandwidth(t *testing.T) {
	for _, tc := range []struct {
		gbps float64
		name string
		want float64
	}{
		{0, "NVIDIA H200", 4.8e12},
		{0, "NVIDIA H100 80GB HBM3", 3.35e12},
		{0, "NVIDIA H100 PCIe", 2e12},
		{0, "NVIDIA A100-SXM4-80GB", 2.039e12},
		{0, "Tesla T4", 3.2e11},
		{1000, "NVIDIA H200", 1e12},
		{0, "Some Unknown Accelerator", 0},
	} {
		if got := HBMBandwidth(tc.gbps, tc.name); got != tc.want {
			t.Errorf("HBMBandwidth(%g, %q) = %g, want %g", tc.gbps, tc.name, got, tc.want)
		}
	}
}
