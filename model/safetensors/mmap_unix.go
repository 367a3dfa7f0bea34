//go:build unix

package safetensors

import (
	"os"
	"syscall"
)

// mmapFile maps the whole file read-only, or returns nil (the caller then
// falls back to ReadAt).
func mmapFile(f *os.File, size int64) []byte {
	if size <= 0 || int64(int(size)) != size {
		return nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil
	}
	return b
}

func munmap(b []byte) error { return syscall.Munmap(b) }
