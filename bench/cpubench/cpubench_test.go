package cpubench

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends/simplego"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/backend/gocpu"
	"github.com/cas-engine/cas/internal/blascore"
	"github.com/cas-engine/cas/internal/cputime"
	"github.com/cas-engine/cas/internal/wanterr"
	"github.com/cas-engine/cas/model/qwen"
)

// tinyConfig is a Qwen3 model small enough for tests.
var tinyConfig = &qwen.Config{
	Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
	VocabSize: 96, HiddenSize: 32, IntermediateSize: 48, NumHiddenLayers: 2,
	NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 8, HiddenAct: "silu",
	RMSNormEps: 1e-6, RopeTheta: 1e4, TieWordEmbeddings: true, MaxPositionEmbeddings: 256,
}

func TestParsePeer(t *testing.T) {
	good := `{"peer": "torch 1.13.0a0 cpu", "blas": "openblas-pthread/libblas.so.3", "threads": 2, "params": 4000512, "batch": 8, "seqlen": 256, "forward_s": 2.2, "forward_tokens_per_s": 931.0, "train_step_s": 8.1, "train_tokens_per_s": 252.0}`
	cases := []struct {
		name, out string
		fwd       float64
		wantErr   string
	}{
		{"line", good + "\n", 2.2, ""},
		{"mixed", "warning: something\n" + good + "\n\n", 2.2, ""},
		{"empty", "", 0, "no JSON line"},
		{"missing", `{"peer": "x", "forward_s": 1}`, 0, "missing forward_s or train_step_s"},
		{"broken", `{"peer": `, 0, "line 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParsePeer([]byte(c.out))
			if wanterr.Check(t, c.name, err, c.wantErr) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.ForwardS != c.fwd || p.TrainStepS != 8.1 || p.Threads != 2 || p.Params != 4000512 || p.BLAS != "openblas-pthread/libblas.so.3" {
				t.Fatalf("parsed %+v", p)
			}
			if fair, why := p.Fair(); !fair {
				t.Fatalf("OpenBLAS peer judged unfair: %s", why)
			}
		})
	}
}

