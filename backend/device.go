package backend

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
)

// GPUName returns nvidia-smi's name of GPU 0 ("" when nvidia-smi does not
// run).
func GPUName() string {
	out, err := exec.Command("nvidia-smi", "--query-gpu=name", "--format=csv,noheader").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.Split(string(out), "\n")[0])
}

// Device describes the machine's accelerator: nvidia-smi's name, memory and
// driver of GPU 0, or the CPU count.
func Device() string {
	out, err := exec.Command("nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader").Output()
	if err == nil {
		return strings.TrimSpace(strings.Split(string(out), "\n")[0])
	}
	return fmt.Sprintf("CPU (%d cores, %s/%s)", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
}

// gpuBandwidth lists datasheet memory bandwidths (GB/s) by a substring of
// the GPU's name, most specific first.
var gpuBandwidth = []struct {
	key  string
	gbps float64
}{
	{"H200", 4800}, {"H100 NVL", 3900}, {"H100 PCIE", 2000}, {"H100", 3350}, {"GH200", 4000},
	{"A100-SXM4-80GB", 2039}, {"A100 80GB PCIE", 1935}, {"A100", 1555},
	{"L40S", 864}, {"L40", 864}, {"RTX 4090", 1008}, {"A10G", 600}, {"A10", 600}, {"L4", 300}, {"T4", 320},
}

// HBMBandwidth returns the GPU memory bandwidth in bytes/s: gbps·1e9 when
// gbps > 0, else the datasheet figure of the GPU named gpuName (GPUName()
// when empty), else 0 (unknown, or no GPU).
func HBMBandwidth(gbps float64, gpuName string) float64 {
	if gbps > 0 {
		return gbps * 1e9
	}
	if gpuName == "" {
		gpuName = GPUName()
	}
	name := strings.ToUpper(gpuName)
	for _, g := range gpuBandwidth {
		if name != "" && strings.Contains(name, g.key) {
			return g.gbps * 1e9
		}
	}
	return 0
}
