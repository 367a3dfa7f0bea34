package vector

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// TestFAISSManyListsRejected: an IndexIVFFlat of d 1 whose 2^20 lists are
// only centroids (4 bytes each in the file, ~150 bytes each in memory) is
// refused from its counts before the lists are built, allocating less than
// the file's size (it cost 35× the file before).
func TestFAISSManyListsRejected(t *testing.T) {
	const nlist = 1 << 20
	file := func(ntotal int) []byte {
		q, err := NewFlat(1, L2, F32)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, nlist)
		for i := range x {
			x[i] = float32(i)
		}
		if err := q.Add(nil, x); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		fw := &faissWriter{w: &buf}
		fw.bytes([]byte("IwFl"))
		fw.header(1, ntotal, true, L2)
		fw.u64(nlist)
		fw.u64(1)
		fw.flat(q)
		fw.u8(0)
		fw.u64(0)
		fw.bytes([]byte("ilar"))
		fw.u64(nlist)
		fw.u64(4)
		fw.bytes([]byte("sprs"))
		if ntotal == 0 {
			fw.u64(0)
		} else { // one vector in list 0
			fw.u64(2)
			fw.u64(0)
			fw.u64(1)
			fw.bytes(make([]byte, 4+8))
		}
		return buf.Bytes()
	}
	b := file(0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decodeFAISS(b)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "nlist 1048576 would take") {
		t.Fatalf("error %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(b)) {
		t.Errorf("rejecting a %d-byte file allocated %d bytes", len(b), alloc)
	}
	if _, err := decodeFAISS(file(1)); err == nil || !strings.Contains(err.Error(), "over 4× its size") {
		t.Fatalf("one vector, 2^20 lists: %v", err)
	}
}