// TestRunPeerProcess runs a stand-in peer script (a shell script printing
// the JSON line and checking its arguments) through RunPeer.
func TestRunPeerProcess(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "peer.sh")
	body := `#!/bin/sh
case "$*" in
*"--threads 3"*"--steps 2"*) ;;
*) echo "bad args: $*" >&2; exit 2;;
esac
cfg="$2"
grep -q '"hidden_size":32' "$cfg" || { echo "bad config" >&2; exit 3; }
echo '{"peer": "fake", "threads": 3, "forward_s": 0.5, "forward_tokens_per_s": 10, "train_step_s": 1.5}'
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := RunPeer("/bin/sh", script, tinyConfig, 2, 16, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Peer != "fake" || p.ForwardS != 0.5 || p.TrainStepS != 1.5 {
		t.Fatalf("peer %+v", p)
	}
	// The script names no BLAS: no ratio may be printed against it.
	if fair, why := p.Fair(); fair || why != "BLAS not reported" {
		t.Fatalf("a peer without a BLAS judged fair=%v (%s)", fair, why)
	}
	if _, err := RunPeer("/bin/sh", script, tinyConfig, 2, 16, 1, 2); err == nil || !strings.Contains(err.Error(), "bad args") {
		t.Fatalf("error %v, want the script's message", err)
	}
	if _, err := RunPeer("/nonexistent/python", script, tinyConfig, 2, 16, 3, 2); err == nil {
		t.Fatal("missing interpreter accepted")
	}
}

// TestTrainerLearns: repeated AdamW steps on one batch lower the loss, on
// gocpu, and the first loss is near ln(vocab) for a random model.
func TestTrainerLearns(t *testing.T) {
	be, err := gocpu.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Finalize()
	m, err := qwen.NewRandom(tinyConfig, be, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTrainer(m, 3e-3)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	ids := make([]int32, 2*17)
	for i := range ids {
		ids[i] = int32(rng.IntN(tinyConfig.VocabSize))
	}
	// The loss is the peer's: mean cross-entropy of ids[:, 1:] under the
	// logits of the prefixes, computed here from the model's logits.
	mask := make([]int32, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	logits, err := m.Logits(ids, mask, 2, 17)
	if err != nil {
		t.Fatal(err)
	}
	V := tinyConfig.VocabSize
	var ce float64
	for b := range 2 {
		for s := range 16 {
			row := logits[(b*17+s)*V : (b*17+s+1)*V]
			mx := float64(slices.Max(row))
			var sum float64
			for _, z := range row {
				sum += math.Exp(float64(z) - mx)
			}
			ce += mx + math.Log(sum) - float64(row[ids[b*17+s+1]])
		}
	}
	ce /= 2 * 16
	first, err := tr.Step(ids, 2, 17)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(first)-ce) > 1e-4*ce {
		t.Fatalf("first loss %v, cross-entropy of the logits %v", first, ce)
	}
	if first < 4 || first > 5.2 { // ln 96 = 4.56
		t.Fatalf("first loss %v, want about ln(96)", first)
	}
	last := first
	for range 15 {
		if last, err = tr.Step(ids, 2, 17); err != nil {
			t.Fatal(err)
		}
	}
	if !(last < first-0.5) {
		t.Fatalf("loss %v → %v: not learning", first, last)
	}
	if _, err := tr.Step(ids, 3, 17); err == nil {
		t.Fatal("wrong batch accepted")
	}
}

// TestModelFiguresBothBackends measures the tiny model on both backends:
// every figure is positive.
func TestModelFiguresBothBackends(t *testing.T) {
	opt := Options{Batch: 2, SeqLen: 16, Steps: 1, DecodeTokens: 4}
	opt.defaults()
	for _, name := range []string{"gocpu", "go"} {
		var be interface{ Finalize() }
		var f ModelFigures
		var err error
		if name == "go" {
			// Sequential ops: GoMLX v0.26's simplego deadlocks here now and
			// then on a 2-CPU machine when parallel op tasks fill its worker
			// pool and each waits in DotGeneral for a worker of the same
			// pool (all in sync.Cond.Wait; main at ca5fde0 too).
			b, e := simplego.New("ops_sequential")
			if e != nil {
				t.Fatal(e)
			}
			be, err = b, modelFigures(tinyConfig, b, &opt, true, true, true, &f)
		} else {
			b, e := gocpu.New("")
			if e != nil {
				t.Fatal(e)
			}
			be, err = b, modelFigures(tinyConfig, b, &opt, true, true, true, &f)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		be.Finalize()
		if !(f.ForwardS > 0 && f.ForwardTokS > 0 && f.TrainStepS > 0 && f.DecodeTokS > 0) {
			t.Fatalf("%s: figures %+v", name, f)
		}
	}
}

// TestMeasureRounds alternates gocpu's tiny-model figures with a stand-in
// peer script for three rounds and checks every round was measured and
// the first is the table's.
func TestMeasureRounds(t *testing.T) {
	script := filepath.Join(t.TempDir(), "peer.sh")
	body := `#!/bin/sh
echo '{"peer": "fake", "blas": "openblas-pthread/libblas.so.3", "threads": 1, "forward_s": 0.5, "forward_tokens_per_s": 64, "train_step_s": 2}'
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	opt := Options{Batch: 2, SeqLen: 16, Steps: 1, Rounds: 3, Threads: 1, PeerScript: script, Python: "/bin/sh"}
	opt.defaults()
	b, err := gocpu.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	row := &ModelRow{Name: "tiny", Fast: ModelFigures{ForwardTokS: 1000, TrainStepS: 0.25},
		Peer: &PeerFigures{ForwardTokS: 50, TrainStepS: 1}}
	steps := 0
	if err := measureRounds(tinyConfig, b, &opt, row, func(string) { steps++ }); err != nil {
		t.Fatal(err)
	}
	if len(row.Rounds) != 3 || steps != 4 {
		t.Fatalf("%d rounds, %d progress steps: %+v", len(row.Rounds), steps, row.Rounds)
	}
	if row.Rounds[0] != (Round{ForwardTokS: 1000, TrainStepS: 0.25, PeerForwardTokS: 50, PeerTrainStepS: 1}) {
		t.Fatalf("round 1 %+v is not the table's figures", row.Rounds[0])
	}
	for _, rd := range row.Rounds[1:] {
		if !(rd.ForwardTokS > 0 && rd.TrainStepS > 0) || rd.PeerForwardTokS != 64 || rd.PeerTrainStepS != 2 {
			t.Fatalf("round %+v", rd)
		}
	}
	opt.Python = "/nonexistent/python"
	if err := measureRounds(tinyConfig, b, &opt, &ModelRow{Name: "tiny", Peer: &PeerFigures{}}, func(string) {}); err == nil || !strings.Contains(err.Error(), "round 2") {
		t.Fatalf("a failing peer in round 2: error %v", err)
	}
}

