package vector

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestVectorFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "v.f32")
	x := []float32{1, 2, 3, 4, 5, 6}
	if err := WriteVectorFile(p, x); err != nil {
		t.Fatal(err)
	}
	got, err := ReadVectorFile(p, 3)
	if err != nil || !slices.Equal(got, x) {
		t.Fatalf("read back %v, %v", got, err)
	}
	v, err := OpenVectorFile(p, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	row := make([]float32, 2)
	if err := v.ReadRows(row, 2); err != nil || !slices.Equal(row, []float32{5, 6}) {
		t.Fatalf("row 2: %v %v", row, err)
	}
	if err := v.ReadRows(row, 3); err == nil {
		t.Fatal("read past the end")
	}
	for _, c := range []struct {
		name string
		d    int
	}{{"ragged", 4}, {"zero dim", 0}} {
		if _, err := ReadVectorFile(p, c.d); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	nan := filepath.Join(dir, "nan.f32")
	WriteVectorFile(nan, []float32{1, float32(math.NaN())})
	if _, err := ReadVectorFile(nan, 2); err == nil || !strings.Contains(err.Error(), "component 1") {
		t.Errorf("NaN vector: %v", err)
	}
	if _, err := ReadVectorFile(filepath.Join(dir, "missing"), 2); err == nil {
		t.Error("missing file read")
	}
}

func TestReadIDsFile(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "ids.txt")
	os.WriteFile(text, []byte("5\n -3 \n\n9000000000\n"), 0o644)
	b64 := filepath.Join(dir, "ids.i64")
	os.WriteFile(b64, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 7), math.MaxUint64), 0o644)
	b32 := filepath.Join(dir, "ids.i32")
	os.WriteFile(b32, binary.LittleEndian.AppendUint32(nil, math.MaxUint32), 0o644)
	bad32 := filepath.Join(dir, "bad.i32")
	os.WriteFile(bad32, []byte{1, 2, 3}, 0o644)
	badText := filepath.Join(dir, "bad.txt")
	os.WriteFile(badText, []byte("1\nx2\n"), 0o644)
	cases := []struct {
		path string
		want []int64
		ok   bool
	}{
		{text, []int64{5, -3, 9000000000}, true},
		{b64, []int64{7, -1}, true},
		{b32, []int64{-1}, true},
		{bad32, nil, false},
		{badText, nil, false},
		{filepath.Join(dir, "none"), nil, false},
	}
	for _, c := range cases {
		got, err := ReadIDsFile(c.path)
		if (err == nil) != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %v", filepath.Base(c.path), got, err)
		}
	}
}

func FuzzParseIDs(f *testing.F) {
	for _, s := range []string{"", "1\n2\n", " -5 \n\n", "x", "99999999999999999999", "1\r\n2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := ParseIDs(strings.NewReader(s))
		if err != nil {
			return
		}
		lines := 0
		for _, l := range strings.Split(s, "\n") {
			if strings.TrimSpace(l) != "" {
				lines++
			}
		}
		if len(ids) != lines {
			t.Fatalf("%q: %d ids from %d non-blank lines", s, len(ids), lines)
		}
	})
}
