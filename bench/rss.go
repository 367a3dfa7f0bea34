package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// PeakRSS returns the process's peak resident set size in bytes: VmHWM
// from /proc/self/status, or getrusage's ru_maxrss (KiB on Linux) where
// /proc is missing.
func PeakRSS() int64 {
	if f, err := os.Open("/proc/self/status"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				fields := strings.Fields(rest)
				if len(fields) == 2 && fields[1] == "kB" {
					if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
						return kb << 10
					}
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		return int64(ru.Maxrss) << 10
	}
	return 0
}
