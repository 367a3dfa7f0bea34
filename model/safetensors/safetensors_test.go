package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/testfile"
	"github.com/cas-engine/cas/tensor"
)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.safetensors")
	f32 := []float32{1, -2.5, 3.25, 0, float32(math.Inf(1)), 1e-3}
	ints := []int64{1, -2, 1 << 40}
	ts := []Tensor{
		F32Tensor("b.f32", []int{2, 3}, f32),
		BF16Tensor("a.bf16", []int{6}, f32),
		F16Tensor("c.f16", []int{3, 2}, f32),
		I64Tensor("ids", []int{3}, ints),
		F32Tensor("scalar", nil, []float32{7}),
		F32Tensor("empty", []int{0, 4}, nil),
	}
	if err := Write(path, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, want := strings.Join(f.Names(), ","), "a.bf16,b.f32,c.f16,empty,ids,scalar"; got != want {
		t.Fatalf("names %s, want %s", got, want)
	}
	if f.Metadata()["format"] != "pt" {
		t.Fatalf("metadata %v", f.Metadata())
	}
	for _, tc := range []struct {
		name  string
		shape []int
		tol   float64 // relative
	}{
		{"b.f32", []int{2, 3}, 0},
		{"a.bf16", []int{6}, 1.0 / 256},
		{"c.f16", []int{3, 2}, 1.0 / 2048},
	} {
		got, shape, err := f.Float32(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shape, tc.shape) {
			t.Fatalf("%s shape %v want %v", tc.name, shape, tc.shape)
		}
		for i := range f32 {
			if math.IsInf(float64(f32[i]), 0) {
				if got[i] != f32[i] {
					t.Fatalf("%s[%d]=%v want %v", tc.name, i, got[i], f32[i])
				}
				continue
			}
			if d := math.Abs(float64(got[i] - f32[i])); d > tc.tol*math.Abs(float64(f32[i])) {
				t.Fatalf("%s[%d]=%v want %v (tol %g)", tc.name, i, got[i], f32[i], tc.tol)
			}
		}
	}
	gi, shape, err := f.Int64("ids")
	if err != nil || !slices.Equal(shape, []int{3}) || gi[0] != 1 || gi[1] != -2 || gi[2] != 1<<40 {
		t.Fatalf("ids %v %v %v", gi, shape, err)
	}
	s, shape, err := f.Float32("scalar")
	if err != nil || len(shape) != 0 || len(s) != 1 || s[0] != 7 {
		t.Fatalf("scalar %v %v %v", s, shape, err)
	}
	e, shape, err := f.Float32("empty")
	if err != nil || len(e) != 0 || !slices.Equal(shape, []int{0, 4}) {
		t.Fatalf("empty %v %v %v", e, shape, err)
	}
	if _, _, err := f.Int64("b.f32"); err == nil {
		t.Fatal("Int64 of a float tensor must fail")
	}
	if _, _, err := f.Float32("ids"); err == nil {
		t.Fatal("Float32 of an integer tensor must fail")
	}
	if _, _, err := f.Float32("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("missing tensor error %v", err)
	}
	if err := f.Float32Into("b.f32", make([]float32, 5)); err == nil {
		t.Fatal("Float32Into with a wrong length must fail")
	}
	// The header is 8-byte aligned.
	raw, _ := os.ReadFile(path)
	if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
		t.Fatalf("header length %d not aligned", n)
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("dir has %d entries, want 1", len(entries))
	}
}

// build assembles a file from a raw header object and a data length.
func build(t testing.TB, hdr string, data int) []byte {
	t.Helper()
	b := make([]byte, 8+len(hdr)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(hdr)))
	copy(b[8:], hdr)
	return b
}

