package vector

import (
	"fmt"
	"os"

	"github.com/edsrzf/mmap-go"
)

// mapFile maps a whole file read-only (github.com/edsrzf/mmap-go, which
// covers Unix and Windows). The returned release function unmaps it; the
// bytes must not be used afterwards.
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
	if st.Size() == 0 {
		return nil, nil, fmt.Errorf("%s: empty file", path)
	}
	if st.Size() != int64(int(st.Size())) {
		return nil, nil, fmt.Errorf("%s: %d bytes do not fit in memory", path, st.Size())
	}
	m, err := mmap.Map(f, mmap.RDONLY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return m, m.Unmap, nil
}
