package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/testfile"
	"github.com/cas-engine/cas/search/vector"
)

func readResults(t *testing.T, s string) []searchResult {
	t.Helper()
	return testfile.DecodeJSONL[searchResult](t, strings.NewReader(s), "stdout")
}

// TestIndexSearchFAISSGolden runs `cas index search` on the FAISS file.
func TestIndexSearchFAISSGolden(t *testing.T) {
	ixPath := sharedtest.Path(t, "data", "corpus", "wiki18_sample_1k.e5_flat.index")
	qPath := sharedtest.Path(t, "golden", "faiss", "queries_32x768.f32")
	golden := sharedtest.Path(t, "golden", "faiss", "flat_top10.jsonl")
	out, _, err := runCas(t, "index", "search", "--index", ixPath, "--vectors", qPath, "-k", "10", "--batch", "7")
	if err != nil {
		t.Fatal(err)
	}
	got := readResults(t, out)
	gb, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	want := readResults(t, string(gb))
	if len(got) != 32 || len(want) != 32 {
		t.Fatalf("%d results, %d golden", len(got), len(want))
	}
	for i := range want {
		if got[i].Query != i {
			t.Fatalf("line %d is query %d", i, got[i].Query)
		}
		for j := range 10 {
			if got[i].IDs[j] != want[i].IDs[j] || math.Abs(float64(got[i].Scores[j]-want[i].Scores[j])) > 1e-5 {
				t.Fatalf("query %d rank %d: (%d, %v), FAISS (%d, %v)", i, j, got[i].IDs[j], got[i].Scores[j], want[i].IDs[j], want[i].Scores[j])
			}
		}
	}
}

func TestIndexBuildSearchRoundTrip(t *testing.T) {
	dir := t.TempDir()
	d, n := 16, 600
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	vec := filepath.Join(dir, "v.f32")
	if err := vector.WriteVectorFile(vec, x); err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(dir, "q.f32")
	vector.WriteVectorFile(q, x[:5*d])
	ids := filepath.Join(dir, "ids.txt")
	var sb strings.Builder
	for i := range n {
		sb.WriteString(strings.Repeat(" ", i%2) + itoa(1000+i) + "\n")
	}
	os.WriteFile(ids, []byte(sb.String()), 0o644)

	for _, c := range []struct {
		name string
		args []string
	}{
		{"flat", []string{"--flat"}},
		{"flat-f16", []string{"--flat", "--f16", "--ids", ids}},
		{"ivf-sq8", []string{"--ivf", "8", "--sq8", "--nprobe", "8", "--ids", ids}},
		{"ivf-l2", []string{"--ivf", "8", "--metric", "l2", "--nprobe", "8", "--kmeans-init", "kmeans++"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name)
			args := append([]string{"index", "build", "--vectors", vec, "--dim", "16", "--out", out}, c.args...)
			msg, _, err := runCas(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(msg, "index.cas") {
				t.Fatalf("build printed %q", msg)
			}
			res, _, err := runCas(t, "index", "search", "--index", out, "--vectors", q, "-k", "3")
			if err != nil {
				t.Fatal(err)
			}
			rs := readResults(t, res)
			if len(rs) != 5 {
				t.Fatalf("%d result lines", len(rs))
			}
			for i, r := range rs {
				want := int64(i)
				if strings.Contains(strings.Join(c.args, " "), "--ids") {
					want += 1000
				}
				if r.IDs[0] != want {
					t.Errorf("query %d: top id %d, want itself (%d)", i, r.IDs[0], want)
				}
			}
			info, _, err := runCas(t, "index", "info", "--index", out)
			if err != nil || !strings.Contains(info, `"count": 600`) {
				t.Fatalf("info: %v\n%s", err, info)
			}
		})
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestIndexCommandErrors(t *testing.T) {
	dir := t.TempDir()
	vec := filepath.Join(dir, "v.f32")
	vector.WriteVectorFile(vec, make([]float32, 32))
	cases := [][]string{
		{"index", "build", "--vectors", vec, "--dim", "16", "--out", dir},                             // no --flat/--ivf
		{"index", "build", "--vectors", vec, "--dim", "16", "--flat", "--ivf", "4", "--out", dir},     // both
		{"index", "build", "--vectors", vec, "--dim", "16", "--flat", "--f16", "--sq8", "--out", dir}, // both encodings
		{"index", "build", "--vectors", vec, "--dim", "5", "--flat", "--out", dir},                    // ragged file
		{"index", "build", "--vectors", vec, "--flat", "--out", dir},                                  // no --dim
		{"index", "build", "--vectors", vec, "--dim", "16", "--flat"},                                 // no --out
		{"index", "build", "--vectors", vec, "--dim", "16", "--flat", "--metric", "cos", "--out", dir},
		{"index", "build", "--dim", "16", "--flat", "--out", dir},
		{"index", "search", "--index", filepath.Join(dir, "none"), "--vectors", vec},
		{"index", "search", "--vectors", vec},
		{"index", "info"},
	}
	for _, args := range cases {
		if _, _, err := runCas(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	// --f16 with --sq8: one message in the vector and the corpus modes.
	for _, args := range [][]string{
		{"index", "build", "--vectors", vec, "--dim", "16", "--flat", "--f16", "--sq8", "--out", dir},
		{"index", "build", "--corpus", vec, "--encoder", dir, "--f16", "--sq8", "--out", dir},
	} {
		if _, _, err := runCas(t, args...); err == nil || err.Error() != "index build: --f16 and --sq8 exclude each other" {
			t.Errorf("%v: %v", args, err)
		}
	}
}