func TestOpenErrors(t *testing.T) {
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, MaxHeaderSize+1)
	trunc := make([]byte, 20)
	binary.LittleEndian.PutUint64(trunc, 100)
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"short", []byte{1, 2, 3}, "too short"},
		{"oversized header", huge, "exceeds"},
		{"truncated header", trunc, "truncated header"},
		{"not json", build(t, "[1,2]   ", 0), "not a JSON object"},
		{"unknown dtype", build(t, `{"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}`, 1), `tensor "w": unsupported dtype`},
		{"beyond data", build(t, `{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4), `tensor "w": data_offsets [0, 8] outside`},
		{"shape mismatch", build(t, `{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), `tensor "w": shape [3]`},
		{"negative dim", build(t, `{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, 0), "bad dimension"},
		{"reversed offsets", build(t, `{"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 4), "bad data_offsets"},
		{"overflow", build(t, `{"w":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,4]}}`, 4), "overflows"},
		{"missing field", build(t, `{"w":{"dtype":"F32","shape":[1]}}`, 4), "needs dtype"},
		{"overlap", build(t, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "overlaps"},
		{"overlap hidden by an empty tensor", build(t, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[0],"data_offsets":[6,6]},"c":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}}`, 8), "overlaps"},
		{"empty tensor inside another", build(t, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}}`, 8), `tensor "z" [4,4) overlaps tensor "a" [0,8)`},
		{"nested after a short one", build(t, `{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"c":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, 16), "overlaps"},
		{"bad metadata", build(t, `{"__metadata__":{"a":1}}`, 0), "__metadata__"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.safetensors")
			if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatalf("Open succeeded, want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q must contain %q and the file name", err, tc.want)
			}
		})
	}
}

func TestOpenDirSharded(t *testing.T) {
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "model-00001-of-00002.safetensors"), []Tensor{
		F32Tensor("a", []int{2}, []float32{1, 2}),
		BF16Tensor("b", []int{1}, []float32{3}),
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "model-00002-of-00002.safetensors"), []Tensor{
		F32Tensor("c", []int{1}, []float32{4}),
	}, nil); err != nil {
		t.Fatal(err)
	}
	writeIndex := func(m map[string]string) {
		js, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 16}, "weight_map": m})
		if err := os.WriteFile(filepath.Join(dir, IndexFileName), js, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeIndex(map[string]string{"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"})
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Sharded() || strings.Join(d.Names(), ",") != "a,b,c" {
		t.Fatalf("sharded=%v names=%v", d.Sharded(), d.Names())
	}
	if v, _, err := d.Float32("b"); err != nil || v[0] != 3 {
		t.Fatalf("b=%v err=%v", v, err)
	}
	if v, _, err := d.Float32("c"); err != nil || v[0] != 4 {
		t.Fatalf("c=%v err=%v", v, err)
	}
	d.Close()

	for _, tc := range []struct {
		name string
		m    map[string]string
		want string
	}{
		{"wrong shard", map[string]string{"a": "model-00002-of-00002.safetensors"}, `tensor "a" is mapped to`},
		{"escape", map[string]string{"a": "../x.safetensors"}, "bad shard file name"},
		{"missing shard", map[string]string{"a": "nope.safetensors"}, "nope.safetensors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeIndex(tc.m)
			d, err := OpenDir(dir)
			if err == nil {
				d.Close()
				t.Fatal("want error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q must contain %q", err, tc.want)
			}
		})
	}
	if _, err := OpenDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "neither") {
		t.Fatalf("empty folder error %v", err)
	}
}

func TestOpenDirSingle(t *testing.T) {
	d, err := OpenDir(filepath.Dir(sharedtest.Path(t, "golden", "bert-tiny", "model.safetensors")))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ti, ok := d.Info("embeddings.word_embeddings.weight")
	if !ok || ti.DType != F32 || !slices.Equal(ti.Shape, []int{30522, 64}) {
		t.Fatalf("info %+v %v", ti, ok)
	}
	if d.Sharded() || len(d.Names()) != 37 {
		t.Fatalf("sharded=%v, %d names, want 37", d.Sharded(), len(d.Names()))
	}
}

// FuzzHeader feeds arbitrary files to the parser: it must return an error or a
// header whose every tensor lies inside the data buffer, never panic.
func FuzzHeader(f *testing.F) {
	f.Add(build(f, `{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8))
	f.Add(build(f, `{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]}}`, 4))
	f.Add(build(f, `{"w":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}`, 8))
	f.Add(build(f, `{"w":{"dtype":"F16","shape":[9223372036854775807],"data_offsets":[0,2]}}`, 2))
	f.Add(build(f, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"c":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}}`, 8))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := headerLen(b, int64(len(b)))
		if err != nil {
			return
		}
		h, err := parseHeader(b[8:8+n], int64(len(b))-8-n)
		if err != nil {
			return
		}
		data := int64(len(b)) - 8 - n
		for an, a := range h.tensors {
			for bn, c := range h.tensors {
				// No range, empty or not, starts strictly inside another.
				if an != bn && c.Begin > a.Begin && c.Begin < a.End {
					t.Fatalf("accepted %q [%d,%d) inside %q [%d,%d)", bn, c.Begin, c.End, an, a.Begin, a.End)
				}
				if an != bn && c.Begin == a.Begin && c.End > c.Begin && a.End > a.Begin {
					t.Fatalf("accepted %q and %q both starting at %d", an, bn, a.Begin)
				}
			}
		}
		for name, ti := range h.tensors {
			if ti.Begin < 0 || ti.End > data || ti.End < ti.Begin {
				t.Fatalf("%s: offsets [%d,%d) outside %d", name, ti.Begin, ti.End, data)
			}
			if int64(ti.NumElements()*ti.DType.Size()) != ti.End-ti.Begin {
				t.Fatalf("%s: size mismatch accepted", name)
			}
			raw := b[8+n+ti.Begin : 8+n+ti.End]
			if ti.DType.IsFloat() {
				if err := decodeFloat32(ti.DType, raw, make([]float32, ti.NumElements())); err != nil {
					t.Fatal(err)
				}
			} else if err := decodeInt64(ti.DType, raw, make([]int64, ti.NumElements())); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func BenchmarkBF16ToFloat32(b *testing.B) {
	const n = 1 << 20
	raw := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint16(raw[2*i:], tensor.F32ToBF16(float32(i)*1e-3))
	}
	dst := make([]float32, n)
	b.SetBytes(2 * n)
	for b.Loop() {
		if err := decodeFloat32(BF16, raw, dst); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzOpenDirIndex: any model.safetensors.index.json over two valid shards
// opens a folder whose every tensor reads back, or is an error naming the
// index file; never a panic, never a file outside the folder.
func FuzzOpenDirIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":16},"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../s1.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"s2.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":{"a":"s1.safetensors","a":"s2.safetensors"}}`))
	f.Add([]byte(`{"weight_map":null,"metadata":[1]}`))
	f.Fuzz(func(t *testing.T, index []byte) {
		dir := t.TempDir()
		if err := Write(filepath.Join(dir, "s1.safetensors"), []Tensor{
			F32Tensor("a", []int{2}, []float32{1, 2}), BF16Tensor("b", []int{1}, []float32{3}),
		}, nil); err != nil {
			t.Fatal(err)
		}
		if err := Write(filepath.Join(dir, "s2.safetensors"), []Tensor{F32Tensor("c", []int{1}, []float32{4})}, nil); err != nil {
			t.Fatal(err)
		}
		testfile.Write(t, dir, IndexFileName, index)
		d, err := OpenDir(dir)
		if err != nil {
			if !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q does not name the folder", err)
			}
			return
		}
		defer d.Close()
		for _, name := range d.Names() {
			if _, _, err := d.Float32(name); err != nil {
				t.Fatalf("accepted index, tensor %s does not read: %v", name, err)
			}
		}
	})
}

func TestCountLayers(t *testing.T) {
	for _, tc := range []struct {
		names  []string
		prefix string
		want   int
	}{
		{[]string{"model.layers.0.a", "model.layers.1.b", "model.norm.weight"}, "model.layers.", 2},
		{[]string{"model.layers.3.a"}, "model.layers.", 4},
		{[]string{"model.layers.x.a", "model.layers.-1.b", "model.layers.99999999999.c", "model.layers.7"}, "model.layers.", 8},
		{[]string{"encoder.layer.11.output.dense.weight", "bert.encoder.layer.2.x"}, "encoder.layer.", 12},
		{nil, "model.layers.", 0},
	} {
		if got := CountLayers(tc.names, tc.prefix); got != tc.want {
			t.Errorf("CountLayers(%v) = %d, want %d", tc.names, got, tc.want)
		}
	}
}
