//go:build linux || darwin || freebsd || netbsd || openbsd

package vector

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps a whole file read-only. The returned release function
// unmaps it; the bytes must not be used afterwards.
func mapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size == 0 {
		return nil, nil, fmt.Errorf("%s: empty file", path)
	}
	if size != int64(int(size)) {
		return nil, nil, fmt.Errorf("%s: %d bytes do not fit in memory", path, size)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
