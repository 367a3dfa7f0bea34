package vector

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/testfile"
	"github.com/cas-engine/cas/internal/vectest"
)

// storeCases builds one small index of every kind, metric and encoding.
func storeCases(t testing.TB) map[string]Index {
	t.Helper()
	d := 12
	x := vectest.LowRank(500, d, 3, 29)
	out := map[string]Index{}
	for _, m := range []Metric{InnerProduct, L2} {
		for _, enc := range []Encoding{F32, F16, SQ8} {
			f, _ := NewFlat(d, m, enc)
			f.Train(x)
			f.Add(nil, x)
			out[fmt.Sprintf("flat/%v/%v", m, enc)] = f
			ix := buildIVF(t, x, d, 8, m, enc)
			ix.SetNProbe(3)
			out[fmt.Sprintf("ivf/%v/%v", m, enc)] = ix
		}
	}
	g, _ := NewFlat(d, InnerProduct, F32)
	ids := make([]int64, 500)
	for i := range ids {
		ids[i] = int64(i*i) - 7
	}
	g.Add(ids, x)
	out["flat/ids"] = g
	e, _ := NewFlat(d, InnerProduct, F16)
	out["flat/empty"] = e
	for _, m := range []Metric{InnerProduct, L2} {
		pq := buildIVFPQ(t, x, d, 8, 4, m)
		pq.SetNProbe(3)
		out[fmt.Sprintf("ivfpq/%v", m)] = pq
	}
	return out
}

func TestSaveOpenRoundTrip(t *testing.T) {
	d := 12
	q := vectest.LowRank(9, d, 3, 31)
	for name, ix := range storeCases(t) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "idx")
			if err := SaveIndex(ix, dir); err != nil {
				t.Fatal(err)
			}
			if st, err := os.Stat(filepath.Join(dir, FileName)); err != nil || st.Mode().Perm() != 0o644 {
				t.Errorf("index file mode %v (%v), want 0644", st.Mode().Perm(), err)
			}
			back, err := OpenIndex(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer back.Close()
			if back.Len() != ix.Len() || back.Dim() != ix.Dim() || back.Metric() != ix.Metric() {
				t.Fatalf("opened n=%d d=%d %v", back.Len(), back.Dim(), back.Metric())
			}
			s1, i1, err := ix.Search(q, 7, nil)
			if err != nil {
				t.Fatal(err)
			}
			s2, i2, err := back.Search(q, 7, nil)
			if err != nil {
				t.Fatal(err)
			}
			vectest.SameResults(t, name, s1, i1, s2, i2)
			// A reopened index still accepts vectors (copy on write).
			if err := back.Add(nil, q[:d]); err != nil {
				t.Fatal(err)
			}
			if back.Len() != ix.Len()+1 {
				t.Fatalf("after add: %d", back.Len())
			}
		})
	}
}

func savedBytes(t testing.TB, ix Index) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.cas")
	if err := WriteIndexFile(ix, p); err != nil {
		t.Fatal(err)
	}
	return testfile.Read(t, p)
}

func TestOpenRejectsCorruption(t *testing.T) {
	cases := storeCases(t)
	for _, name := range []string{"flat/l2/sq8", "ivf/ip/f32", "ivf/l2/sq8", "flat/ids"} {
		b := savedBytes(t, cases[name])
		if _, err := decodeCAS(b, &IndexLoadOptions{}); err != nil {
			t.Fatalf("%s: intact file: %v", name, err)
		}
		// Every truncation fails.
		for _, n := range []int{0, 7, 23, 24, 100, len(b) / 2, len(b) - 1} {
			if _, err := decodeCAS(b[:n], &IndexLoadOptions{}); err == nil {
				t.Errorf("%s: truncated to %d bytes: no error", name, n)
			}
		}
		// Flipping any single byte is detected: header by its CRC, sections by
		// theirs; padding bytes are the only ones allowed to change.
		for i := 0; i < len(b); i += 1 + i/64 {
			c := bytes.Clone(b)
			c[i] ^= 0x5a
			if _, err := decodeCAS(c, &IndexLoadOptions{}); err == nil {
				if !isPadding(b, i) {
					t.Errorf("%s: flipping byte %d went unnoticed", name, i)
				}
			}
		}
		// Skipping payload checksums still checks the structure.
		c := bytes.Clone(b)
		c[len(c)-1] ^= 1
		if _, err := decodeCAS(c[:len(c)-1], &IndexLoadOptions{SkipPayloadChecksum: true}); err == nil {
			t.Errorf("%s: truncated file opened without payload checksums", name)
		}
	}
}

