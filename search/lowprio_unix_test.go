//go:build unix

package search

import "syscall"

// lowPriority sets a process's nice value to 19 (best effort).
func lowPriority(pid int) { _ = syscall.Setpriority(syscall.PRIO_PROCESS, pid, 19) }
