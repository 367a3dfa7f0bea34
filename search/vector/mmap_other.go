//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package vector

import (
	"fmt"
	"os"
)

// mapFile reads the whole file where memory maps are not wired up.
func mapFile(path string) ([]byte, func() error, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("%s: empty file", path)
	}
	return b, func() error { return nil }, nil
}
