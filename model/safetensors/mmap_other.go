//go:build !unix

package safetensors

import "os"

// mmapFile is unsupported here: tensors are read with ReadAt.
func mmapFile(*os.File, int64) []byte { return nil }

func munmap([]byte) error { return nil }