// isPadding reports whether byte i of a cas file lies outside the prefix,
// the header and every section.
func isPadding(b []byte, i int) bool {
	ix, err := decodeCAS(b, &IndexLoadOptions{})
	if err != nil || ix == nil {
		return false
	}
	hlen := int(uint32(b[12]) | uint32(b[13])<<8 | uint32(b[14])<<16 | uint32(b[15])<<24)
	if i < casPrefix+hlen {
		return false
	}
	var h casHeader
	if err := json.Unmarshal(b[casPrefix:casPrefix+hlen], &h); err != nil {
		return false
	}
	start := int(alignUp(int64(casPrefix+hlen), casAlign))
	for _, s := range h.Sections {
		if i >= start+int(s.Offset) && i < start+int(s.Offset+s.Length) {
			return false
		}
	}
	return true
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenIndex(filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("missing file opened")
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	if _, err := OpenIndex(empty, nil); err == nil {
		t.Error("empty file opened")
	}
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("hello, this is not an index"), 0o644)
	if _, err := OpenIndex(junk, nil); err == nil || !strings.Contains(err.Error(), "junk") {
		t.Errorf("junk file: %v", err)
	}
	if err := SaveIndex(nil, filepath.Join(dir, "nil")); err == nil {
		t.Error("saved a nil index")
	}
	ix, _ := NewIVF(4, 2, IVFOptions{})
	if err := SaveIndex(ix, filepath.Join(dir, "untrained")); err == nil {
		t.Error("saved an untrained IVF")
	}
}

// fuzzCases are tiny indexes (d = 4, 12 vectors): small seeds let the fuzzer
// mutate every field.
func fuzzCases(t testing.TB) map[string]Index {
	t.Helper()
	x := vectest.LowRank(12, 4, 2, 41)
	out := map[string]Index{}
	for _, m := range []Metric{InnerProduct, L2} {
		for _, enc := range []Encoding{F32, F16, SQ8} {
			f, _ := NewFlat(4, m, enc)
			f.Train(x)
			f.Add(nil, x)
			out[fmt.Sprintf("flat/%v/%v", m, enc)] = f
			out[fmt.Sprintf("ivf/%v/%v", m, enc)] = buildIVF(t, x, 4, 3, m, enc)
		}
	}
	g, _ := NewFlat(4, InnerProduct, F32)
	g.Add([]int64{5, 6, 7}, x[:12])
	out["flat/ids"] = g
	// IVF-PQ trains 256 codes per sub-quantizer: 260 vectors, 2 lists.
	out["ivfpq/ip"] = buildIVFPQ(t, vectest.LowRank(260, 4, 2, 43), 4, 2, 2, InnerProduct)
	return out
}

func FuzzDecodeCAS(f *testing.F) {
	for _, name := range []string{"flat/ip/f32", "flat/l2/sq8", "ivf/ip/f16", "ivf/l2/sq8", "flat/ids", "ivfpq/ip"} {
		f.Add(savedBytes(f, fuzzCases(f)[name]))
	}
	f.Add([]byte(casMagic))
	q := vectest.LowRank(2, 4, 2, 1)
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := decodeCAS(b, &IndexLoadOptions{})
		if err != nil {
			return
		}
		// Whatever decodes must be searchable without panicking.
		if ix.Dim() == 4 {
			ix.Search(q, 3, &SearchParams{NProbe: 2})
		}
	})
}

// FuzzDecodeCASStructure decodes with checksums ignored, so mutations reach
// the size, offset and header checks that the CRCs normally guard.
func FuzzDecodeCASStructure(f *testing.F) {
	for _, ix := range fuzzCases(f) {
		f.Add(savedBytes(f, ix))
	}
	q := vectest.LowRank(2, 4, 2, 1)
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := decodeCAS(b, &IndexLoadOptions{ignoreChecksums: true})
		if err != nil {
			return
		}
		if ix.Dim() == 4 {
			ix.Search(q, 3, &SearchParams{NProbe: 2})
		}
	})
}
