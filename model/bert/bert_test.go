package bert

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/wanterr"
	"github.com/cas-engine/cas/model/hfbind"
	"github.com/cas-engine/cas/model/safetensors"
	"github.com/cas-engine/cas/model/safetensors/safetensorstest"
	"github.com/gomlx/gomlx/backends"
)

func newBackend(t testing.TB) backends.Backend {
	t.Helper()
	b, err := backend.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	return b
}

// goldenInputs returns the golden ids cut at each row's mask.
func goldenInputs(t testing.TB, f *safetensors.File) (ids [][]int, mask []int64, T int) {
	t.Helper()
	flat, shape := safetensorstest.Int64(t, f, "input_ids")
	mask, _ = safetensorstest.Int64(t, f, "attention_mask")
	B, T := shape[0], shape[1]
	for r := 0; r < B; r++ {
		var row []int
		for j := 0; j < T; j++ {
			if mask[r*T+j] == 1 {
				row = append(row, int(flat[r*T+j]))
			}
		}
		ids = append(ids, row)
	}
	return ids, mask, T
}

func TestGolden(t *testing.T) {
	dir := filepath.Dir(sharedtest.Path(t, "golden", "bert-tiny", "model.safetensors"))
	exp := safetensorstest.Open(t, filepath.Join(dir, "expected.safetensors"))
	enc, err := Load(dir, newBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	ids, mask, T := goldenInputs(t, exp)

	wantH, _ := safetensorstest.Float32(t, exp, "last_hidden_state")
	gotH, shape, err := enc.LastHiddenState(ids)
	if err != nil {
		t.Fatal(err)
	}
	H := enc.Dim()
	if shape[0] != len(ids) || shape[1] != T || shape[2] != H {
		t.Fatalf("hidden shape %v, want [%d %d %d]", shape, len(ids), T, H)
	}
	var maxErr, maxErrAll float64
	for r := range ids {
		for j := 0; j < T; j++ {
			for h := 0; h < H; h++ {
				d := math.Abs(float64(gotH[(r*T+j)*H+h] - wantH[(r*T+j)*H+h]))
				maxErrAll = max(maxErrAll, d)
				if mask[r*T+j] == 1 {
					maxErr = max(maxErr, d)
				}
			}
		}
	}
	t.Logf("last_hidden_state max abs error: %.3g (masked), %.3g (all positions)", maxErr, maxErrAll)
	if maxErr > 1e-4 || maxErrAll > 1e-4 {
		t.Fatalf("last_hidden_state max abs error %.3g (masked) %.3g (all), want ≤ 1e-4", maxErr, maxErrAll)
	}

	wantE, _ := safetensorstest.Float32(t, exp, "embedding")
	gotE, err := enc.Embed(ids)
	if err != nil {
		t.Fatal(err)
	}
	var maxE float64
	for i := range wantE {
		maxE = max(maxE, math.Abs(float64(gotE[i]-wantE[i])))
	}
	t.Logf("embedding max abs error: %.3g", maxE)
	if maxE > 1e-5 {
		t.Fatalf("embedding max abs error %.3g, want ≤ 1e-5", maxE)
	}
}

// TestBatchInvariance: an embedding must not depend on what it is batched
// with, on the padded length bucket, or on the input order.
func TestBatchInvariance(t *testing.T) {
	dir := filepath.Dir(sharedtest.Path(t, "golden", "bert-tiny", "model.safetensors"))
	enc, err := LoadWithOptions(dir, newBackend(t), Options{BatchSize: 4, MaxLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var seqs [][]int
	for _, n := range []int{3, 40, 9, 17, 2, 33, 5} {
		s := []int{101}
		for len(s) < n-1 {
			s = append(s, 1000+rng.IntN(20000))
		}
		seqs = append(seqs, append(s, 102))
	}
	all, err := enc.Embed(seqs)
	if err != nil {
		t.Fatal(err)
	}
	H := enc.Dim()
	for i, s := range seqs {
		one, err := enc.Embed([][]int{s})
		if err != nil {
			t.Fatal(err)
		}
		var d, norm float64
		for h := 0; h < H; h++ {
			d = max(d, math.Abs(float64(one[h]-all[i*H+h])))
			norm += float64(one[h]) * float64(one[h])
		}
		if d > 1e-5 {
			t.Errorf("sequence %d (len %d): alone vs batched differ by %.3g", i, len(s), d)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("sequence %d: ‖e‖² = %v, want 1", i, norm)
		}
	}
	var calls []int
	if _, err := enc.EmbedProgress(seqs, func(done, total int) { calls = append(calls, done*100+total) }); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0] != 407 || calls[1] != 707 {
		t.Errorf("progress calls %v, want [407 707]", calls)
	}
}

func TestBucketLen(t *testing.T) {
	for _, tc := range []struct{ n, max, want int }{
		{1, 256, 8}, {8, 256, 8}, {9, 256, 16}, {100, 256, 128}, {200, 256, 256}, {256, 256, 256}, {300, 512, 512}, {9, 10, 10},
	} {
		if got := BucketLen(tc.n, tc.max); got != tc.want {
			t.Errorf("BucketLen(%d, %d) = %d, want %d", tc.n, tc.max, got, tc.want)
		}
	}
	for _, tc := range []struct{ n, bs, want int }{{1, 32, 1}, {3, 32, 4}, {32, 32, 32}, {5, 6, 6}} {
		if got := bucketBatch(tc.n, tc.bs); got != tc.want {
			t.Errorf("bucketBatch(%d, %d) = %d, want %d", tc.n, tc.bs, got, tc.want)
		}
	}
}

func TestEmbedInputErrors(t *testing.T) {
	dir := filepath.Dir(sharedtest.Path(t, "golden", "bert-tiny", "model.safetensors"))
	enc, err := LoadWithOptions(dir, newBackend(t), Options{MaxLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	for _, tc := range []struct {
		name string
		ids  [][]int
		want string
	}{
		{"empty", [][]int{{101, 102}, {}}, "sequence 1 is empty"},
		{"too long", [][]int{make([]int, 17)}, "more than the maximum 16"},
		{"bad id", [][]int{{101, 30522}}, "id 30522 outside"},
		{"negative id", [][]int{{-1}}, "id -1 outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := enc.Embed(tc.ids)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name, js, want string
	}{
		{"defaults", `{}`, ""},
		{"golden-like", `{"architectures":["BertModel"],"model_type":"bert","hidden_size":64,"num_attention_heads":4}`, ""},
		{"heads", `{"hidden_size":64,"num_attention_heads":5}`, "not divisible"},
		{"act", `{"hidden_act":"relu"}`, `hidden_act "relu"`},
		{"arch", `{"architectures":["Qwen2ForCausalLM"]}`, "not a BERT model"},
		{"type", `{"model_type":"roberta"}`, `model_type "roberta"`},
		{"zero layers", `{"num_hidden_layers":0}`, "num_hidden_layers must be positive"},
		{"pos type", `{"position_embedding_type":"relative_key"}`, "relative_key"},
		{"pad", `{"pad_token_id":99999}`, "pad_token_id"},
		{"bad json", `{"hidden_size":"x"}`, "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.js))
			if !wanterr.Check(t, tc.name, err, tc.want) && err != nil {
				t.Fatal(err)
			}
		})
	}
}

// tinyConfig is a 1-layer model small enough to write in a test.
func tinyConfig() Config {
	c := DefaultConfig()
	c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads = 50, 8, 1, 2
	c.IntermediateSize, c.MaxPositionEmbeddings = 16, 32
	return c
}

// tinyTensors returns random weights for tinyConfig under prefix.
func tinyTensors(c Config, prefix string, seed uint64) []safetensors.Tensor {
	var ts []safetensors.Tensor
	randomWeights(c, rand.New(rand.NewPCG(seed, 7)), 0.5, func(name string, shape []int, v []float32) {
		ts = append(ts, safetensors.F32Tensor(prefix+name, shape, v))
	})
	return ts
}

// randomWeights calls fn with normal(0, std) values for every tensor of c.
func randomWeights(c Config, rng *rand.Rand, std float64, fn func(name string, shape []int, v []float32)) {
	leaves, _ := hfbind.Walk(&Weights{}, env(c))
	for _, l := range leaves {
		n := 1
		for _, d := range l.Shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		fn(l.Name, l.Shape, v)
	}
}

func writeModel(t *testing.T, c Config, ts []safetensors.Tensor) string {
	t.Helper()
	dir := t.TempDir()
	js := `{"model_type":"bert","vocab_size":50,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":16,"max_position_embeddings":32}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBindStrict(t *testing.T) {
	c := tinyConfig()
	b := newBackend(t)
	good := tinyTensors(c, "", 1)
	var drop, reshape []safetensors.Tensor
	for _, x := range good {
		switch x.Name {
		case "encoder.layer.0.attention.self.key.bias":
			continue // missing
		case "encoder.layer.0.intermediate.dense.weight":
			x.Shape = []int{8, 16} // transposed
		}
		drop = append(drop, x)
	}
	reshape = append(drop, safetensors.F32Tensor("cls.predictions.bias", []int{50}, make([]float32, 50)))
	_, err := Load(writeModel(t, c, reshape), b)
	var be *hfbind.BindError
	if !errors.As(err, &be) {
		t.Fatalf("want *hfbind.BindError, got %v", err)
	}
	if strings.Join(be.Missing, ",") != "encoder.layer.0.attention.self.key.bias" {
		t.Errorf("missing %v", be.Missing)
	}
	if len(be.Misshaped) != 1 || !strings.Contains(be.Misshaped[0], "tensor encoder.layer.0.intermediate.dense.weight has shape [8 16], config.json implies [16 8]") {
		t.Errorf("misshaped %v", be.Misshaped)
	}
	if strings.Join(be.Unused, ",") != "cls.predictions.bias" {
		t.Errorf("unused %v", be.Unused)
	}
	if !strings.Contains(err.Error(), "model.safetensors") && !strings.Contains(err.Error(), be.Source) {
		t.Errorf("error %q must name the source", err)
	}

	// The same weights with a "bert." prefix, a pooler and a position_ids
	// buffer load and give the same embeddings.
	plain, err := Load(writeModel(t, c, good), b)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	prefixed := append(tinyTensors(c, "bert.", 1),
		safetensors.F32Tensor("bert.pooler.dense.weight", []int{8, 8}, make([]float32, 64)),
		safetensors.F32Tensor("bert.pooler.dense.bias", []int{8}, make([]float32, 8)),
		safetensors.I64Tensor("bert.embeddings.position_ids", []int{1, 32}, make([]int64, 32)))
	pre, err := Load(writeModel(t, c, prefixed), b)
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Close()
	seqs := [][]int{{1, 5, 7, 2}, {1, 9, 2}}
	e1, err := plain.Embed(seqs)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := pre.Embed(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range e1 {
		if e1[i] != e2[i] {
			t.Fatalf("prefixed model differs at %d: %v vs %v", i, e1[i], e2[i])
		}
	}
}

// TestReference compares the graph with a plain-loop implementation of the
// same equations on a random model (a loop-vs-vectorised check).
func TestReference(t *testing.T) {
	c := tinyConfig()
	ts := tinyTensors(c, "", 3)
	enc, err := Load(writeModel(t, c, ts), newBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	w := map[string][]float32{}
	for _, x := range ts {
		w[x.Name] = decodeF32(x.Data)
	}
	seqs := [][]int{{1, 4, 9, 16, 25, 36, 49, 2}, {1, 3, 2}}
	got, err := enc.Embed(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		want := referenceEmbed(c, w, s)
		for h := range want {
			if d := math.Abs(float64(got[i*c.HiddenSize+h]) - want[h]); d > 1e-5 {
				t.Fatalf("seq %d dim %d: graph %v, loops %v", i, h, got[i*c.HiddenSize+h], want[h])
			}
		}
	}
}

func decodeF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return v
}

// referenceEmbed is BERT + mean pooling + L2 norm in float64 loops for one
// unpadded sequence.
func referenceEmbed(c Config, w map[string][]float32, ids []int) []float64 {
	H, T, nH := c.HiddenSize, len(ids), c.NumAttentionHeads
	dH := H / nH
	lin := func(x [][]float64, name string, out int) [][]float64 {
		W, b := w[name+".weight"], w[name+".bias"]
		in := len(x[0])
		y := make([][]float64, len(x))
		for t := range x {
			y[t] = make([]float64, out)
			for o := 0; o < out; o++ {
				s := float64(b[o])
				for i := 0; i < in; i++ {
					s += x[t][i] * float64(W[o*in+i])
				}
				y[t][o] = s
			}
		}
		return y
	}
	ln := func(x [][]float64, name string) {
		g, b := w[name+".weight"], w[name+".bias"]
		for t := range x {
			var mu, v float64
			for _, a := range x[t] {
				mu += a
			}
			mu /= float64(H)
			for _, a := range x[t] {
				v += (a - mu) * (a - mu)
			}
			v /= float64(H)
			for i := range x[t] {
				x[t][i] = (x[t][i]-mu)/math.Sqrt(v+c.LayerNormEps)*float64(g[i]) + float64(b[i])
			}
		}
	}
	x := make([][]float64, T)
	for t, id := range ids {
		x[t] = make([]float64, H)
		for i := 0; i < H; i++ {
			x[t][i] = float64(w["embeddings.word_embeddings.weight"][id*H+i]) +
				float64(w["embeddings.position_embeddings.weight"][t*H+i]) +
				float64(w["embeddings.token_type_embeddings.weight"][i])
		}
	}
	ln(x, "embeddings.LayerNorm")
	for l := 0; l < c.NumHiddenLayers; l++ {
		p := "encoder.layer." + string(rune('0'+l)) + "."
		q, k, v := lin(x, p+"attention.self.query", H), lin(x, p+"attention.self.key", H), lin(x, p+"attention.self.value", H)
		att := make([][]float64, T)
		for t := range att {
			att[t] = make([]float64, H)
		}
		for n := 0; n < nH; n++ {
			for i := 0; i < T; i++ {
				s := make([]float64, T)
				m := math.Inf(-1)
				for j := 0; j < T; j++ {
					for d := 0; d < dH; d++ {
						s[j] += q[i][n*dH+d] * k[j][n*dH+d]
					}
					s[j] /= math.Sqrt(float64(dH))
					m = max(m, s[j])
				}
				var z float64
				for j := range s {
					s[j] = math.Exp(s[j] - m)
					z += s[j]
				}
				for j := 0; j < T; j++ {
					for d := 0; d < dH; d++ {
						att[i][n*dH+d] += s[j] / z * v[j][n*dH+d]
					}
				}
			}
		}
		o := lin(att, p+"attention.output.dense", H)
		for t := range x {
			for i := range x[t] {
				x[t][i] += o[t][i]
			}
		}
		ln(x, p+"attention.output.LayerNorm")
		u := lin(x, p+"intermediate.dense", c.IntermediateSize)
		for t := range u {
			for i, a := range u[t] {
				u[t][i] = a * 0.5 * (1 + math.Erf(a/math.Sqrt2))
			}
		}
		y := lin(u, p+"output.dense", H)
		for t := range x {
			for i := range x[t] {
				x[t][i] += y[t][i]
			}
		}
		ln(x, p+"output.LayerNorm")
	}
	e := make([]float64, H)
	for t := range x {
		for i := range e {
			e[i] += x[t][i] / float64(T)
		}
	}
	var n float64
	for _, a := range e {
		n += a * a
	}
	for i := range e {
		e[i] /= math.Sqrt(n)
	}
	return e
}

// BenchmarkEmbed measures passages/s on the golden tiny model: batches of 32
// passages of 64 tokens.
func BenchmarkEmbed(b *testing.B) {
	dir := filepath.Dir(sharedtest.Path(b, "golden", "bert-tiny", "model.safetensors"))
	enc, err := Load(dir, newBackend(b))
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	seqs := make([][]int, 32)
	for i := range seqs {
		s := []int{101}
		for len(s) < 63 {
			s = append(s, 1000+rng.IntN(20000))
		}
		seqs[i] = append(s, 102)
	}
	if _, err := enc.Embed(seqs); err != nil { // compile outside the timer
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := enc.Embed(seqs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(seqs)*b.N)/b.Elapsed().Seconds(), "passages/s")
}

// TestHugeLayerCountRejected: num_hidden_layers = 10^6 over a tiny model's
// weights is refused before anything per layer is built.
func TestHugeLayerCountRejected(t *testing.T) {
	c := tinyConfig()
	r := randomReader(c, 1)
	c.NumHiddenLayers = 1_000_000
	_, err := FromReader(c, r, "tiny", newBackend(t), Options{})
	if err == nil || !strings.Contains(err.Error(), "num_hidden_layers = 1000000, the weights hold") {
		t.Fatalf("error %v", err)
	}
}
