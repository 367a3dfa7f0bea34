//go:build linux

package vector

import (
	"os"
	"syscall"
	"unsafe"
)

// ReleaseMapped tells the kernel that the memory-mapped file pages under x
// will not be read again soon (madvise MADV_DONTNEED), so that streaming a
// file larger than memory through a read-only mapping keeps the resident
// set bounded: the pages leave this process's RSS and stay in the page
// cache only as long as the kernel likes. x must view a read-only file
// mapping (never the heap: DONTNEED would zero anonymous memory).
func ReleaseMapped(x []float32) {
	if len(x) == 0 {
		return
	}
	ps := os.Getpagesize()
	start := uintptr(unsafe.Pointer(&x[0]))
	head := (ps - int(start%uintptr(ps))) % ps
	n := (len(x)*4 - head) / ps * ps
	if n <= 0 {
		return
	}
	syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&x[0]), head)), n), syscall.MADV_DONTNEED)
}