// TestRunAndReport runs the GEMM part at toy sizes and checks the report.
func TestRunAndReport(t *testing.T) {
	var log bytes.Buffer
	r, err := Run(Options{Sizes: []int{48, 64}, MinTime: time.Millisecond, SkipModels: true, Threads: 2, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if !(r.PeakFMA > 0 && r.PeakFMA1 > 0 && r.PeakVek > 0 && r.Threads == 2) {
		t.Fatalf("peaks %+v", r)
	}
	// 2 sizes, the 1-thread row, 4 decode shapes, 2 GoMLX rows.
	if len(r.GEMM) != 2+1+len(decodeShapes)+2 {
		t.Fatalf("%d GEMM rows: %+v", len(r.GEMM), r.GEMM)
	}
	for _, g := range r.GEMM {
		if !(g.GFLOPS > 0) {
			t.Fatalf("row %+v", g)
		}
	}
	if !(r.StreamBps > 0) {
		t.Fatalf("stream bandwidth %v", r.StreamBps)
	}
	r.GEMMRate, r.StreamBps = 100, 3e9
	fig := ModelFigures{ForwardS: 0.5, ForwardTokS: 4096, TrainStepS: 1.5, DecodeTokS: 300, DecodeBF16TokS: 450}
	row := ModelRow{Name: "m", Params: 4_000_000, Batch: 8, SeqLen: 256, Fast: fig, Plain: ModelFigures{DecodeTokS: 100},
		ForwardFLOPs: 25e9, TrainFLOPs: 75e9, DecodeBytes: 16e6,
		Peer:         &PeerFigures{ForwardS: 2, ForwardTokS: 1024, TrainStepS: 6, BLAS: "openblas-pthread/libblas.so.3"},
		TrainProfile: []gocpu.OpTime{{Op: "DotGeneral", Where: "gocpu", Calls: 10, Time: 3 * time.Second}, {Op: "Equal", Where: "simplego", Size: 64, Calls: 1, Time: time.Second}}}
	row.Rounds = []Round{{4096, 1.5, 1024, 6}, {2048, 2, 1024, 5}, {3000, 1.2, 1500, 4.8}}
	ref := row
	ref.Name, ref.TrainProfile = "r", nil
	ref.Peer = &PeerFigures{ForwardS: 2, ForwardTokS: 1024, TrainStepS: 6, BLAS: "reference:blas/libblas.so.3"}
	r.Models = []ModelRow{row, ref}
	var out bytes.Buffer
	r.WriteMarkdown(&out)
	text := out.String()
	for _, want := range []string{"FMA peak", "vek", "64³ x·Wᵀ", "GoMLX DotGeneral",
		"| m | 4.0M | 4096 | 1024 | 4.00× | 1.500 s | 6.000 s | 4.00× | openblas-pthread/libblas.so.3 |",
		"| r | 4.0M | 4096 | 1024 | no ratio: reference BLAS | 1.500 s | 6.000 s | no ratio: reference BLAS |",
		"PyTorch peer for r is not a fair peer",
		// 25 GFLOP at 100 GFLOP/s: 0.25 s, measured 0.5 s; 75 GFLOP: 0.75 s, measured 1.5 s.
		// The peer's medians over the rounds: forward 2048 tokens at 1024,
		// 1024, 1500 tok/s, 2 s; train 5 s: 8× and 6.67× the roofline.
		"| m | 25.0 | 0.250 s | 0.500 s | 2.00× | 8.00× | 75.0 | 0.750 s | 1.500 s | 2.00× | 6.67× |",
		"| r | 25.0 | 0.250 s | 0.500 s | 2.00× | – | 75.0 | 0.750 s | 1.500 s | 2.00× | – |",
		// 3 GB/s over 16 MB a token: 188 tok/s; 300 measured; BF16 375, 450.
		"| m | 16.0 | 188 | 300.0 | 160% | 375 | 450.0 | 120% | 2.40× | 100.0 | 3.00× |",
		"m in 3 alternated rounds", "| 2 | 2048 | 1024 | 2.00× | 2.000 s | 5.000 s | 2.50× |",
		// Forward ratios 4, 2, 2: median 2, range 2–4; train 4, 2.5, 4.
		"| median (range) | | | 2.00× (2.00×–4.00×) | | | 4.00× (2.50×–4.00×) |",
		// Against the reference BLAS the rounds print no ratio either.
		"r in 3 alternated rounds", "| 2 | 2048 | 1024 | – | 2.000 s | 5.000 s | – |",
		"| DotGeneral | gocpu | 10 | 3000.00 ms | 75% |", "| Equal, 64 elements | simplego | 1 | 1000.00 ms | 25% |",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("report lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "| median (range)") != 1 {
		t.Fatalf("a median ratio against the reference BLAS:\n%s", text)
	}
	if strings.Contains(text, "| r | 4.0M | 4096 | 1024 | 4.00×") {
		t.Fatalf("a ratio against the reference BLAS:\n%s", text)
	}
}

// TestMatrixFLOPs: the roofline's numerator by hand for a tiny shape, and
// the decode bytes with tied and untied embeddings.
func TestMatrixFLOPs(t *testing.T) {
	cfg := *tinyConfig
	// per layer q,o: d·h·hd each; k,v: d·kv·hd each; MLP 3·d·I.
	hd := cfg.HeadDim
	layer := 2*cfg.HiddenSize*cfg.NumAttentionHeads*hd + 2*cfg.HiddenSize*cfg.NumKeyValueHeads*hd + 3*cfg.HiddenSize*cfg.IntermediateSize
	weights := cfg.NumHiddenLayers*layer + cfg.VocabSize*cfg.HiddenSize
	b, T := 2, 5
	want := float64(2*b*T*weights + 4*b*cfg.NumAttentionHeads*T*T*hd*cfg.NumHiddenLayers)
	if got := MatrixFLOPs(&cfg, b, T); got != want {
		t.Fatalf("MatrixFLOPs %v, want %v", got, want)
	}
	if got := TrainFLOPs(&cfg, b, T+1); got != 3*want {
		t.Fatalf("TrainFLOPs %v, want %v", got, 3*want)
	}
	tied := cfg
	tied.TieWordEmbeddings = true
	untied := cfg
	untied.TieWordEmbeddings = false
	if d := StreamedBytes(&tied, 4) - 4*tied.NumParameters(); d != 0 {
		t.Fatalf("tied: %d bytes off", d)
	}
	if got, want := StreamedBytes(&untied, 4), 4*(untied.NumParameters()-int64(untied.VocabSize*untied.HiddenSize)); got != want {
		t.Fatalf("untied: %d bytes, want %d", got, want)
	}
}

func TestLoadModelSpec(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","vocab_size":96,"hidden_size":32,"intermediate_size":48,
"num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,"hidden_act":"silu",
"max_position_embeddings":64,"rms_norm_eps":1e-6,"rope_theta":10000,"tie_word_embeddings":true}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, name := range map[string]string{dir: filepath.Base(dir), filepath.Join(dir, "config.json"): filepath.Base(dir), filepath.Join(dir, "policy.json"): "policy"} {
		ms, err := LoadModelSpec(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if ms.Name != name || ms.Config.HiddenSize != 32 {
			t.Fatalf("%s: %+v", path, ms)
		}
	}
	if _, err := LoadModelSpec(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("missing file accepted")
	}
}

// BenchmarkQwen times the forward pass, the training step and decoding of
// the 4M model (and the 25M one with CAS_BENCH_25M=1) on gocpu, and decoding
// on the pure-Go backend; -benchtime 1x gives one measurement each.
func BenchmarkQwen(b *testing.B) {
	specs := DefaultModels()[:1]
	if os.Getenv("CAS_BENCH_25M") == "1" {
		specs = DefaultModels()
	}
	for _, ms := range specs {
		fast, err := backend.NewWithConfig(gocpu.BackendName) // as training creates it
		if err != nil {
			b.Fatal(err)
		}
		m, err := qwen.NewRandom(ms.Config, fast, 1)
		if err != nil {
			b.Fatal(err)
		}
		const batch, seqLen = 8, 256
		rng := rand.New(rand.NewPCG(3, 4))
		ids, mask := make([]int32, batch*seqLen), make([]int32, batch*seqLen)
		for i := range ids {
			ids[i], mask[i] = int32(rng.IntN(ms.Config.VocabSize)), 1
		}
		b.Run(ms.Name+"/forward/gocpu", func(b *testing.B) {
			if err := ForwardPass(m, ids, mask, batch, seqLen); err != nil {
				b.Fatal(err)
			}
			cpu0 := cputime.Process()
			for b.Loop() {
				if err := ForwardPass(m, ids, mask, batch, seqLen); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch*seqLen)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric((cputime.Process()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
		})
		b.Run(ms.Name+"/trainstep/gocpu", func(b *testing.B) {
			tr, err := NewTrainer(m, 1e-4)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tr.Step(ids, batch, seqLen); err != nil {
				b.Fatal(err)
			}
			cpu0 := cputime.Process()
			for b.Loop() {
				if _, err := tr.Step(ids, batch, seqLen); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time is steadier than wall time on a shared machine.
			b.ReportMetric((cputime.Process()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
		})
		plain, err := simplego.New("")
		if err != nil {
			b.Fatal(err)
		}
		pm, err := qwen.NewRandom(ms.Config, plain, 1)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			m    *qwen.Model
		}{{"gocpu", m}, {"go", pm}} {
			b.Run(fmt.Sprintf("%s/decode/%s", ms.Name, c.name), func(b *testing.B) {
				var tps float64
				for b.Loop() {
					if tps, err = DecodeSpeed(c.m, 1, 64, 32); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(tps, "tok/s")
			})
		}
		fast.Finalize()
		plain.Finalize()
	}
}

// FuzzParsePeer: the peer's output never makes ParsePeer panic, and an
// accepted line has positive timings.
func FuzzParsePeer(f *testing.F) {
	f.Add([]byte(`{"peer": "torch", "forward_s": 2.2, "train_step_s": 8.1}`))
	f.Add([]byte("noise\n{\"forward_s\": -1, \"train_step_s\": 1}\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePeer(data)
		if err == nil && !(p.ForwardS > 0 && p.TrainStepS > 0) {
			t.Fatalf("accepted %+v", p)
		}
	})
}

func TestLimits(t *testing.T) {
	for _, c := range []struct {
		r        Report
		fma, vek float64
	}{
		{Report{Threads: 2, PeakFMA: 100, PeakFMA1: 118, PeakVek: 110, PeakVek1: 50}, 236, 110},
		{Report{Threads: 1, PeakFMA: 118, PeakFMA1: 117, PeakVek: 52, PeakVek1: 53}, 118, 53},
	} {
		if fma, vek := c.r.Limits(); fma != c.fma || vek != c.vek {
			t.Fatalf("%+v: limits %v %v, want %v %v", c.r, fma, vek, c.fma, c.vek)
		}
	}
}

// TestProfileModel: the per-op profile of a tiny model's forward pass,
// training step and decode names the products and the fused kernels (the
// attention forward in the forward pass, forward and backward in training, its softmax in decoding, SwiGLU, RMSNorm's
// gradient, the rotary embedding and its gradient) and counts one decode run's ops; with
// ProfileShapes every row has its output size.
func TestProfileModel(t *testing.T) {
	for _, shapes := range []bool{false, true} {
		opt := Options{Batch: 2, SeqLen: 16, DecodeTokens: 4, ProfileShapes: shapes}
		opt.defaults()
		var row ModelRow
		if err := profileModel(tinyConfig, &opt, &row); err != nil {
			t.Fatal(err)
		}
		for name, prof := range map[string][]gocpu.OpTime{"forward": row.ForwardProfile, "train": row.TrainProfile, "decode": row.DecodeProfile} {
			found := map[string]bool{}
			for _, p := range prof {
				if p.Where == "gocpu" && p.Calls > 0 && p.Time > 0 {
					found[p.Op] = true
				}
				if shapes && p.Size <= 0 && p.Op != "Reshape" {
					t.Errorf("%s profile by size: %+v has no size", name, p)
				}
			}
			// Training attends through the fused flash-style kernels;
			// decoding (the KV-cache step graph) through the softmax.
			want := []string{"DotGeneral", "Softmax", "MulSilu", "Rope"}
			switch name {
			case "forward":
				want = []string{"DotGeneral", "Attention", "MulSilu", "Rope"}
			case "train":
				want = []string{"DotGeneral", "Attention", "AttentionGrad", "MulSilu", "SiluGradMul", "RMSNormGrad", "Rope", "RopeGrad"}
			}
			for _, op := range want {
				if !found[op] {
					t.Fatalf("%s profile lacks %s: %+v", name, op, prof)
				}
			}
		}
		if row.DecodeProfileTokens != 4 {
			t.Fatalf("decode tokens %d", row.DecodeProfileTokens)
		}
	}
}

// TestBF16WeightModel: the model stored in bfloat16 and computing in
// float32 gives logits within the weights' rounding of the float32 model
// (relative to max |logit|: measured max 0.0031 and mean 0.00057 on this
// tiny model; the bounds are the bf16 model's of model/qwen, 0.1 and
// 0.01), decodes the same greedy tokens as often as such rounding allows,
// and its decode graph casts no weight: gocpu folds each cast into the
// product that reads it (the same ConvertDType count as the float32 model).
func TestBF16WeightModel(t *testing.T) {
	be, err := backend.NewWithConfig(gocpu.BackendName + ":profile")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Finalize()
	prof := be.(*gocpu.Backend)
	m32, err := qwen.NewRandom(tinyConfig, be, 3)
	if err != nil {
		t.Fatal(err)
	}
	m16, err := NewBF16WeightModel(tinyConfig, be, 3)
	if err != nil {
		t.Fatal(err)
	}
	const b, T = 2, 12
	ids, mask := make([]int32, b*T), make([]int32, b*T)
	for i := range ids {
		ids[i], mask[i] = int32((i*37+5)%tinyConfig.VocabSize), 1
	}
	l32, err := m32.Logits(ids, mask, b, T)
	if err != nil {
		t.Fatal(err)
	}
	l16, err := m16.Logits(ids, mask, b, T)
	if err != nil {
		t.Fatal(err)
	}
	var scale, maxD, sumD float64
	for _, v := range l32 {
		scale = max(scale, math.Abs(float64(v)))
	}
	for i := range l32 {
		d := math.Abs(float64(l16[i]-l32[i])) / scale
		maxD, sumD = max(maxD, d), sumD+d
	}
	mean := sumD / float64(len(l32))
	t.Logf("bf16 weights vs f32: max |Δ|/max|logit| %.3g, mean %.3g", maxD, mean)
	if maxD > 0.1 || mean > 0.01 || maxD == 0 {
		t.Fatalf("bf16-weight logits: max rel %.3g (want in (0, 0.1]), mean %.3g (want ≤ 0.01)", maxD, mean)
	}
	// Elements cast per decoded token: the float32 model casts ids and
	// positions; the bf16 one also its norm weights (vectors of the hidden
	// or head size) and the gathered embedding row, never a matrix.
	castElems := func(m *qwen.Model) int64 {
		// The graph step: the host step reads bf16 weights without casts.
		m.SetGraphStep(true)
		if _, err := DecodeSpeed(m, 1, 8, 2); err != nil { // compiles
			t.Fatal(err)
		}
		if _, err := decodeSpeed(m, 1, 8, 4, func() { prof.Profile(true) }); err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, p := range prof.Profile(true) {
			if p.Op == "ConvertDType" {
				n += p.Elements
			}
		}
		return n / 4
	}
	c := tinyConfig
	norms := int64(c.NumHiddenLayers*(2*c.HiddenSize+2*c.HeadDim) + c.HiddenSize)
	if c32, c16 := castElems(m32), castElems(m16); c16-c32 != norms+int64(c.HiddenSize) {
		t.Fatalf("decode casts %d elements a token with bf16 weights, %d with f32: want %d more (norm weights and the embedding row), no weight matrix",
			c16, c32, norms+int64(c.HiddenSize))
	}
}

// TestRunDecodeOnly runs the decode section alone on a tiny model: the
// bandwidth and decode figures (wall and CPU time) are measured, nothing
// else is, and the report prints the decode tables only, the CPU-time one
// with the bound worked out by hand below.
func TestRunDecodeOnly(t *testing.T) {
	r, err := Run(Options{DecodeOnly: true, Models: []ModelSpec{{Name: "tiny", Config: tinyConfig}}, MinTime: time.Millisecond, DecodeTokens: 4, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !r.DecodeOnly || len(r.GEMM) != 0 || r.PeakFMA != 0 || len(r.Models) != 1 {
		t.Fatalf("report %+v", r)
	}
	f := r.Models[0].Fast
	if !(r.StreamBps > 0 && r.StreamCPUBps > 0 && f.DecodeTokS > 0 && f.DecodeBF16TokS > 0 && f.DecodeCPUs > 0 && f.DecodeBF16CPUs > 0) || f.TrainStepS != 0 || f.ForwardS != 0 {
		t.Fatalf("figures: stream %v B/s, %v B/cpu-s; %+v", r.StreamBps, r.StreamCPUBps, f)
	}
	// 16 MB a token at 8 GB per CPU-second: 2 ms; F32 2.5 ms, BF16 1.25 ms.
	r.StreamCPUBps = 8e9
	r.Models[0].DecodeBytes = 16e6
	r.Models[0].Fast.DecodeCPUs, r.Models[0].Fast.DecodeBF16CPUs = 0.0025, 0.00125
	var out bytes.Buffer
	r.WriteMarkdown(&out)
	text := out.String()
	if !strings.Contains(text, "| tiny | 2.000 | 2.500 | 80% | 1.250 | 80% | 1.60× |") || strings.Contains(text, "FMA peak") || strings.Contains(text, "Roofline") {
		t.Fatalf("report:\n%s", text)
	}
}

// TestFairRefusesGenericOpenBLAS: a peer whose OpenBLAS fell back to its
// pre-AVX kernels (blascore's Marker note) gets no ratio.
func TestFairRefusesGenericOpenBLAS(t *testing.T) {
	p := &PeerFigures{BLAS: "openblas-pthread/libopenblasp-r0.3.21.so" + blascore.Marker + "Prescott (pre-AVX kernels: OpenBLAS does not recognise this CPU)"}
	if fair, why := p.Fair(); fair || !strings.Contains(why, "Prescott") {
		t.Fatalf("Fair() = %v, %q", fair, why)
	}
	p.BLAS = "openblas-pthread/libopenblasp-r0.3.21.so"
	if fair, _ := p.Fair(); !fair {
		t.Fatal("a plain OpenBLAS peer should be fair")
	}
	// Forced to the CPU's kernel set by blascore.Prepare: fair.
	p.BLAS += blascore.ForcedMarker + "SkylakeX (OpenBLAS detected Prescott (pre-AVX kernels: it does not recognise this CPU) and the CPU has AVX-512; …)"
	if fair, why := p.Fair(); !fair {
		t.Fatalf("a peer forced to SkylakeX should be fair: %s", why)
	}
}

// TestPeerSeconds: the peer's times behind the roofline table's "PyTorch ÷
// roofline" column.
func TestPeerSeconds(t *testing.T) {
	fair := &PeerFigures{ForwardTokS: 1024, TrainStepS: 6, BLAS: "openblas-pthread/libblas.so.3"}
	rounds := []Round{{1, 1, 512, 4}, {1, 1, 2048, 7}, {1, 1, 1024, 5}, {1, 1, 0, 0}}
	for _, c := range []struct {
		name       string
		row        ModelRow
		fwd, train float64
	}{
		{"no peer", ModelRow{Batch: 8, SeqLen: 256}, 0, 0},
		{"table only", ModelRow{Batch: 8, SeqLen: 256, Peer: fair}, 2, 6},
		// Forward 2048 tokens at 512, 2048, 1024 tok/s: 4, 1, 2 s; the
		// round without a peer is skipped.
		{"rounds", ModelRow{Batch: 8, SeqLen: 256, Peer: fair, Rounds: rounds}, 2, 5},
		{"reference BLAS", ModelRow{Batch: 8, SeqLen: 256, Rounds: rounds,
			Peer: &PeerFigures{ForwardTokS: 1024, TrainStepS: 6, BLAS: "reference:blas/libblas.so.3"}}, 0, 0},
	} {
		if fwd, train := c.row.peerSeconds(); fwd != c.fwd || train != c.train {
			t.Errorf("%s: peerSeconds() = %v, %v; want %v, %v", c.name, fwd, train, c.fwd, c.train)
		}
	}
}
